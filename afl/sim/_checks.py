"""Small argument checks shared by the simulator modules (all raise :class:`afl.errors.ParameterError`)."""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from afl.errors import ParameterError, check

_FAST_REALS = (float, int, np.float64, np.int64)
_FAST_INTS = (int, np.int64)


def real(name: str, value, allowed: str = "a finite real number") -> float:
    """Return ``value`` as a float, or raise unless it is a finite real number (bools are refused)."""
    if type(value) in _FAST_REALS and math.isfinite(value):  # fast path for the simulator's inner loops
        return float(value)
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    check(ok, name, value, allowed)
    return float(value)


def positive(name: str, value) -> float:
    """A finite real number > 0."""
    x = real(name, value, "a finite real number > 0")
    check(x > 0, name, value, "a finite real number > 0")
    return x


def nonnegative(name: str, value) -> float:
    """A finite real number >= 0."""
    x = real(name, value, "a finite real number >= 0")
    check(x >= 0, name, value, "a finite real number >= 0")
    return x


def integer(name: str, value, low: int = 0, high: int | None = None) -> int:
    """An integer in ``[low, high]`` (``high`` None: no upper bound); bools are refused."""
    if type(value) in _FAST_INTS and value >= low and (high is None or value <= high):
        return int(value)
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    ok = isinstance(value, Integral) and not isinstance(value, bool)
    check(ok, name, value, allowed)
    check(value >= low and (high is None or value <= high), name, value, allowed)
    return int(value)


def generator(rng) -> np.random.Generator:
    """A numpy Generator from a Generator, an int seed, or None (seed 0, so results stay reproducible)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, Integral) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise ParameterError("rng", rng, "a numpy.random.Generator, a non-negative int seed or None")
