"""Speed profiles: which clients are slow or fast, and how long their steps take.

A :class:`SpeedProfile` puts each of ``n`` clients in one speed class, each class with its own step-time
distribution, plus optional per-model cost factors. The time of one step of model ``m`` on client ``i`` is
``costs[m] * X`` with ``X`` drawn from the client's class distribution; with :func:`three_speed` the class
distribution is ``base.scaled(multiplier)``, giving FedAST's ``cost_m x multiplier_i x base sample`` (App. C.6).

Class sizes are exact: ``n * fractions`` rounded by the largest-remainder rule (floors first, then one more
client to the classes with the largest fractional parts, earlier class first on ties), then a seeded random
permutation decides which clients land in which class (FAVAS Sec. 5: clients are "randomly grouped").
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from afl.errors import ParameterError, check, check_int, check_real
from afl.sim._rng import generator
from afl.sim.distributions import Exponential, ShiftedExponential, StepTime

#: FedAST App. C.6: average time of one stochastic gradient per model (relative units, GTX TITAN X).
FEDAST_MODEL_COSTS = {"mnist": 0.148, "fashion-mnist": 0.240, "cifar10": 0.228, "shakespeare": 0.555,
                      "cifar100": 2.071}


def class_counts(n: int, fractions: Sequence[float]) -> np.ndarray:
    """Exact class sizes summing to ``n`` (largest-remainder rounding of ``n * fractions``)."""
    n = check_int("n", n, 1)
    f = np.array([check_real("fractions", x) for x in fractions], dtype=float)
    check(len(f) >= 1 and bool(np.all(f >= 0)), "fractions", tuple(fractions), "non-negative numbers")
    check(abs(f.sum() - 1.0) <= 1e-9, "fractions", tuple(fractions), "numbers summing to 1")
    raw = n * f
    counts = np.floor(raw + 1e-9).astype(int)
    order = sorted(range(len(f)), key=lambda c: (-(raw[c] - counts[c]), c))
    for c in order[: n - counts.sum()]:
        counts[c] += 1
    return counts


class SpeedProfile:
    """``n`` clients in named speed classes; per-class step-time distributions; per-model cost factors."""

    def __init__(self, names: Sequence[str], class_of, step_times: Sequence[StepTime],
                 costs: Sequence[float] = (1.0,)):
        names, step_times = tuple(names), tuple(step_times)
        check(len(names) >= 1 and len(set(names)) == len(names), "names", names, "distinct class names")
        check(len(step_times) == len(names) and all(isinstance(d, StepTime) for d in step_times),
              "step_times", step_times, f"{len(names)} StepTime distributions, one per class")
        class_of = np.asarray(class_of)
        check(class_of.ndim == 1 and class_of.size >= 1 and np.issubdtype(class_of.dtype, np.integer)
              and bool(np.all((class_of >= 0) & (class_of < len(names)))),
              "class_of", class_of, f"a 1-d integer array with values in [0, {len(names) - 1}]")
        self.names = names
        self.class_of = class_of.astype(int)
        self.class_of.setflags(write=False)
        self.step_times = step_times
        self.costs = tuple(check_real("costs", c, 0, strict_low=True) for c in costs)
        check(len(self.costs) >= 1, "costs", costs, "at least one model cost")

    @classmethod
    def from_fractions(cls, n: int, names: Sequence[str], fractions: Sequence[float],
                       step_times: Sequence[StepTime], seed=0, costs: Sequence[float] = (1.0,)) -> "SpeedProfile":
        """Assign exactly :func:`class_counts` ``(n, fractions)`` clients to each class, at random (seeded)."""
        check(len(fractions) == len(tuple(names)), "fractions", tuple(fractions), f"{len(tuple(names))} numbers")
        counts = class_counts(n, fractions)
        class_of = np.empty(n, dtype=int)
        class_of[generator(seed).permutation(n)] = np.repeat(np.arange(len(counts)), counts)
        return cls(names, class_of, step_times, costs)

    @property
    def n(self) -> int:
        return int(self.class_of.size)

    def class_name(self, client: int) -> str:
        return self.names[self.class_of[client]]

    def counts(self) -> dict[str, int]:
        """Number of clients per class, in class order."""
        return {name: int(np.sum(self.class_of == c)) for c, name in enumerate(self.names)}

    def clients_of(self, name: str) -> np.ndarray:
        """Client ids of class ``name``, ascending."""
        if name not in self.names:
            raise ParameterError("name", name, "one of " + ", ".join(map(repr, self.names)))
        return np.flatnonzero(self.class_of == self.names.index(name))

    def _model(self, model: int) -> int:
        return check_int("model", model, 0, len(self.costs) - 1)

    def step_time(self, client: int, model: int = 0) -> StepTime:
        """Distribution of one local step of ``model`` on ``client``."""
        check_int("client", client, 0, self.n - 1)
        d = self.step_times[self.class_of[client]]
        cost = self.costs[self._model(model)]
        return d if cost == 1.0 else d.scaled(cost)

    def mean_step_times(self, model: int = 0) -> np.ndarray:
        """Mean step time of every client, shape ``(n,)``."""
        cost = self.costs[self._model(model)]
        return cost * np.array([self.step_times[c].mean for c in self.class_of])

    def request_time(self, rng: np.random.Generator, client: int, steps: int, model: int = 0,
                     per_step: bool = True) -> float:
        """Time for ``steps`` local steps: a sum of independent step times (``per_step=True``), or one draw
        multiplied by ``steps`` as FedAST's simulator does (App. C.6, ``per_step=False``)."""
        steps = check_int("steps", steps, 0)
        d = self.step_time(client, model)
        if steps == 0:
            return 0.0
        return float(d.sample(rng, steps).sum()) if per_step else steps * d.sample(rng)

    def with_costs(self, costs: Sequence[float]) -> "SpeedProfile":
        """Same clients and classes, other per-model cost factors (e.g. ``FEDAST_MODEL_COSTS`` values)."""
        return SpeedProfile(self.names, self.class_of, self.step_times, costs)

    def __repr__(self):
        parts = ", ".join(f"{k}={v} x {d!r}" for (k, v), d in zip(self.counts().items(), self.step_times))
        return f"SpeedProfile(n={self.n}: {parts}, costs={self.costs})"


