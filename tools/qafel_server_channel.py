"""QAFeL's server channel over training beside its client channel, row by row (issue 52 §3: the 2/2 question).

A QAFeL server broadcasts ``Q_s(x^{t+1} - x_hat^t)`` into the hidden state the clients start from (eqs. (3)-(4)).
:mod:`afl.algorithms.qafel` sums, over broadcasts, each broadcast's relative error and how far from the server
model the hidden state then is, in server steps (squared); over uploads, each upload's and each buffer's relative
error. This runs the rows asked (by default the 2-bit client's: 2/2, 2/4, 2/8) at Table 1's setting at the paper's
load (the target of ``results/qafel/target-probe``) as one fleet, and writes per window of evaluations: the client
channel's errors (upload, buffer), the broadcast's, the gap (root mean square, in server steps) and the gap's
part along the last server step (mean, in steps: how much of the gap is a lag; runs since that counter). Where
``--against`` names a committed Table 1 result, each run's curve is compared with the committed run of its row and
seed: the same numbers up to where this one stops, or where they first part.
Writes ``OUT/server-channel.json`` and ``.md``.

    python tools/qafel_server_channel.py --uploads 5000 --against results/qafel/table1/paper-load/qafel-table1.json \
        --out results/qafel/server-channel
    python tools/qafel_server_channel.py --quick --uploads 300 --out /tmp/server-channel        # CI-sized
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.repro import qafel as qr  # noqa: E402
from afl.repro.runner import afl_commit, machine, write_probe  # noqa: E402

import qafel_probe  # noqa: E402

ROWS = qafel_probe.TWO_BIT_CLIENT
COMPARED = ("accuracy", "uploads", "upload_error", "buffer_error")


def windows(e: dict) -> list[dict]:
    """Per window of ``e`` (:func:`afl.repro.qafel.channel_errors`): its last upload and the channels' mean errors
    (the gap as rms steps; where the run recorded it, the gap's mean part along the last step, ``lag_steps``)."""
    rows = [{"uploads": int(u), "upload": up, "buffer": buf, "broadcast": b, "gap_steps": math.sqrt(g)}
            for u, up, buf, b, g in zip(e["uploads"], e["upload"], e["buffer"], e["broadcast"], e["gap"])]
    for row, lag in zip(rows, e.get("lag", ())):
        row["lag_steps"] = lag
    return rows


def summary(runs: list[dict], against: dict) -> list[dict]:
    """Per run: its windows, their means, its agreement with the committed run and its curve (the numbers' source)."""
    rows = []
    for run in runs:
        e = qr.channel_errors(run)
        lag = {"lag_steps": float(np.mean(e["lag"]))} if "lag" in e else {}
        rows.append({"method": run["method"], "seed": run["seed"], "curve": run["curve"], "windows": windows(e),
                     "mean": {k: float(np.mean(e[k])) for k in ("upload", "buffer", "broadcast")}
                     | {"gap_steps": math.sqrt(float(np.mean(e["gap"])))} | lag,
                     "against_committed": qr.curve_agreement(run, against.get((run["method"], run["seed"])),
                                                                COMPARED, shown=("accuracy", "upload_error"))})
    return rows


def markdown(result: dict) -> str:
    lag = all("lag_steps" in r["mean"] for r in result["rows"])     # runs since the counter of the gap's part
    shown = ("broadcast", "gap_steps") + (("lag_steps",) if lag else ())
    lag_said = (", and the part of `x − x̂` along the last server step `s`, `(x − x̂)·s / |s|²` (mean, in steps: 1 "
                "where none of the last step reached the clients, 0 where the gap is orthogonal to it)") if lag else ""
    lag_head, lag_window = ("| of which along the last step (steps) ", " / of which along the last step") if lag \
        else ("", "")
    lines = ["# QAFeL's server channel beside its client channel", "", f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']}", "", f"Setting: {result['setting']}.", "",
             "Per row, means over the run's windows (one window between two evaluations): the client channel's "
             "relative error `|Q_c(Δ) − Δ|² / |Δ|²` per upload and per buffer sum, the broadcast's "
             "`|q − v|² / |v|²` (`v = x^{t+1} − x̂^t`), and how far from the server model the clients start, "
             f"`|x − x̂|` over the server step's norm (root mean square){lag_said}.", "",
             "| row | seed | upload error | buffer error | broadcast error | clients start from x (server steps) "
             f"{lag_head}| against the committed run |", "|---|---|---|---|" + "---|" * len(shown) + "---|"]
    for r in result["rows"]:
        m, a = r["mean"], r["against_committed"]
        said = ("–" if a is None else f"the same numbers, {a['points']} evaluations" if a["same"] else
                f"parts at {a['first_different_uploads']:,} uploads (accuracy {a['accuracy'][0]:.4f} against "
                f"{a['accuracy'][1]:.4f})")
        lines.append(f"| {qr.label(r['method'])} | {r['seed']} | {m['upload']:.3f} | {m['buffer']:.3f} | "
                     + "".join(f"{m[k]:.3g} | " for k in shown) + f"{said} |")
    lines += ["", f"Window by window (broadcast error / clients from x{lag_window}, server steps):", "",
              "| uploads | " + " | ".join(qr.label(r["method"]) for r in result["rows"]) + " |",
              "|---|" + "---|" * len(result["rows"])]
    for i, w in enumerate(result["rows"][0]["windows"]):
        cells = [" / ".join(f"{r['windows'][i][k]:.3g}" for k in shown) if i < len(r["windows"]) else "–"
                 for r in result["rows"]]
        lines.append(f"| {w['uploads']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def arguments():
    """The tool's command line (:func:`qafel_probe.parser` and its own options)."""
    p = qafel_probe.parser(__doc__, uploads=5000, seed=0,
                           against="committed qafel-table1 results whose runs of the same rows and seed to compare "
                                   "with", methods=ROWS)
    return p


def main() -> int:
    p = arguments()
    args = p.parse_args()
    cfg = qafel_probe.setting(args, args.methods)
    runs = qr.probe_runs(cfg, [((m, args.seed), m, args.seed, None) for m in args.methods])
    setting = f"{qafel_probe.described(args, cfg)}, seed {args.seed}, {args.uploads:,} uploads a run, one fleet"
    result = {"command": qafel_probe.command("qafel_server_channel.py", p, args), "machine": machine("cpu"),
              "afl_commit": afl_commit(), "setting": setting,
              "rows": summary(runs, qafel_probe.committed_runs(args.against))}
    write_probe(result, args.out, "server-channel", markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
