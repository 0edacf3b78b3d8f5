"""QAFeL's hidden state tested beside its server model, over the plateau at the paper's load (issue 52 §3: 2/2).

The clients of QAFeL train from the hidden state ``x_hat`` (eqs. (3)-(4)), which follows the server model ``x`` a
quantized broadcast at a time; Table 1 tests ``x``. With a 2-bit server the broadcasts err 70 % of what they are
asked to carry and ``x_hat`` lags ``x`` by about 1.8 server steps (``results/qafel/server-channel``), yet 2/2 reaches
the 91 % target before 2/4. This runs the rows asked at Table 1's setting at the paper's load (the target of
``results/qafel/target-probe``, which stops a run where it reaches it) and, at every point of the evaluation grid,
tests ``x_hat`` as it holds there beside ``x``, on the same validation images: whether the model the clients train
from is as good as the one tested, and the two rows' difference in each. Per run, the means in windows of
``--window`` uploads of both accuracies and of their difference (``x - x_hat``). Where ``--against`` names committed
Table 1 results, each run's curve of ``x`` is compared with the committed run of its row and seed: the probe's
extra evaluations change no number of the run it watches (the same numbers), or it says where they part.
Writes ``OUT/hidden-state.json`` and ``.md``.

    python tools/qafel_hidden_state.py --uploads 40000 --seeds 0 --against results/qafel/table1/paper-load/\
qafel-table1.json results/qafel/table1/paper-load-2-4-on-avx2/qafel-table1.json --out results/qafel/hidden-state
    python tools/qafel_hidden_state.py --quick --uploads 300 --out /tmp/hidden-state        # CI-sized
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.algorithms.qafel import QAFeL  # noqa: E402
from afl.repro import qafel as qr  # noqa: E402
from afl.repro.runner import afl_commit, machine, write_probe  # noqa: E402

import qafel_probe  # noqa: E402

ROWS = ("qafel_c2_s2", "qafel_c2_s4")
COMPARED = ("accuracy", "loss", "uploads", "upload_error", "buffer_error")


class HiddenStateProbe(QAFeL):
    """QAFeL that, wherever the history evaluates the server model, also queues an evaluation of the hidden state
    as it holds then (what it trains and sends is unchanged): ``tested`` lists ``(grid time, evaluation)``."""

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.tested: list = []

    def _test_hidden(self, times: list[float]) -> None:
        if times:
            evaluation = self.queue.evaluate(self.hidden)
            self.tested += [(time, evaluation) for time in times]

    def on_server_step(self, t, contacts) -> None:
        self._test_hidden(self.history.pending(t))
        super().on_server_step(t, contacts)

    def finish(self) -> None:
        self._test_hidden(self.history.pending(self.history.total_time, inclusive=True))
        super().finish()


def with_hidden(run: dict) -> dict:
    """``run`` (a :func:`afl.repro.qafel.compute_run` of :class:`HiddenStateProbe`) with its curve's
    ``hidden_accuracy`` and ``hidden_loss``: the hidden state's at each grid time of the curve."""
    learner = run.pop("learner")
    tested = {time: evaluation.value() for time, evaluation in learner.tested}
    curve = run["curve"]
    missing = [t for t in curve["time"] if t not in tested]
    if missing:
        raise RuntimeError(f"the hidden state was not tested at grid times {missing[:3]}")
    curve["hidden_accuracy"] = [tested[t]["accuracy"] for t in curve["time"]]
    curve["hidden_loss"] = [tested[t]["loss"] for t in curve["time"]]
    return run


