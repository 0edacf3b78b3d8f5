"""``afl demo``: a few asynchronous clients on MNIST, the first pictures a student should see.

Twenty clients (one third slow) hold two MNIST classes each; FedAvg, QuAFL, FedBuff and FAVAS train them
under the FAVAS paper's time model (:mod:`afl.repro.favas`, scaled down). Writes ``schedule.png`` (who
trains when under FAVAS's server clock), ``accuracy.png`` (test accuracy against simulated time) and
``demo.json`` (the measured curves and costs).
"""
from __future__ import annotations

import json
from pathlib import Path

from .repro.favas import compute_run, plot_accuracy, setting

#: the four methods of the paper, each as its text describes it
DEMO_METHODS = ("fedavg", "quafl", "fedbuff", "favas")


def demo_setting(quick: bool = False):
    """FAVAS's MNIST setting shrunk to 20 clients (s = 5, Z = 5); quick: a shorter simulated time."""
    return setting("favas-table2", quick=False, n=20, s=5, Z=5, seeds=1, eval_every=25.0,
                   total_time=300.0 if quick else 1500.0)


def run_demo(out="results/demo", quick: bool = False, root=None, seed: int = 0, split: str = "noniid_2of3_fast"):
    """Run the four methods once and write the pictures and ``demo.json``; returns the written paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from .data import load_dataset
    from .sim import plot_timeline

    cfg = demo_setting(quick)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = load_dataset(cfg.dataset, root=root, normalize=cfg.normalize)
    runs = [compute_run(cfg, m, split, seed, dataset=data, schedule=True) for m in DEMO_METHODS]

    fig, ax = plt.subplots(figsize=(10, 6))
    favas = next(r for r in runs if r["method"] == "favas")
    plot_timeline(favas["schedule"].timeline, ax=ax, t_max=min(150.0, cfg.total_time),
                  title=f"FAVAS schedule: {cfg.n} clients, server contacts s={cfg.s} every "
                        f"{cfg.server_interval:g} time units")
    fig.tight_layout()
    fig.savefig(out / "schedule.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    plot_accuracy(runs, ax=ax, title=f"MNIST, {cfg.n} clients, 2 classes each, 1/3 slow")
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=120)
    plt.close(fig)

    summary = {"command": "afl demo" + (" --quick" if quick else ""), "setting": cfg.__dict__ | {"split": split},
               "runs": [{k: v for k, v in r.items() if k != "schedule"} for r in runs]}
    (out / "demo.json").write_text(json.dumps(summary, indent=1, default=str))
    for r in runs:
        print(f"{r['method']:>8}: final accuracy {100 * r['final_accuracy']:5.1f}% at simulated time "
              f"{cfg.total_time:g}, {r['server_steps']} server steps, {r['client_steps']} client steps")
    return [out / "schedule.png", out / "accuracy.png", out / "demo.json"]
