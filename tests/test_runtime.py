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


# Threads of this process while a new thread (serial or not) has run a parallel op: its OpenMP workers show.
TEAMS = """
import os, threading, afl, torch
from afl.runtime import serial_openmp
torch.set_num_threads(2)
x = torch.ones(1 << 22)
(x * 2).sum()                                          # the main thread's team exists
counts = []
def op(serial):
    ok = serial_openmp() if serial else True
    (x * 2).sum()
    counts.append((ok, len(os.listdir("/proc/self/task"))))
for serial in (True, False):
    t = threading.Thread(target=op, args=(serial,)); t.start(); t.join()
print(*[n for _, n in counts], all(ok for ok, _ in counts))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_a_serial_thread_starts_no_openmp_workers():
    """A fleet's run threads must not start OpenMP teams: GNU OpenMP then throttles the engine's workers."""
    out = subprocess.run([sys.executable, "-c", TEAMS], capture_output=True, text=True, check=True).stdout.split()
    serial, parallel, ok = int(out[0]), int(out[1]), out[2]
    assert ok == "True" and parallel == serial + 1               # the other thread brought one worker along


@pytest.mark.parametrize("text, share", [(None, 1.0), ("1", 1.0), ("3", 1 / 3)])
def test_separate_commands_share_the_gpu_by_afl_gpu_processes(text, share, monkeypatch):
    from afl import runtime
    monkeypatch.setattr(runtime, "_state", {})
    if text is None:
        monkeypatch.delenv("AFL_GPU_PROCESSES", raising=False)
    else:
        monkeypatch.setenv("AFL_GPU_PROCESSES", text)
    assert runtime.device_share() == share
    runtime.share_devices(4)                                     # and each command's grid in 4 processes
    assert runtime.device_share() == share / 4


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_a_bad_afl_gpu_processes_names_the_variable(text, monkeypatch):
    from afl import runtime
    from afl.errors import ParameterError
    monkeypatch.setattr(runtime, "_state", {})
    monkeypatch.setenv("AFL_GPU_PROCESSES", text)
    with pytest.raises(ParameterError, match="AFL_GPU_PROCESSES.*integer >= 1"):
        runtime.device_share()