def summary(runs: list[dict], against: dict, width: int) -> list[dict]:
    """Per run: its curve, window means of both accuracies, of their difference (``lead``) and of how far from
    the server model the clients start (``gap_steps``: root mean square, in server steps, from the run's counters:
    :func:`afl.repro.qafel.channel_errors`), and its agreement with the committed run."""
    rows = []
    for run in runs:
        c = run["curve"]
        stop = -(-max(c["uploads"]) // width) * width
        lead = dict(c, lead=[a - h for a, h in zip(c["accuracy"], c["hidden_accuracy"])])
        gap = qr.window_means(qr.channel_errors(run), 0, stop, width, "gap")
        rows.append({"method": run["method"], "seed": run["seed"], "curve": c,
                     "reached_at_uploads": run.get("uploads_to_target"),
                     "windows": {key: qr.window_means(lead, 0, stop, width, key)
                                 for key in ("accuracy", "hidden_accuracy", "lead")}
                     | {"gap_steps": [None if g is None else math.sqrt(g) for g in gap]},
                     "against_committed": qr.curve_agreement(run, against.get((run["method"], run["seed"])),
                                                             COMPARED)})
    return rows


def markdown(result: dict) -> str:
    width = result["window"]
    lines = ["# QAFeL's hidden state beside its server model", "", f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']}", "", f"Setting: {result['setting']}.", "",
             "Per run and window of uploads: the mean validation accuracy (%) of the server model `x` (what Table 1 "
             "tests) / of the hidden state `x̂` the clients start from (tested at the same grid points on the same "
             "images) / their difference `x − x̂` (points) / how far from `x` the clients start, `|x − x̂|` over "
             "the server step's norm (root mean square over the window's server steps).", ""]
    runs = result["rows"]
    n = max(len(r["windows"]["accuracy"]) for r in runs)
    lines += ["| uploads | " + " | ".join(f"{qr.label(r['method'])} seed {r['seed']}" for r in runs) + " |",
              "|---|" + "---|" * len(runs)]
    for i in range(n):
        cells = []
        for r in runs:
            w = r["windows"]
            cells.append("–" if i >= len(w["accuracy"]) or w["accuracy"][i] is None else
                         f"{100 * w['accuracy'][i]:.2f} / {100 * w['hidden_accuracy'][i]:.2f} / "
                         f"{100 * w['lead'][i]:+.2f} / {w['gap_steps'][i]:.2f}")
        lines.append(f"| {i * width:,}–{(i + 1) * width:,} | " + " | ".join(cells) + " |")
    lines += ["", "| run | uploads to target | against the committed run |", "|---|---|---|"]
    for r in runs:
        a = r["against_committed"]
        said = ("–" if a is None else f"the same numbers, {a['points']} evaluations" if a["same"] else
                f"parts at {a['first_different_uploads']:,} uploads (accuracy {a['accuracy'][0]:.4f} against "
                f"{a['accuracy'][1]:.4f})")
        reached = "not reached" if r["reached_at_uploads"] is None else f"{r['reached_at_uploads']:,}"
        lines.append(f"| {qr.label(r['method'])} seed {r['seed']} | {reached} | {said} |")
    return "\n".join(lines) + "\n"


def compute(p, args) -> tuple[list[dict], dict]:
    """The runs asked (``args.methods`` by ``args.seeds``), as one fleet, and what computed them (command, machine,
    commit, setting)."""
    cfg = qafel_probe.setting(args, args.methods)
    runs = qr.probe_runs(cfg, [((m, s), m, s, HiddenStateProbe) for s in args.seeds for m in args.methods])
    setting = f"{qafel_probe.described(args, cfg)}, {args.uploads:,} uploads a run at most, one fleet"
    return [with_hidden(run) for run in runs], dict(command=qafel_probe.command("qafel_hidden_state.py", p, args),
                                                   machine=machine("cpu"), afl_commit=afl_commit(), setting=setting)


def arguments():
    """The tool's command line (:func:`qafel_probe.parser` and its own options)."""
    p = qafel_probe.parser(__doc__, uploads=40000, seeds=[0], window=5000,
                           against="committed qafel-table1 results whose runs of the same rows and seeds to compare "
                                   "with", methods=ROWS)
    return p


def main() -> int:
    p = arguments()
    args = p.parse_args()
    runs, made = compute(p, args)
    against = qafel_probe.committed_runs(args.against)
    result = made | {"window": args.window, "rows": summary(runs, against, args.window)}
    write_probe(result, args.out, "hidden-state", markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