def two_speed(n: int, slow_fraction: float = 1 / 3, fast: StepTime | None = None, slow: StepTime | None = None,
              seed=0) -> SpeedProfile:
    """FAVAS/QuAFL clients: classes ("fast", "slow"), exponential step times of mean 2 and 8 by default."""
    slow_fraction = check_real("slow_fraction", slow_fraction, 0, 1)
    fast = Exponential(2.0) if fast is None else fast
    slow = Exponential(8.0) if slow is None else slow
    return SpeedProfile.from_fractions(n, ("fast", "slow"), (1.0 - slow_fraction, slow_fraction), (fast, slow), seed)


def three_speed(n: int, fractions: Sequence[float] = (0.25, 0.5, 0.25),
                multipliers: Sequence[float] = (1.3, 1.0, 0.7), base: StepTime | None = None, seed=0,
                costs: Sequence[float] = (1.0,)) -> SpeedProfile:
    """FedAST clients: classes ("slow", "normal", "fast") with step time ``multiplier x base`` (App. C.6).

    ``base`` defaults to ``ShiftedExponential.fedast(1.0)`` (shift 1, exponential mean 2); ``costs`` are per-model
    factors, e.g. ``[FEDAST_MODEL_COSTS[m] for m in ("mnist", "cifar10")]``.
    """
    check(len(multipliers) == 3, "multipliers", tuple(multipliers), "3 numbers (slow, normal, fast)")
    base = ShiftedExponential.fedast(1.0) if base is None else base
    dists = [base.scaled(check_real("multipliers", m, 0, strict_low=True)) for m in multipliers]
    return SpeedProfile.from_fractions(n, ("slow", "normal", "fast"), fractions, dists, seed, costs)
