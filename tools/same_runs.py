"""Whether two results of ``afl repro`` computed the same runs, number for number: ``python tools/same_runs.py
A.json B.json``. Runs are paired by what names them (method, split, task set, cap, buffer, concurrency, seed); every
field is compared except how long and where a run computed (wall time, its speed, the times it went on from a
checkpoint, the invocation it came from); a field only one result records (added to afl between the two) is named,
not compared. Runs only one result holds are listed. Exit status 1 where a pair differs: a determinism probe (a run
stopped and resumed, or in another fleet, against one that ran alone).
"""
from __future__ import annotations

import argparse
import json
import sys

#: what names a run in a result's ``runs`` (those of its fields present)
NAMES = ("method", "algorithm", "split", "dataset", "taskset", "cap", "buffer", "concurrency", "seed")
#: how long, how fast and where a run computed: not what it computed
TIMING = frozenset({"wall_seconds", "client_steps_per_s", "resumed_at", "source"})


def name(run: dict) -> tuple:
    return tuple((k, json.dumps(run[k])) for k in NAMES if k in run)


def differences(a, b, where: str = "", one_sided: set | None = None) -> list[str]:
    """The paths at which ``a`` and ``b`` differ, the timing fields left out at any depth; the fields only one of
    them holds go to ``one_sided``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in (set(a) ^ set(b)) - TIMING:
            if one_sided is not None:
                one_sided.add(k)
        return [d for k in sorted((set(a) & set(b)) - TIMING)
                for d in differences(a[k], b[k], f"{where}.{k}", one_sided)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]", one_sided)]
    return [] if a == b else [where or "."]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    args = parser.parse_args(argv)
    runs = [{name(r): r for r in json.load(open(path))["runs"]} for path in (args.a, args.b)]
    differ, one_sided = 0, set()
    for key in sorted(runs[0].keys() & runs[1].keys()):
        found = differences(runs[0][key], runs[1][key], one_sided=one_sided)
        differ += bool(found)
        label = ", ".join(f"{k}={json.loads(v)}" for k, v in key)
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        print(f"{label}: " + (f"differs in {', '.join(found[:5])}{more}" if found else "the same"))
    for side, (mine, other) in zip("ab", (runs, runs[::-1])):
        for key in sorted(mine.keys() - other.keys()):
            print(f"only in {side}: " + ", ".join(f"{k}={json.loads(v)}" for k, v in key))
    if one_sided:
        print("recorded by one result only, not compared: " + ", ".join(sorted(one_sided)))
    print(f"{len(runs[0].keys() & runs[1].keys()) - differ} of {len(runs[0].keys() & runs[1].keys())} paired runs "
          "the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
