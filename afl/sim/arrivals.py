"""Client arrival processes: when new clients check in with the server (QAFeL App. D, after FedBuff).

QAFeL models "clients arriving at a constant rate" with half-normal training durations; by Little's law the mean
number of clients training at once (the concurrency) is ``rate * E[duration]``: :func:`rate_for_concurrency`
reproduces the paper's rates 125 / 627 / 1253 for concurrency 100 / 500 / 1000 with ``HalfNormal(1)``.
"""
from __future__ import annotations

import numpy as np

from afl.errors import ParameterError, check_choice, check_int, check_real
from afl.sim.distributions import StepTime


class ArrivalProcess:
    """Arrivals at ``rate`` per unit of simulated time."""

    kind = ""

    def __init__(self, rate: float):
        self.rate = check_real("rate", rate, 0, strict_low=True)

    def next_times(self, rng: np.random.Generator, start: float, count: int) -> np.ndarray:
        """The next ``count`` arrival times strictly after ``start``, increasing, shape ``(count,)``."""
        start = check_real("start", start)
        count = check_int("count", count, 0)
        return start + np.cumsum(self._gaps(rng, count))

    def _gaps(self, rng, count):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(rate={self.rate:g})"

    def __eq__(self, other):
        return type(self) is type(other) and self.rate == other.rate

    def __hash__(self):
        return hash((type(self).__name__, self.rate))


class ConstantRate(ArrivalProcess):
    """One arrival every ``1 / rate`` (deterministic; ``rng`` is accepted for a uniform interface)."""

    kind = "constant"

    def _gaps(self, rng, count):
        return np.full(count, 1.0 / self.rate)


class PoissonArrivals(ArrivalProcess):
    """Poisson process: i.i.d. exponential gaps of mean ``1 / rate``."""

    kind = "poisson"

    def _gaps(self, rng, count):
        if not isinstance(rng, np.random.Generator):
            raise ParameterError("rng", rng, "a numpy.random.Generator")
        return rng.exponential(1.0 / self.rate, count)


ARRIVALS = {"constant": ConstantRate, "poisson": PoissonArrivals}


def make_arrivals(kind: str, rate: float) -> ArrivalProcess:
    """``make_arrivals("constant" | "poisson", rate)``."""
    check_choice("kind", kind, ARRIVALS)
    return ARRIVALS[kind](rate)


def rate_for_concurrency(concurrency: float, duration: StepTime) -> float:
    """Arrival rate giving ``concurrency`` clients in training on average: ``concurrency / E[duration]``."""
    concurrency = check_real("concurrency", concurrency, 0, strict_low=True)
    if not isinstance(duration, StepTime):
        raise ParameterError("duration", duration, "a StepTime distribution")
    return concurrency / duration.mean
