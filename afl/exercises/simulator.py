"""Exercises on the client delay simulator (notebook 00): how many local steps a client finishes before the
server asks (FAVAS Sec. 3, :mod:`afl.sim.counts`).

* :data:`check_expected_steps`: ``expected_steps(mean, window, K)`` = ``E[E ∧ K]`` for exponential steps of
  mean ``mean`` in a window of length ``window`` (E ~ Poisson(window / mean));
* :data:`check_contact_steps`: ``contact_steps(mean, K, n, s, interval)`` = ``E[E ∧ K]`` at a contact of the
  FAVAS / QuAFL server clock, where the window is ``G x interval``, ``G ~ Geometric(s / n)``.
"""
from __future__ import annotations

import math

from ..sim.counts import contact_steps_pmf, steps_completed_pmf, truncated_steps_stats
from ..sim.distributions import Exponential
from .checking import Exercise, Mistake, close


def expected_steps(mean: float, window: float, K: int) -> float:
    """afl's ``E[E ∧ K]``: :func:`~afl.sim.counts.steps_completed_pmf` then its mean."""
    return truncated_steps_stats(steps_completed_pmf(Exponential(mean), window, K))[0]


def contact_steps(mean: float, K: int, n: int, s: int, interval: float) -> float:
    """afl's ``E[E ∧ K]`` at a contact: :func:`~afl.sim.counts.contact_steps_pmf` then its mean."""
    return truncated_steps_stats(contact_steps_pmf(Exponential(mean), K, n, s, interval))[0]


def _window_cases(rng):
    yield {"mean": 2.0, "window": 10.0, "K": 1}                # K = 1: the first step reached or not
    yield {"mean": 4.0, "window": 0.2, "K": 3}                 # hardly any progress
    yield {"mean": 1.0, "window": 3.0, "K": 30}                # a cap that is (almost) never reached
    yield {"mean": 1.0, "window": 30.0, "K": 4}                # a cap that is almost always reached
    for _ in range(12):
        mean = float(rng.uniform(0.5, 8))
        window = float(rng.uniform(1, 40))
        lam = window / mean
        yield {"mean": round(mean, 3), "window": round(window, 3), "K": int(rng.integers(1, max(2, int(lam)) + 1))}


def _contact_cases(rng):
    yield {"mean": 2.0, "K": 5, "n": 8, "s": 8, "interval": 3.0}     # every client contacted at every step
    yield {"mean": 2.0, "K": 5, "n": 20, "s": 1, "interval": 3.0}    # a single client a step
    for _ in range(6):
        n = int(rng.integers(4, 60))
        yield {"mean": round(float(rng.uniform(1, 8)), 3), "K": int(rng.integers(2, 25)), "n": n,
               "s": int(rng.integers(1, n // 2 + 1)), "interval": round(float(rng.uniform(2, 12)), 3)}


check_expected_steps = Exercise(
    name="check_expected_steps", signature="expected_steps(mean, window, K)", reference=expected_steps,
    cases=_window_cases, source="the expected steps done in a window (at most K)",
    implementations=("afl.sim:steps_completed_pmf", "afl.sim:truncated_steps_stats"),
    idea="with exponential steps the number of steps done in a window has a known law (notebook 00, section 2); "
         "then average min(E, K), not E.",
    hint="E ~ Poisson(window / mean); E[min(E, K)] = sum over k = 1..K of P(E >= k).",
    mistakes=(
        Mistake(lambda mean, window, K: window / mean,
                "window / mean is E[E] without the cap: a client that reaches K steps stops and waits, so average "
                "min(E, K), not E."),
        Mistake(lambda mean, window, K: min(window / mean, K),
                "min(E[E], K) caps the average, not each draw: E[min(E, K)] is smaller (min is concave). Sum "
                "P(E >= k) for k = 1..K, or min(e, K) P(E = e) over e."),
        Mistake(lambda mean, window, K: expected_steps(mean, window, K - 1) if K > 1 else 0.0,
                "one step short: E[min(E, K)] = sum of P(E >= k) for k = 1 to K, K included."),
        Mistake(lambda mean, window, K: 1 - math.exp(-window / mean),
                "that is P(E > 0), the chance of any progress, not the expected number of steps."),
    ))

check_contact_steps = Exercise(
    name="check_contact_steps", signature="contact_steps(mean, K, n, s, interval)", reference=contact_steps,
    cases=_contact_cases, source="the expected steps done between two contacts (FAVAS's server clock)",
    implementations=("afl.sim:contact_steps_pmf", "afl.sim:truncated_steps_stats"),
    inner=(("expected_steps", expected_steps),),
    same=lambda got, expected: close(got, expected, rtol=1e-4),
    idea="a client is one of the s of n contacted at each server step: how many server steps pass between two of "
         "its contacts, and with what probabilities?",
    hint="average expected_steps(mean, g * interval, K) over G = g with P(G = g) = p (1 - p)^(g - 1), p = s / n; "
         "stop the sum when the remaining probability is negligible (or when every longer window reaches K).",
    mistakes=(
        Mistake(lambda mean, K, n, s, interval: expected_steps(mean, interval, K),
                "a client is not contacted at every server step: it is one of the s of n with probability s / n, "
                "so its window is G x interval, G ~ Geometric(s / n)."),
        Mistake(lambda mean, K, n, s, interval: expected_steps(mean, interval * n / s, K),
                "the window is random: average over G (P(G = g) = p (1 - p)^(g - 1), p = s / n) instead of "
                "plugging in its mean n interval / s (min(., K) is concave, so the plug-in is too large)."),
    ))

__all__ = ["check_expected_steps", "check_contact_steps", "expected_steps", "contact_steps"]
