"""Process settings of afl.runtime: denormals flushed on every thread that computes, unless switched off."""
import os
import platform
import subprocess
import sys

import pytest

# Doubles the smallest float32 denormal (bit pattern 1) across 2 threads; prints how many results are not zero.
PROBE = """
import afl, torch, threading
torch.set_num_threads(2)
x = torch.ones(1 << 21, dtype=torch.int32).view(torch.float32)
counts = [int((x * 2.0).count_nonzero())]
worker = threading.Thread(target=lambda: counts.append(int((x * 2.0).count_nonzero())))
worker.start(); worker.join()
print(*counts)
"""


def probe(flush: str) -> list[int]:
    env = dict(os.environ, AFL_FLUSH_DENORMALS=flush)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return [int(v) for v in out.stdout.split()]


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="FTZ/DAZ are x86 flags")
def test_import_flushes_denormals_on_worker_threads_unless_switched_off():
    assert probe("1") == [0, 0]                           # main thread with its OpenMP workers, and a later thread
    assert probe("0") == [1 << 21, 1 << 21]               # IEEE: every doubled denormal is a denormal, not zero
