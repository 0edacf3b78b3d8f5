"""What the dispatch of FedAST's first requests changes in the pool's schedule alone, without training.

afl's default sends each task's first requests under the cap of busy clients (``cap_first=True``: with Fig. 5's 384
requests and a cap of 300, the second of two tasks starts short); the authors' code sends them all at once
(``cap_first=False``). Per seed, both dispatches of ``fedast-fig5``'s paper setting: the first requests the cap
drops per task, each task's arrivals by the given simulated times, and its mean staleness (server rounds between a
request's sending and its arrival); with ``--against`` (the two results, capped first), the times each task reached
its target in training. Writes ``OUT/dispatch-schedule.json`` and ``.md``.

    python tools/fedast_dispatch_schedule.py --taskset 'fashion-mnist*2' --seeds 3 \
        --against 'results/fedast/fig5/fashion-mnist*2/fedast-fig5.json' \
                  'results/fedast/fig5/fashion-mnist*2/code-dispatch/fedast-fig5.json' \
        --out 'results/fedast/fig5/fashion-mnist*2/code-dispatch/schedule'
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from afl.repro import fedast as fr
from afl.sim.pool import simulate_pool_schedule
from afl.sim.speeds import three_speed

DISPATCHES = {"capped": True, "at once": False}


def schedule_row(cfg, taskset: str, seed: int, cap_first: bool, times) -> dict:
    """The pool's schedule of one FedAST (static) run, no training: drops at time 0, arrivals by ``times``,
    mean staleness, per task."""
    tasks = cfg.tasks(taskset, "fedast-static", cfg.caps[0], None)
    profile = three_speed(cfg.clients, base=fr.POOL_BASE, seed=seed, costs=cfg.costs(taskset))
    s = simulate_pool_schedule(profile, [t.pool_task() for t in tasks], max(times), cap=cfg.caps[0], seed=seed,
                               cap_first=cap_first)
    tasks_range = range(len(tasks))
    return {"seed": seed, "cap_first": cap_first,
            "dropped_first": [sum(1 for m, t in s.dropped if m == k and t == 0.0) for k in tasks_range],
            "arrivals_by": {str(T): [sum(1 for u in s.updates if u.task == k and u.end <= T) for k in tasks_range]
                            for T in times},
            "mean_staleness": [float(np.mean([u.staleness for u in s.updates if u.task == k])) for k in tasks_range]}


def reached(path: str) -> dict:
    """seed -> each FedAST task's time to its target, from a committed ``fedast-fig5`` result."""
    runs = json.loads(Path(path).read_text())["runs"]
    return {r["seed"]: [t["reached"] for t in r["tasks"]] for r in runs if r["method"] == "fedast-static"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskset", default="fashion-mnist*2")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--times", default="100,300,450", help="simulated times at which arrivals are counted")
    ap.add_argument("--against", nargs=2, metavar=("CAPPED", "AT_ONCE"), help="the two committed results")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    cfg = fr.EXPERIMENTS["fedast-fig5"][0]
    times = [float(t) for t in args.times.split(",")]
    trained = dict(zip(DISPATCHES, map(reached, args.against))) if args.against else {}
    rows = []
    for seed in range(args.seeds):
        for name, cap_first in DISPATCHES.items():
            row = schedule_row(cfg, args.taskset, seed, cap_first, times) | {"dispatch": name}
            row["reached"] = trained.get(name, {}).get(seed)
            rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python tools/fedast_dispatch_schedule.py " + " ".join(
        f"'{a}'" if "*" in a else a for a in (argv if argv is not None else sys.argv[1:]))
    (out / "dispatch-schedule.json").write_text(json.dumps({"command": command, "taskset": args.taskset,
                                                            "rows": rows}, indent=1) + "\n")
    lines = [f"# The first requests' dispatch in the pool's schedule, {args.taskset} (no training)", "",
             f"Command: `{command}`", "",
             "| seed | dispatch | first requests dropped, by task | " + " | ".join(
                 f"arrivals by {t:g}" for t in times) + " | mean staleness | reached the target (training) |",
             "|---|---|---|" + "---|" * len(times) + "---|---|"]
    for r in rows:
        got = "–" if r["reached"] is None else ", ".join("never" if t is None else f"{t:.1f}" for t in r["reached"])
        lines.append(f"| {r['seed']} | {r['dispatch']} | {', '.join(map(str, r['dropped_first']))} | " + " | ".join(
            ", ".join(map(str, r["arrivals_by"][str(t)])) for t in times) + " | "
            + ", ".join(f"{s:.1f}" for s in r["mean_staleness"]) + f" | {got} |")
    (out / "dispatch-schedule.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
