"""A command's time limit (``afl repro --time-limit``), for a job that must end by a set time (a Slurm allocation, a
Colab session, a spot instance): past it, a run stops at its next event or round, a run that checkpoints saves its
state first (:mod:`afl.checkpoint`), and the command ends cleanly, its finished runs saved, to go on in the next
job with the same command. A first Ctrl-C or SIGTERM during ``afl repro`` ends the limit at once
(:func:`stop_on_signals`). A command that has not stopped :func:`grace_s` seconds past its limit (a round or an
engine call longer than that: a grid far too large for the machine) stops at once (:class:`Overrun`): the limit is a
bound, and a job's next steps (archiving its results) keep their time.

The limit is an absolute time in ``$AFL_DEADLINE`` (seconds since the epoch), so that the processes of a grid
(``--processes``) share it.
"""
from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager

from .errors import ParameterError, env_number

ENV = "AFL_DEADLINE"


#: seconds past the limit (or past the signal that ended it) that a command is given to reach its runs' next round or
#: event before it stops at once, unless ``$AFL_TIME_LIMIT_GRACE`` says otherwise (:func:`grace_s`)
GRACE_S = 120.0


class TimeLimit(KeyboardInterrupt):
    """The command's time limit was reached: it stops as at Ctrl-C (finished runs and checkpoints are kept)."""


class Overrun(TimeLimit):
    """The limit passed :func:`grace_s` seconds ago with a run still short of its next round or event: the command
    stopped at once; finished runs are kept, and a run goes on from its last checkpoint (what it computed since is
    lost)."""


def _read() -> float | None:
    value = os.environ.get(ENV)
    return None if value in (None, "") else float(value)


_deadline = _read()
_signal: int | None = None    # the signal that ended the limit (expire), if one did rather than the clock


def grace_s() -> float:
    """Seconds a command is given past its limit: ``$AFL_TIME_LIMIT_GRACE`` if set, else :data:`GRACE_S`."""
    value = env_number("AFL_TIME_LIMIT_GRACE", float, 0, "seconds, >= 0")
    return GRACE_S if value is None else value


def parse(text) -> float:
    """Seconds of a time limit: ``"90s"``, ``"9m"``, ``"2.5h"`` or a number of minutes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*", str(text))
    if match is None or float(match[1]) <= 0:
        raise ParameterError("--time-limit", text, "a positive duration: 90s, 9m, 2.5h, or minutes (9)")
    return float(match[1]) * {"s": 1, "m": 60, "h": 3600, "": 60}[match[2]]


def start(seconds: float) -> float:
    """Set the limit ``seconds`` from now, for this process and those it starts; returns it (epoch seconds)."""
    return start_at(time.time() + seconds)


def start_at(epoch: float) -> float:
    """Set the limit at ``epoch`` (seconds since the epoch), for this process and those it starts: a limit handed to
    a process that did not inherit it (a Ray worker on another machine); returns it."""
    global _deadline
    _deadline = epoch
    os.environ[ENV] = repr(_deadline)
    return _deadline


def limit() -> float | None:
    """The command's time limit in seconds since the epoch, None without one."""
    return _deadline


def clear() -> None:
    global _deadline, _signal
    _deadline, _signal = None, None
    os.environ.pop(ENV, None)


def expire(signum: int) -> None:
    """End the time limit now, for the signal ``signum``: every run stops at its next round or event, its checkpoint
    saved."""
    global _signal
    start(0.0)
    _signal = signum


def stopped_by() -> int | None:
    """The signal that ended the limit (:func:`stop_on_signals`), None if the clock did or nothing has."""
    return _signal


@contextmanager
def stop_on_signals(again_stops: bool = True):
    """While inside, a first Ctrl-C (SIGINT) or SIGTERM (a scheduler ending the job, a ``kill``) ends the time limit
    now (:func:`expire`): every run stops at its next round or event with its checkpoint saved, and the command ends
    as at its time limit, instead of losing what the runs computed since their last checkpoint; with ``again_stops``
    a second stops at once (KeyboardInterrupt), and so does :func:`grace_s` seconds past the limit or the first
    signal (:class:`Overrun`, by SIGALRM). A SIGINT the process ignores (a shell's background job) stays ignored. In
    the main thread only (elsewhere it changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handled = [signal.SIGTERM] + [signal.SIGINT] * (signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)

    def second(signum, frame):
        raise KeyboardInterrupt

    grace = grace_s()

    def overrun(signum, frame):
        raise Overrun(f"the command had not stopped {grace:g} s after its time limit")

    def first(signum, frame):
        expire(signum)
        if again_stops:
            signal.setitimer(signal.ITIMER_REAL, max(grace, 1e-6))
            print(f"\nafl: {signal.Signals(signum).name}: every run stops at its next round or event and saves its "
                  "checkpoint (again: stop at once)", file=sys.stderr)
            for s in handled:
                signal.signal(s, second)

    previous = {s: signal.signal(s, first) for s in handled}
    if again_stops:                     # the command's own process (a grid's processes are stopped by it)
        previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, overrun)
        if _deadline is not None:
            signal.setitimer(signal.ITIMER_REAL, max(_deadline - time.time() + grace, 1e-6))
    try:
        yield
    finally:
        if again_stops:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in previous.items():
            signal.signal(s, handler)


def passed() -> bool:
    """Whether the command's time limit, if it has one, is reached."""
    return _deadline is not None and time.time() >= _deadline


def check() -> None:
    """Raise :class:`TimeLimit` once the command's time limit is reached."""
    if passed():
        raise TimeLimit("the command's time limit is reached")


__all__ = ["GRACE_S", "grace_s", "TimeLimit", "Overrun", "ENV", "parse", "start", "start_at", "limit", "clear",
           "expire", "stopped_by", "stop_on_signals", "passed", "check"]
