"""How much of an afl command's wall time is spent inside the engine (no profiler, so nothing is slowed down).

    python tools/engine_share.py repro ghbm-table2 --quick --set rounds=30 --set last=10 --out /tmp/x [--no-fleet]

runs ``afl <arguments>`` in this process and prints the wall seconds inside ``LocalSGD.run``, ``evaluate``,
``full_gradient`` and ``train_loss`` (outermost calls only, :func:`afl.bench.engine_work`), the total, and what
lies outside them (start-up, the simulations' own Python, the fleet's bookkeeping, writing results).
"""
import runpy
import sys
import time

from afl.bench import engine_work

start = time.perf_counter()
sys.argv = ["afl"] + sys.argv[1:]
with engine_work() as (_, seconds):
    try:
        runpy.run_module("afl.cli", run_name="__main__")
    except SystemExit:
        pass
total = time.perf_counter() - start
print(" ".join(f"{name} {s:.1f} s" for name, s in seconds.items()),
      f"| total {total:.1f} s | outside the engine {total - sum(seconds.values()):.1f} s")
