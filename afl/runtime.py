"""The machine afl runs on: which devices exist, and process settings that the engine's speed depends on.

:func:`resolve_device`: a device name checked against what this machine has, before anything runs.

:func:`serial_openmp`: this thread's PyTorch CPU ops start no OpenMP workers (a fleet's run threads, so that the
engine's thread keeps its workers spinning between operations).

:func:`share_devices`: this process shares the GPU with others (a grid spread over processes); its engines plan
with that share of the free memory (``AFL_GPU_PROCESSES=N`` for separate commands run side by side).

:func:`tune_cpu_allocator`: PyTorch CPU tensors come from the C library's ``malloc``. glibc serves blocks of
a few MB (activations, gradients) with ``mmap`` and hands them back to the kernel when freed, so every
training step page-faults its freshly mapped memory again (measured here: a 64 MB ``relu`` 25 ms instead
of 5 ms; the fused MLP step of mlp200, 20 clients, 27 ms instead of 18 ms). Raising glibc's mmap and trim
thresholds keeps such blocks in the heap for reuse -- what PyTorch's CPU tuning guide gets from jemalloc or
tcmalloc. It also keeps one malloc arena for all threads: a fleet's runs are threads that take turns (one runs
at a time, :mod:`afl.fleet`), and an arena per thread only multiplies the freed memory each keeps (measured, a
FedAST Fig. 3 fleet of 4 runs on this CPU: 8.0 GB at most instead of 9.1, in the same time). Process-wide, once;
only on glibc; ``AFL_MALLOC_TUNING=0`` turns it off.

:func:`flush_denormals`: float32 numbers below 1.2e-38 (denormals) take the x86 CPU's slow path, up to a hundred
times slower an operation. A character LSTM that learns slowly produces them in its gates: FedCM as the GHBM
authors' code runs it, 30 Shakespeare rounds on this CPU, took 1,366 s, its rounds 10 to 30 four times slower than
its first ten; with denormals flushed to zero, 337 s and the same curve to the last printed digit (the GHBM
Fashion-MNIST grid: the same time and the same numbers). ``import afl`` turns the flushing on, so that the threads
PyTorch starts later (its OpenMP workers, a fleet's runs) inherit it: the CPU's flag is per thread, and a thread
started before keeps its own. ``AFL_FLUSH_DENORMALS=0`` keeps IEEE denormals.

:func:`cpu_kind`: the CPU's model and the vector kernels PyTorch runs on it, which decide how float sums round: the
same seed gives the same numbers on one kind of CPU, other numbers on another (measured: QAFeL's 2/2 row, seed 0,
rerun on an AVX-512 Xeon with code that computes as the committed run's did, 66.85 % at its first evaluation
against the committed 65.85 %). Every result's machine names it.

:func:`available_cores` and :func:`set_threads`: PyTorch starts a thread per core the machine has, not per core this
process may use; in a container or on a JupyterHub with a CPU quota (a cgroup limit) it oversubscribes and every
operation waits on threads that get no core. ``import afl`` lowers PyTorch's count to the cores the process may
use (``AFL_THREADS=N`` sets it); the notebooks call ``set_threads(load_aware=True)``, which also leaves out the cores
other processes keep busy (measured: notebook 01 on a busy 2-core machine, 410 s with PyTorch's 2 threads, 65 s
with one).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -2, -3, -8   # glibc's mallopt (malloc.h)
_state: dict = {}


def resolve_device(device) -> torch.device:
    """``device`` (``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or a ``torch.device``) if this machine has it; a
    :class:`~afl.errors.ParameterError` naming ``device`` and what is available otherwise."""
    import torch

    from .errors import ParameterError
    n_gpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    available = "'cpu'" + (f", 'cuda' or 'cuda:0' to 'cuda:{n_gpu - 1}'" if n_gpu else
                           " (no CUDA device is available on this machine)")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ParameterError("device", device, available) from None
    if dev.type == "cuda" and (n_gpu == 0 or (dev.index or 0) >= n_gpu):
        raise ParameterError("device", device, available)
    if dev.type not in ("cpu", "cuda"):
        raise ParameterError("device", device, available)
    return dev


def available_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota (v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us``), rounded up; at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for path, parse in (("/sys/fs/cgroup/cpu.max", lambda t: t.split()),
                        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", lambda t: [t.strip(), _read(
                            "/sys/fs/cgroup/cpu/cpu.cfs_period_us")])):
        text = _read(path)
        if text:
            quota, period = parse(text)
            if quota not in ("max", "-1") and period and float(period) > 0:
                cores = min(cores, -(-int(quota) // int(period)))
            break
    return max(1, cores)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def cpu_kind() -> str:
    """This CPU's model name with its family, model and stepping (from ``/proc/cpuinfo`` where there is one: a
    virtual machine's "AMD EPYC" names several generations, whose kernels may round differently) and the kernels
    PyTorch picked for it (``torch.backends.cpu.get_cpu_capability``: ``AVX512``, ``AVX2``, ...): ``"AMD EPYC (family
    25, model 17, stepping 1); AVX512 kernels"``."""
    import torch

    first: dict[str, str] = {}                     # the first processor's fields
    for line in _read("/proc/cpuinfo").splitlines():
        key, colon, value = line.partition(":")
        if colon:
            first.setdefault(key.strip(), value.strip())
    ids = ", ".join(f"{word} {first[key]}" for word, key in (("family", "cpu family"), ("model", "model"),
                                                             ("stepping", "stepping")) if first.get(key))
    name = first.get("model name", "CPU model unknown") + (f" ({ids})" if ids else "")
    return f"{name}; {torch.backends.cpu.get_cpu_capability()} kernels"


