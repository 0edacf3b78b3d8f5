"""How many local steps a client finishes before the server interrupts it (FAVAS, Sec. 3).

A client restarted at time 0 runs steps of i.i.d. durations ``X_1, X_2, ...``; in a window of length ``T`` it finishes
``E = max{k : X_1 + ... + X_k <= T}`` steps and stops at ``K``. FAVAS reweights a contacted client's update by
``alpha_i = E[E_i ^ K]`` or ``P(E_i > 0) (E_i ^ K)``; :func:`truncated_steps_stats` gives both from the pmf of ``E ^ K``.

Exact pmfs: exponential steps make ``E`` Poisson(``T / mean``); shifted-exponential and constant steps also have a
closed form (``X_1 + ... + X_k = k shift + Erlang(k)``). Other families use Monte Carlo.
A step that ends exactly at the window's end counts as finished (the schedulers in :mod:`afl.sim.schedule` agree).
"""
from __future__ import annotations

import math

import numpy as np

from afl.errors import ParameterError, check_choice, check_int, check_real
from afl.sim._rng import generator
from afl.sim.distributions import Constant, Exponential, ShiftedExponential, StepTime


def _poisson_pmf(lam: float, kmax: int) -> np.ndarray:
    """``P(N = j)`` for ``j = 0..kmax``, ``N ~ Poisson(lam)``, computed in log space."""
    j = np.arange(kmax + 1)
    if lam == 0:
        return (j == 0).astype(float)
    logp = j * math.log(lam) - lam - np.array([math.lgamma(i + 1.0) for i in j])
    return np.exp(logp)


def _survival_exact(step_time: StepTime, window: float, K: int) -> np.ndarray | None:
    """``S[k] = P(E >= k) = P(X_1 + ... + X_k <= window)`` for ``k = 0..K``, or None if no closed form is coded."""
    k = np.arange(K + 1)
    if isinstance(step_time, Constant):
        return (k * step_time.value <= window * (1 + 1e-12)).astype(float)
    if isinstance(step_time, Exponential):
        shift, theta = 0.0, step_time.mean
    elif isinstance(step_time, ShiftedExponential):
        shift, theta = step_time.shift, step_time.exp_mean
    else:
        return None
    surv = np.zeros(K + 1)
    surv[0] = 1.0
    for i in range(1, K + 1):
        rest = window - i * shift
        if rest < 0:
            break
        # P(Erlang(i, theta) <= rest) = P(Poisson(rest / theta) >= i)
        surv[i] = max(0.0, 1.0 - _poisson_pmf(rest / theta, i - 1).sum())
    return surv


def steps_completed_pmf(step_time: StepTime, window: float, K: int, n_mc: int = 20000, rng=None,
                        method: str = "auto") -> np.ndarray:
    """pmf of ``E ^ K`` over ``{0, ..., K}``: steps finished in a window of length ``window`` (FAVAS Sec. 3).

    ``method``: "auto" (exact when a closed form exists -- exponential: truncated Poisson(``window / mean``),
    shifted exponential, constant -- else Monte Carlo), "exact", or "mc" (``n_mc`` draws with ``rng``: a Generator,
    an int seed, or None for seed 0).
    """
    if not isinstance(step_time, StepTime):
        raise ParameterError("step_time", step_time, "a StepTime distribution (see afl.sim.make_distribution)")
    window = check_real("window", window, 0)
    K = check_int("K", K, 1)
    check_choice("method", method, ("auto", "exact", "mc"))
    if method != "mc":
        surv = _survival_exact(step_time, window, K)
        if surv is not None:
            pmf = surv - np.append(surv[1:], 0.0)
            return np.clip(pmf, 0.0, None) / np.clip(pmf, 0.0, None).sum()
        if method == "exact":
                raise ParameterError("method", method, f"'auto' or 'mc' for {step_time!r} (no closed form)")
    n_mc = check_int("n_mc", n_mc, 1)
    ends = np.cumsum(step_time.sample(generator(rng), (n_mc, K)), axis=1)
    done = (ends <= window).sum(axis=1)
    return np.bincount(done, minlength=K + 1) / n_mc


def truncated_steps_stats(pmf) -> tuple[float, float]:
    """``(E[E ^ K], P(E > 0))`` from a pmf over ``{0..K}``: the two FAVAS reweighting quantities."""
    pmf = np.asarray(pmf, dtype=float)
    return float(pmf @ np.arange(len(pmf))), float(1.0 - pmf[0])


def contact_steps_pmf(step_time: StepTime, K: int, n: int, s: int, server_interval: float,
                      tol: float = 1e-10, n_mc: int = 20000, rng=None) -> np.ndarray:
    """pmf of ``E_i ^ K`` at a contact in the FAVAS/QuAFL schedule (:func:`afl.sim.simulate_async_schedule`).

    The server contacts ``s`` of ``n`` clients uniformly every ``server_interval``; a client restarts at each contact,
    so the window between two of its contacts is ``G * server_interval`` with ``G ~ Geometric(s / n)`` on {1, 2, ...}.
    The result is the mixture of :func:`steps_completed_pmf` over ``G`` (tail below ``tol`` dropped; Monte Carlo
    with ``n_mc`` draws per window for families without a closed form).
    """
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n)
    server_interval = check_real("server_interval", server_interval, 0, strict_low=True)
    p = s / n
    pmf = np.zeros(check_int("K", K, 1) + 1)
    rng = generator(rng)
    g, weight, mass = 1, p, 0.0
    while mass < 1.0 - tol:
        pmf_g = steps_completed_pmf(step_time, g * server_interval, K, n_mc=n_mc, rng=rng)
        if pmf_g[-1] >= 1.0 - 1e-15:  # every longer window also reaches K: put the remaining mass there
            pmf[-1] += 1.0 - mass
            break
        pmf += weight * pmf_g
        mass += weight
        g, weight = g + 1, weight * (1.0 - p)
    return pmf / pmf.sum()
