"""A command's time limit (``afl repro --time-limit``), for a job that must end by a set time (a Slurm allocation, a
Colab session, a spot instance): past it, a run stops at its next event or round, a run that checkpoints saves its
state first (:mod:`afl.checkpoint`), and the command ends cleanly, its finished runs saved, to go on in the next
job with the same command. A first Ctrl-C or SIGTERM during ``afl repro`` ends the limit at once
(:func:`stop_on_signals`).

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

from .errors import ParameterError

ENV = "AFL_DEADLINE"


class TimeLimit(KeyboardInterrupt):
    """The command's time limit was reached: it stops as at Ctrl-C (finished runs and checkpoints are kept)."""


def _read() -> float | None:
    value = os.environ.get(ENV)
    return None if value in (None, "") else float(value)


_deadline = _read()
_signal: int | None = None    # the signal that ended the limit (expire), if one did rather than the clock


def parse(text) -> float:
    """Seconds of a time limit: ``"90s"``, ``"9m"``, ``"2.5h"`` or a number of minutes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*", str(text))
    if match is None or float(match[1]) <= 0:
        raise ParameterError("--time-limit", text, "a positive duration: 90s, 9m, 2.5h, or minutes (9)")
    return float(match[1]) * {"s": 1, "m": 60, "h": 3600, "": 60}[match[2]]


def start(seconds: float) -> float:
    """Set the limit ``seconds`` from now, for this process and those it starts; returns it (epoch seconds)."""
    global _deadline
    _deadline = time.time() + seconds
    os.environ[ENV] = repr(_deadline)
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
    a second stops at once (KeyboardInterrupt). A SIGINT the process ignores (a shell's background job) stays
    ignored. In the main thread only (elsewhere it changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handled = [signal.SIGTERM] + [signal.SIGINT] * (signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)

    def second(signum, frame):
        raise KeyboardInterrupt

    def first(signum, frame):
        expire(signum)
        if again_stops:
            print(f"\nafl: {signal.Signals(signum).name}: every run stops at its next round or event and saves its "
                  "checkpoint (again: stop at once)", file=sys.stderr)
            for s in handled:
                signal.signal(s, second)

    previous = {s: signal.signal(s, first) for s in handled}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def passed() -> bool:
    """Whether the command's time limit, if it has one, is reached."""
    return _deadline is not None and time.time() >= _deadline


def check() -> None:
    """Raise :class:`TimeLimit` once the command's time limit is reached."""
    if passed():
        raise TimeLimit("the command's time limit is reached")


__all__ = ["TimeLimit", "ENV", "parse", "start", "clear", "expire", "stopped_by", "stop_on_signals", "passed",
           "check"]
