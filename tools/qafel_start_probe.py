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
  every server step (a shared start for the clients of a step, as ``x_hat`` is): a pure displacement.

``--size`` defaults to the rms gap of the committed 2/2 run of ``results/qafel/hidden-state`` (over its whole run).
Per start: uploads to the target and the mean accuracy in windows of uploads, beside the committed 2-bit client rows
of the same seed where ``--against`` names them. Writes ``OUT/start-probe.json`` and ``.md``.

    python tools/qafel_start_probe.py --seeds 0 --against results/qafel/hidden-state/hidden-state.json \
        --out results/qafel/start-probe
"""
from __future__ import annotations

import argparse
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
from afl.scoreboard.qafel import LOAD_RUN  # noqa: E402

ROW = "qafel_c2_s8"            # the 2-bit client; the server's bits do not reach a start that ignores x_hat
STARTS = ("exact", "lagged", "displaced")
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


def starting(start: str, size: float) -> type:
    """The learner of ``start`` (:data:`STARTS`) at ``size`` server steps."""
    check_choice("starts", start, STARTS)
    check_real("size", size, 0, hint="server steps, at least 0")
    if start == "exact":
        return ExactStart
    if start == "lagged":
        return type("LaggedStart", (LaggedStart,), {"lag": size})
    return type("DisplacedStart", (DisplacedStart,), {"radius": size})


def measured_gap(path: Path = HIDDEN_STATE, method: str = "qafel_c2_s2", seed: int = 0) -> float:
    """The rms distance, in server steps, between ``x`` and ``x_hat`` over a committed hidden-state probe's run."""
    row = next(r for r in json.loads(path.read_text())["rows"] if r["method"] == method and r["seed"] == seed)
    c = row["curve"]
    return math.sqrt(c["hidden_gap"][-1] / c["server_steps"][-1])


def committed_rows(paths: list, seeds: list[int]) -> dict:
    """The 2-bit client rows of ``seeds`` (Table 1's setting) in committed results, qafel-table1 (``runs``) or
    hidden-state (``rows``), by ``(method, seed)``."""
    rows = {}
    for path in paths:
        saved = json.loads(Path(path).read_text())
        rows |= {(r["method"], r["seed"]): r for r in saved.get("runs", saved.get("rows", []))
                 if r.get("concurrency") is None and r["method"].startswith("qafel_c2_") and r["seed"] in seeds}
    return rows


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
    width, stop = result["window"], result["uploads"]
    heads = [f"{a:,}–{a + width:,}" for a in range(0, stop, width)]
    lines = ["# Where QAFeL's 2-bit clients start", "", f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']}", "", f"Setting: {result['setting']}.", "",
             f"Starts: `exact` (x), `lagged` (x of {result['size']:.3g} server steps ago), `displaced` (x plus a "
             f"random direction of {result['size']:.3g} times the last server step's length); the committed rows "
             "start from their hidden state x̂. Mean accuracy (%) in each window of uploads (– where the run had "
             "stopped).", "",
             "| start | seed | uploads to target | " + " | ".join(heads) + " |", "|---|---|---|" + "---|" * len(heads)]
    for r in result["rows"]:
        reached = "not reached" if r["reached_at_uploads"] is None else f"{r['reached_at_uploads']:,}"
        cells = ["–" if w is None else f"{100 * w:.2f}" for w in r["windows"]]
        lines.append(f"| {r['start']} | {r['seed']} | {reached} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true", help="the quick setting (300 users, 70 %% target)")
    p.add_argument("--uploads", type=int, default=40000)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--starts", default=",".join(STARTS), help="comma-separated (default: %(default)s)")
    p.add_argument("--size", type=float, help="the lag or displacement, in server steps (default: the committed "
                                              "2/2 run's rms gap in results/qafel/hidden-state)")
    p.add_argument("--window", type=int, default=5000, help="a window's width, in uploads")
    p.add_argument("--against", nargs="+", default=[], help="committed results (qafel-table1 or hidden-state) "
                                                           "whose 2-bit client rows of the same seeds to show")
    args = p.parse_args()
    starts = tuple(args.starts.split(","))
    size = measured_gap() if args.size is None else args.size
    target = {} if args.quick else {"target": dict(LOAD_RUN.overrides)["target"]}   # the paper's load
    cfg = qr.setting("qafel-table1", quick=args.quick, methods=(ROW,), max_uploads=args.uploads, **target)
    keys = [(start, seed) for seed in args.seeds for start in starts]
    results = qr.probe_runs(cfg, [((start, seed), ROW, seed, starting(start, size)) for start, seed in keys])
    runs = [dict(run, start=start) for run, (start, _) in zip(results, keys)]
    for run in runs:
        run.pop("learner")
    against = committed_rows(args.against, args.seeds)
    command = ("python tools/qafel_start_probe.py" + " --quick" * args.quick + f" --uploads {args.uploads} --seeds "
               + " ".join(map(str, args.seeds)) + f" --starts {args.starts}"
               + ("" if args.size is None else f" --size {args.size}") + f" --window {args.window}"
               + (" --against " + " ".join(args.against) if args.against else "") + f" --out {args.out}")
    protocol = "the quick setting" if args.quick else f"the paper protocol at the {100 * cfg.target:.0f} % target"
    setting = (f"Table 1 ({protocol}) on the offline substitute ({cfg.users:,} users), the 2-bit client, "
               f"{args.uploads:,} uploads a run at most, one fleet")
    result = {"command": command, "machine": machine("cpu"), "afl_commit": afl_commit(), "setting": setting,
              "size": size, "window": args.window, "uploads": args.uploads,
              "rows": summary(runs, against, args.window, args.uploads)}
    write_probe(result, args.out, "start-probe", markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