def set_threads(n: int | None = None, load_aware: bool = False, say: bool = False) -> int:
    """Set PyTorch's CPU threads and return the count: ``n``; else ``$AFL_THREADS``; else :func:`available_cores`,
    with ``load_aware`` less the cores other processes keep busy now (the 1-minute load average, at least 1 left);
    ``say``: print it (a notebook's first cell). A different count may round matrix products differently: fix ``n``
    where runs must match to the last bit."""
    import torch
    from .errors import check_int
    if n is None and os.environ.get("AFL_THREADS"):
        text = os.environ["AFL_THREADS"].strip()
        n = check_int("AFL_THREADS", int(text) if text.isdigit() else text, 1)
    if n is None:
        n = available_cores()
        if load_aware and hasattr(os, "getloadavg"):
            n = max(1, min(n, round(n + 1 - os.getloadavg()[0])))
    n = check_int("threads", n, 1)
    torch.set_num_threads(n)
    if say:
        print(f"PyTorch trains on {n} thread{'s' * (n > 1)} (afl.runtime.set_threads(n) to choose)")
    return n


def cap_threads() -> int:
    """At import: PyTorch's threads lowered to the cores this process may use (never raised); ``$AFL_THREADS``
    sets them. Returns the count."""
    import torch
    if os.environ.get("AFL_THREADS"):
        return set_threads()
    if torch.get_num_threads() > available_cores():
        torch.set_num_threads(available_cores())
    return torch.get_num_threads()


def tune_cpu_allocator() -> bool:
    """Keep large freed blocks in the heap, in one arena (glibc ``mallopt``); True if the tuning is in effect."""
    if "tuned" not in _state:
        _state["tuned"] = os.environ.get("AFL_MALLOC_TUNING", "1") != "0" and _mallopt()
    return _state["tuned"]


def flush_denormals() -> bool:
    """Flush float denormals to zero on this thread and the threads it starts from now on (``torch``'s
    ``set_flush_denormal``: x86 FTZ and DAZ); True if in effect. ``AFL_FLUSH_DENORMALS=0``: leave them."""
    import torch

    if "flush" not in _state:
        _state["flush"] = os.environ.get("AFL_FLUSH_DENORMALS", "1") != "0" and torch.set_flush_denormal(True)
    return _state["flush"]


def serial_openmp() -> bool:
    """Let this thread's PyTorch CPU ops run without OpenMP workers of their own (GNU OpenMP's thread count of this
    thread set to 1; PyTorch's count for the other threads unchanged); True if in effect.

    A fleet's runs are threads that compute little themselves (:mod:`afl.fleet`). Yet each that enters a parallel
    region starts a team of OpenMP workers, and once GNU OpenMP manages more threads than there are cores it lets
    idle workers spin only briefly: the workers of the thread that trains then sleep between operations and every
    operation waits to wake them. Measured here (FAVAS quick grid, ``tools/engine_share.py``): the same 1,701
    engine calls took 47 s one run at a time and 78 s with the run in a thread of its own (``--fleet-size 1``)."""
    import torch

    torch.get_num_threads()             # PyTorch's per-thread start-up, which would set the count back
    if "gomp" not in _state:
        _state["gomp"] = _libgomp()
    if _state["gomp"] is None:
        return False
    _state["gomp"].omp_set_num_threads(1)
    return True


def _libgomp():
    """The GNU OpenMP library PyTorch loaded (the same instance, found by path), or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libgomp" in line}
        return ctypes.CDLL(sorted(paths)[0]) if paths else None
    except OSError:
        return None


def share_devices(processes: int) -> None:
    """This process is one of ``processes`` that share the machine's GPU (:func:`afl.fleet.run_in_processes`): its
    engines take that share of a GPU's free memory (:func:`device_share`)."""
    _state["share"] = 1 / processes


def device_share() -> float:
    """The fraction of a GPU's free memory this process's engines may plan with: ``1 / processes`` after
    :func:`share_devices` (a grid's own processes), divided by ``$AFL_GPU_PROCESSES`` (separate afl commands
    started side by side on one GPU: each would otherwise plan with half of what it finds free, and those started
    together find the same memory free; on an H200 three of them ran out of it at once)."""
    return _state.get("share", 1.0) / _gpu_processes()


def _gpu_processes() -> int:
    from .errors import env_number
    return env_number("AFL_GPU_PROCESSES", int, 1, "the number of afl commands sharing this GPU, an integer >= 1") or 1


def _mallopt() -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):     # not glibc (macOS, Windows, musl): nothing to tune
        return False
    return all(mallopt(param, value) == 1 for param, value in
               ((_M_MMAP_THRESHOLD, 1 << 30), (_M_TRIM_THRESHOLD, (1 << 31) - 1), (_M_TOP_PAD, 256 << 20),
                (_M_ARENA_MAX, 1)))
