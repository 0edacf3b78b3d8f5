"""A command's time limit (``afl repro --time-limit``), for a job that must end by a set time (a Slurm allocation, a
Colab session, a spot instance): past it, a run stops at its next event or round, a run that checkpoints saves its
state first (:mod:`afl.checkpoint`), and the command ends cleanly, its finished runs saved, to go on in the next
job with the same command. A first Ctrl-C during ``afl repro`` ends the limit at once (:func:`ctrl_c_stops`).

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
_by_ctrl_c = False      # whether Ctrl-C ended the limit (expire) rather than the clock


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
    global _deadline, _by_ctrl_c
    _deadline, _by_ctrl_c = None, False
    os.environ.pop(ENV, None)


def expire() -> None:
    """End the time limit now, for Ctrl-C: every run stops at its next round or event, its checkpoint saved."""
    global _by_ctrl_c
    start(0.0)
    _by_ctrl_c = True


def by_ctrl_c() -> bool:
    """Whether the limit was ended by Ctrl-C (:func:`ctrl_c_stops`) rather than reached."""
    return _by_ctrl_c


@contextmanager
def ctrl_c_stops(again_stops: bool = True):
    """While inside, a first Ctrl-C (SIGINT) ends the time limit now (:func:`expire`): every run stops at its next
    round or event with its checkpoint saved, and the command ends as at its time limit, instead of losing what the
    runs computed since their last checkpoint; with ``again_stops`` a second Ctrl-C stops at once. In the main
    thread only (elsewhere it changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first(signum, frame):
        expire()
        if again_stops:
            print("\nafl: Ctrl-C: every run stops at its next round or event and saves its checkpoint "
                  "(Ctrl-C again: stop at once)", file=sys.stderr)
            signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def passed() -> bool:
    """Whether the command's time limit, if it has one, is reached."""
    return _deadline is not None and time.time() >= _deadline


def check() -> None:
    """Raise :class:`TimeLimit` once the command's time limit is reached."""
    if passed():
        raise TimeLimit("the command's time limit is reached")


__all__ = ["TimeLimit", "ENV", "parse", "start", "clear", "expire", "by_ctrl_c", "ctrl_c_stops", "passed", "check"]
