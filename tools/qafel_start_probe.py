"""Where QAFeL's 2-bit clients start, one property at a time (issue 52 §3: why 2/2 reaches the target first).

A 2-bit server leaves the hidden state ``x_hat`` the clients start from about 1.4 server steps from the server model
``x`` (rms; ``results/qafel/hidden-state``), and 2/2 then trains faster than 2/4 and 2/8, whose starts lie within a
quarter step of ``x``. ``x_hat`` differs from ``x`` in two ways at once: it lags (what the broadcasts have not
carried yet) and it is displaced (by their rounding residual). This runs the 2-bit client at Table 1's setting at the
paper's load with its clients starting from

- ``exact``: ``x`` itself (the limit of many server bits: the broadcast no longer matters);
- ``lagged``: ``x`` as it was ``--size`` server steps ago (linear between two server models): a pure lag along the
  trajectory;
- ``displaced``: ``x`` plus a random direction of length ``--size`` times the last server step's, drawn again at
  every server step (a shared start for the clients of a step, as ``x_hat`` is): a pure displacement;
- ``flipped``: ``x - (x_hat - x)``, the 2/2 row's own residual reflected (its length and coordinates' sizes kept,
  its sign turned);
- ``shuffled``: ``x`` plus the 2/2 row's residual with its coordinates permuted within each tensor, afresh after
  every server step (its length and each tensor's share kept, its direction lost).

The first three run the 2/8 row (a start that ignores ``x_hat`` ignores the server's bits); the residual starts run
the 2/2 row, whose hidden state they transform (what it broadcasts and counts is unchanged).

``--size`` defaults to the rms gap of the committed 2/2 run of ``results/qafel/hidden-state`` (over its whole run).
Per start: uploads to the target and the mean accuracy in windows of uploads, beside the committed 2-bit client rows
of the same seed where ``--against`` names them. Writes ``OUT/start-probe.json`` and ``.md``.

    python tools/qafel_start_probe.py --seeds 0 --against results/qafel/hidden-state/hidden-state.json \
        --out results/qafel/start-probe
    python tools/qafel_start_probe.py --seeds 0 --starts flipped,shuffled \
        --against results/qafel/hidden-state/hidden-state.json --out results/qafel/start-probe/residual
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.algorithms.qafel import QAFeL  # noqa: E402
from afl.errors import check_choice, check_real  # noqa: E402
from afl.repro import qafel as qr  # noqa: E402
from afl.repro.runner import afl_commit, machine, write_probe  # noqa: E402

import qafel_probe  # noqa: E402

ROW = "qafel_c2_s8"            # the 2-bit client; the server's bits do not reach a start that ignores x_hat
RESIDUAL_ROW = "qafel_c2_s2"   # the row whose residual x_hat - x the residual starts transform
STARTS = ("exact", "lagged", "displaced", "flipped", "shuffled")
RESIDUAL = ("flipped", "shuffled")
HIDDEN_STATE = ROOT / "results/qafel/hidden-state/hidden-state.json"


class ExactStart(QAFeL):
    """QAFeL whose clients start from the server model ``x`` (broadcasts are still made and counted)."""

    def start_model(self):
        return self.w


class LaggedStart(QAFeL):
    """QAFeL whose clients start from the server model of ``lag`` server steps ago (linear between the two server
    models around it; the initial model before the first steps)."""

    lag = 1.0

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.past = [self.w] * (math.floor(self.lag) + 2)          # x_t, x_{t-1}, ...

    def after_step(self) -> None:
        super().after_step()
        self.past = [self.w] + self.past[:-1]

    def start_model(self):
        whole, part = int(self.lag), self.lag - int(self.lag)
        return self.past[whole] if part == 0 else (1 - part) * self.past[whole] + part * self.past[whole + 1]


class DisplacedStart(QAFeL):
    """QAFeL whose clients start from ``x + offset``: after every server step, ``offset`` is a random direction
    (seeded from the run's seed) of ``radius`` times that step's length."""

    radius = 1.0

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.rng = torch.Generator().manual_seed(2 * fed.seed + 7)
        self.offset = torch.zeros_like(self.w)
        self.before = self.w

    def after_step(self) -> None:
        super().after_step()
        direction = torch.randn(self.w.numel(), generator=self.rng, dtype=torch.float64)
        length = float((self.w - self.before).norm()) * self.radius
        self.offset = (direction * (length / float(direction.norm()))).to(self.w)
        self.before = self.w

    def start_model(self):
        return self.w + self.offset


class ResidualStart(QAFeL):
    """QAFeL whose clients start from ``x + T(x_hat - x)``, ``T`` a transform of the residual (:meth:`transform`),
    made after every server step; the hidden state itself is kept and broadcast as QAFeL keeps it."""

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.start = self.w

    def transform(self, residual):
        raise NotImplementedError

    def after_step(self) -> None:
        super().after_step()
        self.start = self.w + self.transform(self.hidden - self.w)

    def start_model(self):
        return self.start


class FlippedStart(ResidualStart):
    """The residual reflected: clients start from ``x - (x_hat - x)``."""

    def transform(self, residual):
        return -residual


class ShuffledStart(ResidualStart):
    """The residual's coordinates permuted within each tensor of the model, a fresh permutation per server step
    (seeded from the run's seed)."""

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.rng = torch.Generator().manual_seed(2 * fed.seed + 9)
        self.sizes = [math.prod(shape) for shape in fed.engine.model.shapes]

    def transform(self, residual):
        parts = residual.split(self.sizes)
        return torch.cat([part[torch.randperm(part.numel(), generator=self.rng)] for part in parts])


def starting(start: str, size: float) -> type:
    """The learner of ``start`` (:data:`STARTS`) at ``size`` server steps (a residual start has its own size)."""
    check_choice("starts", start, STARTS)
    check_real("size", size, 0, hint="server steps, at least 0")
    if start == "exact":
        return ExactStart
    if start == "lagged":
        return type("LaggedStart", (LaggedStart,), {"lag": size})
    if start == "displaced":
        return type("DisplacedStart", (DisplacedStart,), {"radius": size})
    return FlippedStart if start == "flipped" else ShuffledStart


def row_of(start: str) -> str:
    """The QAFeL row ``start`` runs: the 2/2 one for a residual start, else the 2/8 one."""
    return RESIDUAL_ROW if start in RESIDUAL else ROW


def measured_gap(path: Path = HIDDEN_STATE, method: str = "qafel_c2_s2", seed: int = 0) -> float:
    """The rms distance, in server steps, between ``x`` and ``x_hat`` over a committed hidden-state probe's run."""
    row = next(r for r in json.loads(path.read_text())["rows"] if r["method"] == method and r["seed"] == seed)
    c = row["curve"]
    return math.sqrt(c["hidden_gap"][-1] / c["server_steps"][-1])


def committed_rows(paths: list, seeds: list[int]) -> dict:
    """The 2-bit client rows of ``seeds`` (Table 1's setting) in committed results, qafel-table1 (``runs``) or
    hidden-state (``rows``), by ``(method, seed)``."""
    return {key: run for key, run in qafel_probe.committed_runs(paths, seeds).items()
            if key[0].startswith("qafel_c2_")}


def summary(runs: list[dict], against: dict, width: int, stop: int) -> list[dict]:
    """Per run (a start or a committed row): uploads to target and window means of the accuracy."""
    rows = [{"start": run["start"], "seed": run["seed"], "reached_at_uploads": run["uploads_to_target"],
             "windows": qr.window_means(run["curve"], 0, stop, width), "curve": run["curve"]} for run in runs]
    for (method, seed), run in sorted(against.items()):
        rows.append({"start": f"committed {qr.label(method)}", "seed": seed,
                     "reached_at_uploads": run.get("uploads_to_target", run.get("reached_at_uploads")),
                     "windows": qr.window_means(run["curve"], 0, stop, width), "curve": None})
    return rows


def markdown(result: dict) -> str:
    width, stop, size = result["window"], result["uploads"], result["size"]
    said = {"exact": "`exact` (x)", "lagged": f"`lagged` (x of {size:.3g} server steps ago)",
            "displaced": f"`displaced` (x plus a random direction of {size:.3g} times the last server step's length)",
            "flipped": "`flipped` (x − (x̂ − x), the 2/2 row's residual reflected)",
            "shuffled": "`shuffled` (x plus the 2/2 row's residual, its coordinates permuted within each tensor)"}
    starts = [s for s in STARTS if any(r["start"] == s for r in result["rows"])]
    heads = [f"{a:,}–{a + width:,}" for a in range(0, stop, width)]
    lines = ["# Where QAFeL's 2-bit clients start", "", f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']}", "", f"Setting: {result['setting']}.", "",
             "Starts: " + ", ".join(said[start] for start in starts) + "; the committed rows start from their "
             "hidden state x̂. Mean accuracy (%) in each window of uploads (– where the run had stopped).", "",
             "| start | seed | uploads to target | " + " | ".join(heads) + " |", "|---|---|---|" + "---|" * len(heads)]
    for r in result["rows"]:
        reached = "not reached" if r["reached_at_uploads"] is None else f"{r['reached_at_uploads']:,}"
        cells = ["–" if w is None else f"{100 * w:.2f}" for w in r["windows"]]
        lines.append(f"| {r['start']} | {r['seed']} | {reached} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def arguments():
    """The tool's command line (:func:`qafel_probe.parser` and its own options)."""
    p = qafel_probe.parser(__doc__, uploads=40000, seeds=[0], window=5000,
                           against="committed results (qafel-table1 or hidden-state) whose 2-bit client rows of the "
                                   "same seeds to show")
    p.add_argument("--starts", type=qafel_probe.commas, default=STARTS[:3], help="comma-separated, of "
                   + ", ".join(STARTS) + f" (default: {','.join(STARTS[:3])})")
    p.add_argument("--size", type=float, help="the lag or displacement, in server steps (default: the committed "
                                              "2/2 run's rms gap in results/qafel/hidden-state)")
    return p


def main() -> int:
    p = arguments()
    args = p.parse_args()
    starts = args.starts
    size = measured_gap() if args.size is None else args.size
    rows = tuple(dict.fromkeys(row_of(start) for start in starts))
    cfg = qafel_probe.setting(args, rows)
    keys = [(start, seed) for seed in args.seeds for start in starts]
    results = qr.probe_runs(cfg, [((start, seed), row_of(start), seed, starting(start, size)) for start, seed in keys])
    runs = [dict(run, start=start) for run, (start, _) in zip(results, keys)]
    for run in runs:
        run.pop("learner")
    against = committed_rows(args.against, args.seeds)
    ran = "; ".join(f"{', '.join(s for s in starts if row_of(s) == row)} on {qr.label(row)}" for row in rows)
    setting = f"{qafel_probe.described(args, cfg)}, {ran}, {args.uploads:,} uploads a run at most, one fleet"
    result = {"command": qafel_probe.command("qafel_start_probe.py", p, args), "machine": machine("cpu"),
              "afl_commit": afl_commit(), "setting": setting, "size": size, "window": args.window,
              "uploads": args.uploads, "rows": summary(runs, against, args.window, args.uploads)}
    write_probe(result, args.out, "start-probe", markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
