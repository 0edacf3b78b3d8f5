"""Process settings of afl.runtime: denormals flushed on every thread that computes, unless switched off."""
import os
import platform
import subprocess
import sys

import pytest

from afl.repro.runner import machine, machine_cpu_kind
from afl.runtime import cpu_kind

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


def test_threads_follow_the_cores_this_process_may_use(monkeypatch):
    """A cgroup quota (a container's, a JupyterHub's) caps the cores; AFL_THREADS and load_aware set the count."""
    import torch
    from afl import runtime
    before = torch.get_num_threads()
    monkeypatch.delenv("AFL_THREADS", raising=False)                   # the test runner's own setting (make test-unit)
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000"}              # 1.5 CPUs: 2 cores, rounded up
    monkeypatch.setattr(runtime, "_read", lambda path: files.get(path, ""))
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    try:
        assert runtime.available_cores() == 2
        files["/sys/fs/cgroup/cpu.max"] = "max 100000"
        assert runtime.available_cores() == 16
        files.clear()
        files.update({"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "400000",
                      "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"})
        assert runtime.available_cores() == 4                         # cgroup v1
        monkeypatch.setattr(runtime.os, "getloadavg", lambda: (3.2, 0.0, 0.0))
        assert runtime.set_threads(load_aware=True) == 2 and torch.get_num_threads() == 2   # 4 cores, 3.2 busy
        assert runtime.set_threads() == 4
        monkeypatch.setenv("AFL_THREADS", "3")
        assert runtime.set_threads() == 3 and runtime.cap_threads() == 3
        monkeypatch.setenv("AFL_THREADS", "many")
        with pytest.raises(ValueError, match="AFL_THREADS='many'"):
            runtime.set_threads()
        with pytest.raises(ValueError, match="threads=0"):
            runtime.set_threads(0)
    finally:
        torch.set_num_threads(before)


def test_the_machine_names_the_cpu_model_its_generation_and_the_kernels_pytorch_picked(monkeypatch):
    import torch

    from afl import runtime
    kernels = torch.backends.cpu.get_cpu_capability()
    monkeypatch.setattr(runtime, "_read", lambda path: "processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t: fpu")
    assert runtime.cpu_kind() == f"Some CPU 9000; {kernels} kernels"
    two = ("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\n\n"
           "processor\t: 1\ncpu family\t: 23\nmodel\t\t: 49\nmodel name\t: AMD EPYC\nstepping\t: 0")
    monkeypatch.setattr(runtime, "_read", lambda path: two)            # one name, the first processor's generation
    assert runtime.cpu_kind() == f"AMD EPYC (family 25, model 17, stepping 1); {kernels} kernels"
    assert machine_cpu_kind(machine("cpu")) == runtime.cpu_kind()
    monkeypatch.setattr(runtime, "_read", lambda path: "")             # no /proc/cpuinfo (macOS, Windows)
    assert runtime.cpu_kind() == f"CPU model unknown; {kernels} kernels"
    assert f"(CPU model unknown; {kernels} kernels), {os.cpu_count()} CPU cores" in machine("cpu")


def test_a_results_machine_words_give_back_the_cpu_kind_and_none_before_they_named_it():
    intel = ("Linux x86_64 (Intel(R) Xeon(R) Processor; AVX512 kernels), 2 CPU cores, torch 2.14.1+cu130, 2 threads, "
             "CPU denormals flushed, device cpu")
    assert machine_cpu_kind(intel) == "Intel(R) Xeon(R) Processor; AVX512 kernels"
    assert machine_cpu_kind("Linux x86_64 (AMD EPYC; AVX2 kernels), 2 CPU cores, torch 2.14.1+cu130, 1 thread, "
                            "device cpu") == "AMD EPYC; AVX2 kernels"
    assert machine_cpu_kind("Linux x86_64, 2 CPU cores, torch 2.14.1+cu130, 2 threads, device cpu") is None
    assert machine_cpu_kind(machine("cpu")) == cpu_kind()
