"""Fleets: many independent runs simulated at once, their local training batched together.

The runs of a table are independent, and each spends its time asking the engine for a few clients' local
training (FAVAS: the s = 20 contacted clients of one server step). A fleet runs such runs side by side and
trains *all* their pending jobs together: when every live run is waiting for a result, the pending jobs of
all of them go to the engine in one call per group of interchangeable engines (whatever their hooks), the due
evaluations in one stack of models and MIME's full-batch gradients in one call (:func:`afl.jobs.run_pending`);
then every run goes on.

How: each run is an ordinary simulation in a thread of its own, its algorithm code unchanged. Where it
would train its pending jobs (:meth:`afl.jobs.JobQueue.flush`) it hands control back to the fleet and waits.
Exactly one thread runs at a time -- the fleet resumes the runs one after the other, each until it waits
or ends -- so nothing is shared between threads at once, every run's random numbers come from its own
seeded generators, and a fleet computes what the runs compute one by one (to the float rounding of bigger
batched kernels; ``tests/test_fleet.py``). Threads rather than generators, because the runs' code then
needs no ``yield`` at every place that might need a result; rather than processes, because the batching
needs the runs' jobs in one address space.

A run that raises fails alone: its error is kept and the others finish (:class:`Outcome`).
:func:`run_in_processes` spreads a grid over processes of this machine, :func:`run_on_ray` over Ray tasks; each
part is a fleet of its own.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import queue as queues
import signal
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import torch

from . import deadline
from .deadline import TimeLimit
from .errors import ParameterError, check_int
from .jobs import _context, run_pending
from .results import advance, simulating, watch
from .runtime import serial_openmp, share_devices, tune_cpu_allocator

#: live runs of a fleet unless told otherwise (each holds its federation's per-client tables)
DEFAULT_SIZE = 64


@dataclass
class Outcome:
    """What one run gave: its ``value``, or the ``error`` it raised; ``key`` names the run."""

    key: Hashable
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Member:
    """One run of a fleet, in a thread of its own that runs only while the fleet has resumed it."""

    def __init__(self, key: Hashable, task: Callable[[], Any]):
        self.key, self.task = key, task
        self.queues: list = []                  # the run's job queues register here (afl.jobs.JobQueue)
        self.outcome: Outcome | None = None
        self.interrupt: BaseException | None = None   # KeyboardInterrupt, SystemExit: stops the whole fleet
        self._go, self._paused = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._main, name=f"afl-fleet-run-{key}", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        _context.member = self
        serial_openmp()                   # the engine's thread keeps the cores (afl.runtime.serial_openmp)
        self._go.wait()
        self._go.clear()
        try:
            self.outcome = attempt(self.key, self.task)
        except BaseException as stop:  # noqa: BLE001 -- raised again in the fleet's thread
            self.interrupt, self.outcome = stop, Outcome(self.key, error=stop)
        finally:
            self.queues = []
            self._paused.set()

    def wait(self) -> None:
        """Called by the run's own thread: give control back until the fleet has run the pending work."""
        self._paused.set()
        self._go.wait()
        self._go.clear()

    def resume(self) -> None:
        """Called by the fleet: let the run go on until it waits again or ends."""
        self._paused.clear()
        self._go.set()
        self._paused.wait()


def attempt(key: Hashable, task: Callable[[], Any]) -> Outcome:
    """``task()`` as an :class:`Outcome`: a run that raises fails alone, with its error. While it runs, its
    progress reports name ``key`` (:func:`afl.results.simulating`)."""
    try:
        with simulating(key):
            return Outcome(key, value=task())
    except Exception as error:  # noqa: BLE001 -- reported with the run's key
        return Outcome(key, error=error)


