"""``afl demo``: asynchronous clients on MNIST, the first pictures and numbers a student should see.

The FAVAS paper's non-IID MNIST setting (100 clients holding two classes each, a third of them slow, s = 20,
K = 20, lr 0.5) over a shorter simulated time. FedAvg, QuAFL, FedBuff and FAVAS (as written, and with
``alpha_bar/alpha``) train on the same clients and the same clock (:mod:`afl.repro.favas`). Prints a result
table with what to notice, and writes ``schedule.png`` (who trains when under FAVAS's server clock),
``accuracy.png`` (test accuracy against simulated time) and ``demo.json`` (the measured curves and costs).
"""
from __future__ import annotations

import json
import textwrap

from .data import load_dataset
from .plots import style
from .repro.favas import compute_run, plot_accuracy, setting
from .results import output_dir, progress_bar
from .sim import plot_timeline

#: the paper's four methods, FedBuff with its concurrency, FAVAS as written and with alpha_bar/alpha
DEMO_METHODS = ("fedavg", "quafl", "fedbuff", "favas", "favas-normalized")
DEMO_SPLIT = "noniid_2of3_fast"
DEMO_TIME, QUICK_TIME = 2000.0, 1000.0

def demo_setting(quick: bool = False):
    """FAVAS's MNIST Table 2 setting (n = 100, s = 20, K = 20, Z = 10) over a shorter simulated time."""
    return setting("favas-table2", quick=False, seeds=1, eval_every=50.0, methods=DEMO_METHODS,
                   splits=(DEMO_SPLIT,), total_time=QUICK_TIME if quick else DEMO_TIME)


def demo_table(runs: list[dict]) -> str:
    """One line per method: final accuracy, server steps, client steps used."""
    lines = [f"{'method':36s} {'final accuracy':>15s} {'server steps':>13s} {'client steps':>13s}"]
    for r in runs:
        lines.append(f"{style(r['method'])['label']:36s} {100 * r['final_accuracy']:14.1f}% {r['server_steps']:13d} "
                     f"{r['client_steps']:13d}")
    return "\n".join(lines)


def caption(runs: list[dict], cfg) -> str:
    """What to notice in the table, with the run's own numbers."""
    r = {x["method"]: x for x in runs}
    acc = {m: f"{100 * x['final_accuracy']:.0f} %" for m, x in r.items()}
    lines = [
        "What to notice (non-IID MNIST: every client holds two classes; a third of the clients are slow):",
        f"- FedAvg made {r['fedavg']['server_steps']} rounds in {cfg.total_time:g} time units: each waits for the "
        f"slowest of its {cfg.s} clients.",
        f"- QuAFL ({acc['quafl']}) lets a contacted client keep its own model, mixed with the server's: the clients "
        "drift towards their own two classes.",
        f"- FedBuff ({acc['fedbuff']}) steps whenever {cfg.Z} updates are in its buffer, and fast clients fill it.",
        f"- FAVAS restarts contacted clients from the server model and divides their progress by alpha = E[steps done],"
        f" so that slow and fast clients count the same ({acc['favas']}); with alpha_bar/alpha an upload also keeps "
        f"the size of an average client's progress, and the server learns faster ({acc['favas-normalized']}).",
        "One seed, shorter than the paper's 5000 time units: `afl repro favas-table2` runs the paper's setting."]
    return "\n".join(textwrap.fill(line, 110, subsequent_indent="  ") for line in lines)


def run_demo(out="results/demo", quick: bool = False, root=None, seed: int = 0, progress: bool = True):
    """Run the demo's methods once, print the table, write the pictures and ``demo.json``; returns the paths."""
    from matplotlib.figure import Figure

    cfg = demo_setting(quick)
    out = output_dir(out)
    data = load_dataset(cfg.dataset, root=root, normalize=cfg.normalize)
    bar = progress_bar(len(cfg.methods), progress)
    runs = []
    for m in cfg.methods:
        bar.set_description(m)
        runs.append(compute_run(cfg, m, cfg.splits[0], seed, dataset=data, schedule=True))
        bar.update(1)
    bar.close()

    timeline = next(r for r in runs if r["method"] == "favas")["schedule"].timeline
    by_class = {cls: [c for c in timeline.clients() if timeline.class_of(c) == cls] for cls in ("fast", "slow")}
    fig = Figure(figsize=(11, 5))
    plot_timeline(timeline, ax=fig.subplots(), clients=by_class["fast"][:8] + by_class["slow"][:4], t_max=120.0,
                  title=f"FAVAS's server clock: every {cfg.server_interval:g} time units it contacts s = {cfg.s} of "
                        f"n = {cfg.n} clients (12 clients shown)")
    fig.tight_layout()
    fig.savefig(out / "schedule.png", dpi=120)

    fig = Figure(figsize=(8, 4.5))
    plot_accuracy(runs, ax=fig.subplots(), title=f"{'QUICK demo: ' if quick else ''}MNIST, n = {cfg.n} clients with "
                  f"2 classes each, 1/3 slow; seed {seed}")
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=120)

    summary = {"command": "afl demo" + (" --quick" if quick else ""), "split": cfg.splits[0], "seed": seed,
               "setting": cfg.__dict__, "runs": [{k: v for k, v in r.items() if k != "schedule"} for r in runs]}
    (out / "demo.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"{'QUICK demo' if quick else 'demo'}: accuracy on the MNIST test set at simulated time {cfg.total_time:g}, "
          f"seed {seed}")
    print(demo_table(runs))
    print()
    print(caption(runs, cfg))
    return [out / "schedule.png", out / "accuracy.png", out / "demo.json"]
