"""The simulator's random-generator argument: a Generator, a seed, or None."""
from __future__ import annotations

from numbers import Integral

import numpy as np

from afl.errors import ParameterError


def generator(rng) -> np.random.Generator:
    """A numpy Generator from a Generator, an int seed, or None (seed 0, so results stay reproducible)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, Integral) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise ParameterError("rng", rng, "a numpy.random.Generator, a non-negative int seed or None")
