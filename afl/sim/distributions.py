"""Step-time distributions: how long one local SGD step (or one request) takes in simulated time.

Families used by the papers:

- :class:`Exponential` -- FAVAS / QuAFL: per-step times, fast clients mean 2, slow clients mean 8
  (public QuAFL code, ``Client.get_run_time``).
- :class:`ShiftedExponential` -- FedAST (App. C.6): ``shift + Exp(mean)``; the paper's
  ``P(X <= x) = 1 - exp(-(x - b) / (2 b))`` is ``ShiftedExponential.fedast(b)`` (shift ``b``, exponential mean ``2 b``).
- :class:`HalfNormal` -- QAFeL (App. D, after FedBuff): training duration ``|X|``, ``X ~ N(0, scale^2)``.
- :class:`Constant` and :class:`LogNormal` -- for experiments and teaching.

Every family is closed under scaling (``scaled(f)`` multiplies the random time by ``f``), which is how speed classes
and per-model costs are applied (FedAST: time = cost_m x multiplier_i x base sample).
"""
from __future__ import annotations

import math
import numpy as np

from afl.errors import ParameterError, check_choice, check_real

_SQRT2 = math.sqrt(2.0)
_erf = np.vectorize(math.erf, otypes=[float])


def _times(t) -> np.ndarray:
    return np.asarray(t, dtype=float)


def _out(x: np.ndarray, scalar_input: bool):
    return float(x) if scalar_input else x


class StepTime:
    """Base class: a positive random duration; immutable, equal when family and parameters are equal."""

    kind: str = ""
    _names: tuple[str, ...] = ()

    def _set(self, **values) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other):
        return type(self) is type(other) and self.params == other.params

    def __hash__(self):
        return hash((type(self).__name__, tuple(self.params.values())))

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v:g}" for k, v in self.params.items()) + ")"

    @property
    def mean(self) -> float:
        raise NotImplementedError

    def describe(self) -> str:
        """A short human-readable form for legends (default: the repr)."""
        return repr(self)

    def sample(self, rng: np.random.Generator, size=None):
        """Draw durations with ``rng``; a float if ``size`` is None, else an array of shape ``size``."""
        if not isinstance(rng, np.random.Generator):
            raise ParameterError("rng", rng, "a numpy.random.Generator")
        x = self._draw(rng, size)
        return float(x) if size is None else np.asarray(x, dtype=float)

    def cdf(self, t):
        """``P(X <= t)``, elementwise; a float for a scalar ``t``."""
        raise NotImplementedError

    def scaled(self, factor: float) -> "StepTime":
        """The distribution of ``factor * X`` (same family)."""
        raise NotImplementedError

    def _draw(self, rng, size):
        raise NotImplementedError

    @property
    def params(self) -> dict:
        """The constructor arguments, e.g. ``{"mean": 2.0}``: ``type(d)(**d.params) == d``."""
        return {name: getattr(self, name) for name in self._names}


def _factor(factor) -> float:
    return check_real("factor", factor, 0, strict_low=True)


class Exponential(StepTime):
    """``Exp`` with the given mean (rate ``1/mean``). FAVAS/QuAFL per-step times."""

    kind = "exponential"

    def __init__(self, mean: float):
        self._set(_mean=check_real("mean", mean, 0, strict_low=True))

    @property
    def mean(self) -> float:
        return self._mean

    @property
    def params(self) -> dict:
        return {"mean": self._mean}

    def _draw(self, rng, size):
        return rng.exponential(self._mean, size)

    def cdf(self, t):
        x = _times(t)
        return _out(np.where(x >= 0, -np.expm1(-np.maximum(x, 0) / self._mean), 0.0), np.ndim(t) == 0)

    def scaled(self, factor):
        return Exponential(self._mean * _factor(factor))


