"""FedAST theory: Theorem 1's three error terms, Corollary 1.1, the Realloc optimum (eqs. (6)-(7)) and the
expected round times of buffered asynchronous against synchronous simultaneous training.

Paper: Askin, Sharma, Joe-Wong, Joshi, "FedAST: Federated Asynchronous Simultaneous Training", ``shared/papers/004_*``. Notation
as the paper's, for one task m: ``tau`` local steps, buffer size ``b``, ``R`` active training requests, client
and server learning rates ``eta_c`` and ``eta_s``, ``T`` server rounds, smoothness ``L``, local variance
``sigma_l2`` and heterogeneity ``sigma_g2`` (Assumptions 1-3), staleness bound ``gamma_max`` (Assumption 4),
``delta = f(x^0) - f^*``. The O(.) bounds are evaluated with every hidden constant set to 1.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from afl.errors import check, check_choice, check_int, check_real

__all__ = ["step_size_limits", "theorem1_terms", "corollary11_terms", "realloc_weights", "realloc_optimum",
           "allocation_objective", "harmonic", "buffered_round_time", "sync_round_time", "REALLOC_VARIANTS"]

#: how Realloc turns estimated variances into request shares: the paper's (Sec. 4 / App. A, ``R_m`` proportional
#: to ``sigma_g,m sqrt(eta_s eta_c tau_m)``) or the authors' code's (askinb/FedAST: ``float(v)**1/2`` is v/2,
#: so ``R_m`` proportional to the variance itself, scaled by ``eta_s / (eta_c tau^2)``)
REALLOC_VARIANTS = ("paper", "code")


def _positive(name, value):
    return check_real(name, value, 0, strict_low=True)


def step_size_limits(tau: int, b: int, R: int, gamma_max: float, L: float = 1.0) -> dict:
    """Theorem 1's conditions: ``eta_s <= sqrt(tau b)`` and ``eta_c <= min{1/(6 L tau sqrt(tau b)),
    1/(4 L tau sqrt(tau R gamma_max))}``. Returns ``{"eta_s_max", "eta_c_max"}``."""
    tau, b, R = check_int("tau", tau, 1), check_int("b", b, 1), check_int("R", R, 1)
    gamma_max, L = _positive("gamma_max", gamma_max), _positive("L", L)
    return {"eta_s_max": math.sqrt(tau * b),
            "eta_c_max": min(1 / (6 * L * tau * math.sqrt(tau * b)), 1 / (4 * L * tau * math.sqrt(tau * R * gamma_max)))}


def theorem1_terms(T, tau: int, b: int, R: int, eta_c: float, eta_s: float, L: float = 1.0, sigma_l2: float = 1.0,
                   sigma_g2: float = 1.0, delta: float = 1.0) -> dict:
    """Eq. (4)'s three terms (constants 1) for ``T`` rounds (array ok): ``fedavg_1 = delta / (T eta_c eta_s tau)``,
    ``fedavg_2 = (L eta_c eta_s / b + L^2 eta_c^2 tau)(sigma_l2 + tau sigma_g2)``, ``async = L^2 eta_s^2 eta_c^2
    tau R / b^2 (sigma_l2 + tau R sigma_g2)``, and their ``total``."""
    T = np.asarray(T, dtype=float)
    check(bool(np.all(T >= 1)), "T", T.tolist() if T.ndim else float(T), "rounds >= 1")
    tau, b, R = check_int("tau", tau, 1), check_int("b", b, 1), check_int("R", R, 1)
    eta_c, eta_s, L = _positive("eta_c", eta_c), _positive("eta_s", eta_s), _positive("L", L)
    sigma_l2, sigma_g2, delta = (check_real(n, v, 0) for n, v in (("sigma_l2", sigma_l2), ("sigma_g2", sigma_g2),
                                                                  ("delta", delta)))
    fedavg_1 = delta / (T * eta_c * eta_s * tau)
    fedavg_2 = (L * eta_c * eta_s / b + L ** 2 * eta_c ** 2 * tau) * (sigma_l2 + tau * sigma_g2) + 0 * T
    asynchronous = L ** 2 * eta_s ** 2 * eta_c ** 2 * tau * R / b ** 2 * (sigma_l2 + tau * R * sigma_g2) + 0 * T
    return {"fedavg_1": fedavg_1, "fedavg_2": fedavg_2, "async": asynchronous,
            "total": fedavg_1 + fedavg_2 + asynchronous}


def corollary11_terms(T, tau: int, b: int, R: int, L: float = 1.0, sigma_l2: float = 1.0, sigma_g2: float = 1.0,
                      delta: float = 1.0) -> dict:
    """Eq. (5), with Corollary 1.1's rates ``eta_c = 1/(tau L sqrt(T))``, ``eta_s = sqrt(tau b)``: ``fedavg_1 =
    delta L / sqrt(b tau T)``, ``fedavg_2 = (1/sqrt(T b tau) + 1/(tau T))(sigma_l2 + tau sigma_g2)``, ``async =
    R/(T b) (sigma_l2 + tau R sigma_g2)``, their ``total``, and ``eta_c``, ``eta_s``. (The corollary also needs
    ``T >= tau max{36 b, 16 R gamma_max}``.)"""
    T = np.asarray(T, dtype=float)
    check(bool(np.all(T >= 1)), "T", T.tolist() if T.ndim else float(T), "rounds >= 1")
    tau, b, R = check_int("tau", tau, 1), check_int("b", b, 1), check_int("R", R, 1)
    L = _positive("L", L)
    noise = check_real("sigma_l2", sigma_l2, 0) + tau * check_real("sigma_g2", sigma_g2, 0)
    fedavg_1 = check_real("delta", delta, 0) * L / np.sqrt(b * tau * T)
    fedavg_2 = (1 / np.sqrt(T * b * tau) + 1 / (tau * T)) * noise
    asynchronous = R / (T * b) * (sigma_l2 + tau * R * sigma_g2)
    return {"fedavg_1": fedavg_1, "fedavg_2": fedavg_2, "async": asynchronous,
            "total": fedavg_1 + fedavg_2 + asynchronous, "eta_c": 1 / (tau * L * np.sqrt(T)),
            "eta_s": math.sqrt(tau * b)}


def _per_task(name, values, M=None) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if M is not None and arr.size == 1:
        arr = np.full(M, float(arr[0]))
    check(arr.ndim == 1 and (M is None or arr.size == M), name, values, f"one value per task ({M})")
    check(bool(np.all(np.isfinite(arr)) and np.all(arr >= 0)), name, values, "finite values >= 0")
    return arr


def realloc_weights(sigma_g2: Sequence[float], eta_s, eta_c, tau, variant: str = "paper") -> np.ndarray:
    """Each task's share of the active requests before normalization: the paper's ``sigma_g,m sqrt(eta_s eta_c
    tau_m)`` (the minimizer of eq. (7)), or the code's ``eta_s / (eta_c tau^2) * sigma_g2 / 2``."""
    check_choice("variant", variant, REALLOC_VARIANTS)
    var = _per_task("sigma_g2", sigma_g2)
    M = var.size
    eta_s, eta_c, tau = (_per_task(n, v, M) for n, v in (("eta_s", eta_s), ("eta_c", eta_c), ("tau", tau)))
    check(bool(np.all(eta_c > 0) and np.all(tau > 0)), "eta_c, tau", (eta_c.tolist(), tau.tolist()), "positive")
    if variant == "paper":
        return np.sqrt(var * eta_s * eta_c * tau)
    return eta_s / (eta_c * tau ** 2) * var / 2