def run_fleet(tasks: Sequence[tuple[Hashable, Callable[[], Any]]], *, size: int | None = None,
              on_outcome: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run every ``(key, task)`` (a function of no arguments that simulates one run) as one fleet; their
    outcomes, in the tasks' order.

    ``size`` bounds how many runs are live at once (memory: each holds its federation; default
    :data:`DEFAULT_SIZE`); the next task starts when a run ends. ``on_outcome`` is called, in the caller's
    thread, as each run ends (to save it, or to advance a progress bar). Past the command's time limit
    (:mod:`afl.deadline`) no run starts, every live run goes on to its own next round or event, where it saves its
    checkpoint and stops, and then :class:`~afl.deadline.TimeLimit` is raised.
    """
    size = DEFAULT_SIZE if size is None else check_int("fleet_size", size, 1)
    tune_cpu_allocator()                  # before the runs' threads exist: they share one malloc arena
    todo, live, outcomes = deque(tasks), [], {}
    stopped = None                        # the time limit stopped a run: the others go on to their own stop
    while todo or live:
        while todo and len(live) < size and stopped is None:
            live.append(_Member(*todo.popleft()))
        for member in live:
            member.resume()
            if isinstance(member.interrupt, TimeLimit):
                stopped = member.interrupt
            elif member.interrupt is not None:
                raise member.interrupt
        for member in [m for m in live if m.outcome is not None]:
            live.remove(member)
            member.thread.join()
            if member.interrupt is None:
                outcomes[member.key] = member.outcome
                if on_outcome is not None:
                    on_outcome(member.outcome)
        if stopped is not None and not live:
            raise stopped
        run_pending([q for m in live for q in m.queues])
    return [outcomes[key] for key, _ in tasks]


def run_one_by_one(tasks: Sequence[tuple[Hashable, Callable[[], Any]]], *,
                   on_outcome: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """The same runs without a fleet, each alone (the path a fleet is compared with)."""
    outcomes = []
    for key, task in tasks:
        outcomes.append(attempt(key, task))
        if on_outcome is not None:
            on_outcome(outcomes[-1])
    return outcomes


def chunks(items: Sequence, parts: int) -> list[list]:
    """``items`` split into ``parts`` contiguous chunks of nearly equal length (none empty)."""
    parts = max(1, min(parts, len(items)))
    bounds = [round(i * len(items) / parts) for i in range(parts + 1)]
    return [list(items[a:b]) for a, b in zip(bounds, bounds[1:])]


def run_in_processes(work: Callable[..., list], items: Sequence, processes: int, *,
                     on_outcome: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """``work(part, on_outcome=...)`` -- typically a grid's fleet -- in ``processes`` processes of this machine, on
    interleaved parts of ``items`` (``items[i::processes]``: a grid's methods mixed in every part); every
    :class:`Outcome` in ``items``' order, each reported to ``on_outcome`` as its run ends.

    Why: a fleet simulates all its runs in one Python thread. Where that thread limits -- a GPU fed by a fleet
    of cheap steps (FAVAS's MNIST network on an H100 used 1.35 CPU cores, the GPU mostly idle), or a CPU with
    more cores than small kernels use well -- N fleets in N processes share the device. Each process gets
    ``1/processes`` of this process's PyTorch threads and of a GPU's free memory (:func:`afl.runtime.
    share_devices`); processes start with ``spawn`` (safe with CUDA). ``work`` and the items must be picklable
    (a ``functools.partial`` of a module function, as for :func:`run_on_ray`).

    At the command's time limit (which the processes share, :mod:`afl.deadline`) every process is heard to its end,
    each run that finishes meanwhile reported, before :class:`~afl.deadline.TimeLimit` is raised; a signal that ended
    the limit here is passed on to them. An error, or a second Ctrl-C, ends them at once.
    """
    parts = process_parts(items, processes)
    if not parts:
        return []
    threads = process_threads(len(parts))
    release_cached_gpu_memory()     # what this process's allocator keeps, the processes would find taken
    context = multiprocessing.get_context("spawn")
    outbox = context.Queue()
    # one process per part, not a pool: a pool's first worker may take every part before the others start, and
    # then trains them one after another on its 1/N of the threads
    workers = [context.Process(target=_run_part, args=(outbox, threads, len(parts), work, part, os.getpid(), i),
                               daemon=True)
               for i, part in enumerate(parts)]
    for worker in workers:
        worker.start()
    part_of = {key: i for i, part in enumerate(parts) for key in part}
    outcomes: dict = {}
    left = [len(part) for part in parts]      # runs of each part not yet reported
    stopped: set[int] = set()                 # the parts whose process stopped at the time limit
    told, done = False, False
    try:
        while True:
            busy = [i for i in range(len(parts)) if left[i] and i not in stopped]
            if not busy:
                break
            if deadline.stopped_by() is not None and not told:   # a signal sent to this process alone
                told = True
                for i in busy:
                    if workers[i].is_alive():
                        os.kill(workers[i].pid, signal.SIGTERM)
            ended = [i for i in busy if workers[i].exitcode is not None]    # before the read: its messages are in
            try:
                message = outbox.get(timeout=0.5)
            except queues.Empty:
                if told and all(workers[i].exitcode == -signal.SIGTERM for i in ended):
                    stopped.update(ended)               # stopped while it started: its runs are where they were
                elif ended:
                    raise RuntimeError("run_in_processes: a process ended before its runs did (exit codes "
                                       f"{[w.exitcode for w in workers]}; a crash, or memory ran out)") from None
                continue
            if isinstance(message, _Progress):
                advance(message.key, message.fraction, message.resumed)
            elif isinstance(message, _Failure):
                raise RuntimeError(f"run_in_processes: a process failed outside its runs:\n{message.text}")
            elif isinstance(message, _Stopped):
                stopped.add(message.part)
            else:
                outcomes[message.key] = message
                left[part_of[message.key]] -= 1
                if on_outcome is not None:
                    on_outcome(message)
        done = True
    finally:
        for worker in workers:
            if not done:            # an error, or a second Ctrl-C: at once (the time limit waited for every process)
                worker.kill()
            worker.join()
    if stopped:
        raise TimeLimit("the time limit stopped the grid's processes")
    return [outcomes[item] for item in items]          # a grid's items are its run keys


def process_parts(items: Sequence, processes: int) -> list[list]:
    """The parts of ``items`` :func:`run_in_processes` gives its processes, one each: ``items[i::processes]``, the
    empty ones left out (fewer items than processes: fewer processes, each with more threads)."""
    processes = check_int("processes", processes, 1)
    return [list(items[i::processes]) for i in range(processes) if items[i::processes]]


def process_threads(processes: int) -> int:
    """The PyTorch threads of each of ``processes`` processes of :func:`run_in_processes`: this process's, shared."""
    return max(1, torch.get_num_threads() // processes)


def release_cached_gpu_memory() -> None:
    """Give the GPU memory this process holds in PyTorch's cache but no longer uses back to the device, so that
    processes started next find it free. Without it, ``afl bench fleet --device cuda --processes 8`` on an H200 ran
    out of memory: its processes started after the one-by-one and fleet timings had filled the parent's cache."""
    if torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


_outbox = None        # in a process of run_in_processes: where each finished run's outcome goes


@dataclass(frozen=True)
class _Progress:
    """A run's progress report on its way from a process of :func:`run_in_processes` to the grid's bar."""

    key: Hashable
    fraction: float
    resumed: bool

    @staticmethod
    def advance(key, fraction: float, resumed: bool) -> None:
        _outbox.put(_Progress(key, fraction, resumed))


@dataclass(frozen=True)
class _Failure:
    """An error of a process of :func:`run_in_processes` outside its runs (they fail alone, as outcomes)."""

    text: str


@dataclass(frozen=True)
class _Stopped:
    """The process of :func:`run_in_processes` (or Ray task of :func:`run_on_ray`) given ``part`` stopped at the
    command's time limit (:mod:`afl.deadline`)."""

    part: int


def _orphan_watch(parent: int, every_s: float = 1.0) -> None:
    """End this worker process once its parent has gone (killed, say, with SIGKILL: its daemon workers would
    otherwise compute on for minutes, owned by no one)."""
    def watch_parent():
        while True:
            time.sleep(every_s)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch_parent, daemon=True, name="afl-orphan-watch").start()


def _run_part(outbox, threads: int, processes: int, work, part, parent: int, index: int) -> None:
    global _outbox
    _outbox = outbox
    _orphan_watch(parent)
    torch.set_num_threads(threads)
    share_devices(processes)
    watch(_Progress)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # what it is again once the runs end: their outcomes on their way
    try:
        with deadline.stop_on_signals(again_stops=False):   # the parent stops it for good
            work(part, on_outcome=outbox.put)
    except TimeLimit:                     # the command's time limit: the parent stops, its finished runs saved
        outbox.put(_Stopped(index))
    except BaseException:  # noqa: BLE001 -- reported to the parent, which raises it
        outbox.put(_Failure(traceback.format_exc()))


def ray_address(flag: bool | str | None) -> str | None:
    """The Ray cluster to use: ``flag`` (``True``: ``AFL_RAY_ADDRESS`` or a local instance), else
    ``AFL_RAY_ADDRESS`` if set, else ``None`` (no Ray)."""
    env = os.environ.get("AFL_RAY_ADDRESS") or None
    if flag is True:
        return env or "local"
    return flag or env


def run_on_ray(work: Callable[..., list], items: Sequence, *, fleets: int | None = None,
               address: str = "local", num_gpus: float = 0,
               on_outcome: Callable[[object], None] | None = None) -> list:
    """``work(chunk, on_outcome=...)`` for chunks of ``items`` as Ray tasks (``fleets`` of them; default: the
    cluster's CPUs), each typically a fleet of its own on a CPU or GPU worker; every outcome, in the order the runs
    ended. ``on_outcome`` gets each as its run ends, not when its chunk does: a task streams its outcomes back
    (a Ray generator task, :func:`_streamed`), so that ``afl repro --ray`` saves every run as it ends. At the
    command's time limit every task is heard to its end before :class:`~afl.deadline.TimeLimit` is raised.

    ``work`` and the items must be picklable (a module-level function or a ``functools.partial`` of one, and
    plain data). ``address``: ``"local"`` starts a local Ray instance; anything else is passed to
    ``ray.init``. Install with ``pip install 'afl[ray]'``.
    """
    try:
        import ray
    except ImportError:
        raise ParameterError("ray", address, "an installed Ray: pip install 'afl[ray]'") from None
    if not ray.is_initialized():
        check_ray_address(address)
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False)
    if fleets is None:
        fleets = max(1, int(ray.cluster_resources().get("CPU", 1)))
    parts = chunks(list(items), check_int("fleets", fleets, 1))
    remote = ray.remote(num_cpus=1, num_gpus=num_gpus)(_streamed)
    pending = [remote.remote(work, part, i, deadline.limit()) for i, part in enumerate(parts)]
    outcomes, stopped = [], False
    while pending:
        ready, _ = ray.wait(pending, num_returns=1)     # a task with an outcome to give, or one that ended
        try:
            outcome = ray.get(next(ready[0]))
        except StopIteration:
            pending.remove(ready[0])
            continue
        if isinstance(outcome, _Stopped):               # the others are heard to their ends, as in processes
            stopped = True
            continue
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    if stopped:
        raise TimeLimit("the time limit stopped the grid's Ray tasks")
    return outcomes


def check_ray_address(address: str) -> None:
    """A :class:`ParameterError` naming ``--ray`` unless ``address`` is ``"local"``, ``"auto"``, a ``ray://`` URL or
    a ``host:port`` that answers (:func:`_reachable`): checked before anything is created."""
    if address not in ("local", "auto") and not address.startswith("ray://"):
        _reachable(address)


def _reachable(address: str, timeout_s: float = 10.0) -> None:
    """A :class:`ParameterError` naming ``--ray`` unless ``host:port`` answers within ``timeout_s`` (``ray.init``
    would retry an unreachable cluster for minutes)."""
    import socket
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdecimal():
        raise ParameterError("ray", address, "a cluster address host:port, 'auto', 'ray://host:port' or none (a "
                             "local Ray instance)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ParameterError("ray", address, f"a Ray cluster that answers (none did within {timeout_s:g} s: "
                             f"{error.strerror or error})") from None


def _streamed(work, chunk, index: int, limit: float | None):
    """A Ray generator task: ``work(chunk, on_outcome=...)`` in a thread of the worker, each outcome yielded as its
    run ends; an error of ``work`` raised after the outcomes before it. ``limit``: the command's time limit (epoch
    seconds; a worker on another machine has not inherited it), reached yielded as :class:`_Stopped` (Ray would turn
    it into a cancelled task)."""
    if limit is None:
        deadline.clear()
    else:
        deadline.start_at(limit)
    box: queues.SimpleQueue = queues.SimpleQueue()
    end = object()

    def run():
        try:
            work(chunk, on_outcome=box.put)
        except TimeLimit:
            box.put(_Stopped(index))
        except BaseException as error:          # noqa: B036 -- handed to the task's thread, which raises it
            box.put(_Raised(error))
        box.put(end)
    threading.Thread(target=run, daemon=True).start()
    while (item := box.get()) is not end:
        if isinstance(item, _Raised):
            raise item.error
        yield item


@dataclass
class _Raised:
    error: BaseException


__all__ = ["DEFAULT_SIZE", "Outcome", "attempt", "run_fleet", "run_one_by_one", "run_in_processes", "process_parts",
           "process_threads", "chunks", "ray_address", "check_ray_address", "run_on_ray"]