class ShiftedExponential(StepTime):
    """``shift + Exp(mean)``: ``mean`` is the mean of the exponential part, so the total mean is ``shift + mean``.

    FedAST (App. C.6) uses shift ``b`` and exponential mean ``2 b``: see :meth:`fedast`.
    """

    kind = "shifted_exponential"

    def __init__(self, shift: float, mean: float):
        self._set(shift=check_real("shift", shift, 0), exp_mean=check_real("mean", mean, 0, strict_low=True))

    @classmethod
    def fedast(cls, beta: float) -> "ShiftedExponential":
        """FedAST's ``P(X <= x) = 1 - exp(-(x - beta) / (2 beta))`` for ``x >= beta``."""
        beta = check_real("beta", beta, 0, strict_low=True)
        return cls(shift=beta, mean=2.0 * beta)

    @property
    def mean(self) -> float:
        return self.shift + self.exp_mean

    @property
    def params(self) -> dict:
        return {"shift": self.shift, "mean": self.exp_mean}

    def describe(self) -> str:
        return f"{self.shift:g} + Exponential(mean={self.exp_mean:g})"

    def _draw(self, rng, size):
        return self.shift + rng.exponential(self.exp_mean, size)

    def cdf(self, t):
        x = _times(t) - self.shift
        return _out(np.where(x >= 0, -np.expm1(-np.maximum(x, 0) / self.exp_mean), 0.0), np.ndim(t) == 0)

    def scaled(self, factor):
        f = _factor(factor)
        return ShiftedExponential(self.shift * f, self.exp_mean * f)


class HalfNormal(StepTime):
    """``|X|`` with ``X ~ N(0, scale^2)``; mean ``scale * sqrt(2/pi)``. QAFeL/FedBuff training durations."""

    kind = "half_normal"
    _names = ("scale",)

    def __init__(self, scale: float):
        self._set(scale=check_real("scale", scale, 0, strict_low=True))

    @property
    def mean(self) -> float:
        return self.scale * math.sqrt(2.0 / math.pi)

    def _draw(self, rng, size):
        return np.abs(rng.normal(0.0, self.scale, size))

    def cdf(self, t):
        x = _times(t)
        return _out(np.where(x >= 0, _erf(np.maximum(x, 0) / (self.scale * _SQRT2)), 0.0), np.ndim(t) == 0)

    def scaled(self, factor):
        return HalfNormal(self.scale * _factor(factor))


class Constant(StepTime):
    """Always ``value`` (> 0): deterministic clients, handy for hand-checked tests."""

    kind = "constant"
    _names = ("value",)

    def __init__(self, value: float):
        self._set(value=check_real("value", value, 0, strict_low=True))

    @property
    def mean(self) -> float:
        return self.value

    def _draw(self, rng, size):
        return np.full(() if size is None else size, self.value)

    def cdf(self, t):
        return _out((_times(t) >= self.value).astype(float), np.ndim(t) == 0)

    def scaled(self, factor):
        return Constant(self.value * _factor(factor))


class LogNormal(StepTime):
    """``exp(N(mu, sigma^2))``; mean ``exp(mu + sigma^2 / 2)``. Heavy-ish tails for straggler experiments."""

    kind = "lognormal"
    _names = ("mu", "sigma")

    def __init__(self, mu: float, sigma: float):
        self._set(mu=check_real("mu", mu), sigma=check_real("sigma", sigma, 0, strict_low=True))

    @property
    def mean(self) -> float:
        return math.exp(self.mu + 0.5 * self.sigma**2)

    def _draw(self, rng, size):
        return rng.lognormal(self.mu, self.sigma, size)

    def cdf(self, t):
        x = _times(t)
        with np.errstate(divide="ignore"):
            z = (np.log(np.maximum(x, 0)) - self.mu) / (self.sigma * _SQRT2)
        return _out(np.where(x > 0, 0.5 * (1.0 + _erf(z)), 0.0), np.ndim(t) == 0)

    def scaled(self, factor):
        return LogNormal(self.mu + math.log(_factor(factor)), self.sigma)


DISTRIBUTIONS: dict[str, tuple[type, tuple[str, ...]]] = {
    "exponential": (Exponential, ("mean",)),
    "shifted_exponential": (ShiftedExponential, ("shift", "mean")),
    "half_normal": (HalfNormal, ("scale",)),
    "constant": (Constant, ("value",)),
    "lognormal": (LogNormal, ("mu", "sigma")),
}


def make_distribution(kind: str, **params) -> StepTime:
    """Build a step-time distribution by name, e.g. ``make_distribution("exponential", mean=2)``.

    Kinds and parameters: exponential(mean), shifted_exponential(shift, mean), half_normal(scale),
    constant(value), lognormal(mu, sigma). Unknown kinds, missing/unknown parameters and out-of-range values
    raise :class:`ParameterError`.
    """
    check_choice("kind", kind, DISTRIBUTIONS)
    cls, names = DISTRIBUTIONS[kind]
    for name, value in params.items():
        if name not in names:
            raise ParameterError(name, value, f"a parameter of {kind!r}: one of {', '.join(names)}")
    for name in names:
        if name not in params:
            raise ParameterError(name, None, f"a value (required by {kind!r})")
    return cls(**params)