def realloc_optimum(R: float, sigma_g2: Sequence[float], eta_s, eta_c, tau, variant: str = "paper") -> np.ndarray:
    """Real-valued requests ``R_m`` summing to ``R``, in proportion to :func:`realloc_weights` (equal shares if
    every weight is 0). With ``variant="paper"`` this solves eq. (7): ``min sum_m eta_s eta_c tau_m sigma_g,m^2 /
    R_m`` subject to ``sum_m R_m = R`` (Lagrange: ``R_m`` proportional to ``sigma_g,m sqrt(eta_s eta_c tau_m)``)."""
    R = _positive("R", R)
    w = realloc_weights(sigma_g2, eta_s, eta_c, tau, variant)
    return R * (w / w.sum() if w.sum() > 0 else np.full(w.size, 1 / w.size))


def allocation_objective(R_m: Sequence[float], sigma_g2: Sequence[float], eta_s, eta_c, tau) -> float:
    """Eq. (7)'s objective ``sum_m eta_s eta_c tau_m sigma_g,m^2 / R_m``."""
    var = _per_task("sigma_g2", sigma_g2)
    M = var.size
    R_m = _per_task("R_m", R_m, M)
    check(bool(np.all(R_m > 0)), "R_m", R_m.tolist(), "positive requests for every task")
    eta_s, eta_c, tau = (_per_task(n, v, M) for n, v in (("eta_s", eta_s), ("eta_c", eta_c), ("tau", tau)))
    return float(np.sum(eta_s * eta_c * tau * var / R_m))


def harmonic(n: int) -> float:
    """The harmonic number ``H_n = sum_{k=1}^n 1/k``."""
    n = check_int("n", n, 0)
    return float(np.sum(1.0 / np.arange(1, n + 1)))


def buffered_round_time(b: int, R: int, lam: float) -> float:
    """Sec. 4: the expected time for a FedAST buffer of ``b`` to fill from ``R`` requests in flight whose durations
    are Exp(``lam``) and each replaced at once: the updates arrive as a Poisson process of rate ``R lam``, so
    ``b / (R lam)``."""
    return check_int("b", b, 1) / (check_int("R", R, 1) * _positive("lam", lam))


def sync_round_time(R: int, lam: float) -> float:
    """Sec. 4: the expected length of a synchronous round waiting for all ``R`` Exp(``lam``) clients (of every
    task): the expected maximum, ``H_R / lam`` (about ``log(R) / lam``)."""
    return harmonic(check_int("R", R, 1)) / _positive("lam", lam)
