"""Errors raised by afl: every bad input names the parameter, the value given and what is allowed.

The validators below are the one place argument checks live: :func:`check` (any condition),
:func:`check_choice` (one of a set), :func:`check_int` and :func:`check_real` (typed numbers in a range).
Each raises :class:`ParameterError`, whose message reads ``name=value is not allowed; expected <allowed>``.
"""
from __future__ import annotations

import math
import os
from numbers import Integral, Real

import numpy as np

# Exact types that need no isinstance walk: the simulator validates in its inner loops.
_FAST_INTS = (int, np.int64)
_FAST_REALS = (float, int, np.float64, np.int64)


class ParameterError(ValueError):
    """A parameter has a value outside what is allowed."""

    def __init__(self, name: str, value, allowed: str):
        self.name, self.value, self.allowed = name, value, allowed
        super().__init__(f"{name}={value!r} is not allowed; expected {allowed}")

    def __reduce__(self):                      # picklable (errors come back from Ray workers)
        return type(self), (self.name, self.value, self.allowed)


class RunsFailed(ValueError):
    """Some runs of a grid raised; the others finished (and were saved). ``failures``: (run key, error)."""

    def __init__(self, failures: list):
        self.failures = failures
        lines = "".join(f"\n  {key}: {type(err).__name__}: {err}" for key, err in failures)
        super().__init__(f"{len(failures)} run(s) failed; the others finished and are saved:{lines}")

    def __reduce__(self):
        return type(self), (self.failures,)


class DataMissingError(ValueError):
    """A dataset file is absent from every searched directory and could not be downloaded."""


class ChecksumError(ValueError):
    """A dataset file exists but its MD5 differs from the expected one."""


def check(condition: bool, name: str, value, allowed: str) -> None:
    """Raise :class:`ParameterError` unless ``condition`` holds."""
    if not condition:
        raise ParameterError(name, value, allowed)


def check_choice(name: str, value, choices) -> None:
    """Raise :class:`ParameterError` unless ``value`` is one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ParameterError(name, value, "one of " + ", ".join(map(repr, choices)))


def _allowed(kind: str, low, high, strict_low: bool, strict_high: bool, fmt, hint: str | None) -> str:
    """``"an integer in [1, 8] (hint)"``, ``"a finite real number > 0"``, ... for the messages below."""
    if low is not None and high is not None:
        text = f"{kind} in {'(' if strict_low else '['}{fmt(low)}, {fmt(high)}{')' if strict_high else ']'}"
    elif low is not None:
        text = f"{kind} {'>' if strict_low else '>='} {fmt(low)}"
    elif high is not None:
        text = f"{kind} {'<' if strict_high else '<='} {fmt(high)}"
    else:
        text = kind
    return f"{text} ({hint})" if hint else text


def check_int(name: str, value, low: int | None = None, high: int | None = None, *, hint: str | None = None) -> int:
    """Return ``value`` as an ``int``, or raise :class:`ParameterError` unless it is an integer in ``[low, high]``.

    Python and numpy integers are accepted; bools and integral floats (``3.0``) are not. ``low``/``high``
    None: no bound on that side. ``hint`` is appended to the message in parentheses (e.g. what ``high`` is).
    """
    if type(value) in _FAST_INTS or (isinstance(value, Integral) and not isinstance(value, bool)):
        if (low is None or value >= low) and (high is None or value <= high):
            return int(value)
    raise ParameterError(name, value, _allowed("an integer", low, high, False, False, str, hint))


def check_real(name: str, value, low: float | None = None, high: float | None = None, *, strict_low: bool = False,
               strict_high: bool = False, hint: str | None = None) -> float:
    """Return ``value`` as a ``float``, or raise :class:`ParameterError` unless it is a finite real number in range.

    The range is ``low <= value <= high`` (``<`` with ``strict_low``/``strict_high``; None: unbounded), so
    ``check_real(n, v, 0, strict_low=True)`` asks for a positive number and ``check_real(n, v, 0)`` for a
    non-negative one. Python and numpy reals are accepted; bools, NaN and infinities are not. ``hint``: as in
    :func:`check_int`.
    """
    if type(value) in _FAST_REALS or (isinstance(value, Real) and not isinstance(value, bool)):
        if (math.isfinite(value)
                and (low is None or (value > low if strict_low else value >= low))
                and (high is None or (value < high if strict_high else value <= high))):
            return float(value)
    raise ParameterError(name, value, _allowed("a finite real number", low, high, strict_low, strict_high,
                                               lambda v: f"{v:g}", hint))


def env_number(name: str, kind: type, low: float, hint: str):
    """The environment variable ``name`` as a ``kind`` (``int`` or ``float``) >= ``low``, or None if it is unset; a
    :class:`ParameterError` naming the variable, its text and ``hint`` otherwise."""
    text = os.environ.get(name)
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ParameterError(name, text, hint) from None
    return (check_int if kind is int else check_real)(name, value, low, hint=hint)
