"""QAFeL theory: the learning-rate conditions, Theorem F.1, Corollaries F.2 and F.3, Proposition 3.5.

Paper: Ortega & Jafarkhani, "Asynchronous Federated Learning with Bidirectional Quantized Communications and
Buffered Aggregation" (QAFeL), ``shared/papers/003_*``. Notation as the paper's:

- ``K`` the server's buffer size, ``P`` local steps per client update with learning rates ``eta_local`` (one
  per step, or one for all), ``eta_g`` the server learning rate, ``T`` server steps;
- ``L`` smoothness, ``sigma2`` the local variance ``sigma_l^2`` (A3.2), ``G`` the bound on ``||grad F_n||^2``
  (A3.3), ``F = f(x^0) - f^*``;
- ``delta_c`` and ``delta_s`` the compression parameters (Definition 2.1) of the client and server quantizers
  (``afl.compress``: ``Quantizer.delta(d)``); 1 means no compression;
- ``tau_max_1`` the maximum staleness with a buffer of one (A3.4); with a buffer of K it is at most
  ``tau_max_K = ceil(tau_max_1 / K)`` (Nguyen et al. 2022, App. A).

``alpha_P = sum_p eta_l^(p)`` and ``beta_P = sum_p (eta_l^(p))^2`` (App. F). The bounds are evaluated exactly as
printed. One remark, from evaluating them: eq. (14) states ``phi(T) <= 4 / delta_s^2`` for a biased server
quantizer, but the printed sum ``(2 / delta_s) sum_{t=0}^{T-1} (1 - delta_s/2)^(t-1)`` exceeds it (its limit is
``4 / (delta_s^2 (1 - delta_s/2))``); Corollary F.2 uses the stated ``12 / delta_s^2 = 3 * 4 / delta_s^2``.
:func:`phi` returns the printed sum.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from afl.errors import check, check_int, check_real

__all__ = ["step_sums", "staleness_bound", "phi", "condition", "simple_condition", "theorem_f1_terms",
           "theorem_f1_bound", "corollary_f2_terms", "corollary_f3_orders", "proposition35_orders"]


def step_sums(eta_local: float | Sequence[float], P: int | None = None) -> tuple[float, float]:
    """``(alpha_P, beta_P)``: the sum of the local learning rates and of their squares (``P`` steps of one
    rate if ``eta_local`` is a number)."""
    if np.ndim(eta_local) == 0:
        P = check_int("P", P, 1, hint="local steps, needed with a single learning rate")
        rates = np.full(P, check_real("eta_local", eta_local, 0, strict_low=True))
    else:
        rates = np.asarray(eta_local, dtype=float)
        check(rates.size >= 1 and bool(np.all(rates > 0)), "eta_local", list(rates), "positive learning rates")
        check(P is None or P == rates.size, "P", P, f"{rates.size}, the number of learning rates given")
    return float(rates.sum()), float((rates ** 2).sum())


def staleness_bound(tau_max_1: float, K: int) -> int:
    """``tau_max_K = ceil(tau_max_1 / K)``: the maximum staleness with a buffer of K (QAFeL Sec. 3)."""
    return math.ceil(check_real("tau_max_1", tau_max_1, 0) / check_int("K", K, 1))


def _delta(name: str, value: float) -> float:
    return check_real(name, value, 0, 1, strict_low=True)


def phi(T: int, delta_s: float, biased: bool = False) -> float:
    """Eq. (14): ``(2/delta_s) sum_{t=0}^{T-1} (1 - delta_s/2)^(t-1)`` for a biased server quantizer,
    ``sum_{t=1}^{T-1} (1 - delta_s)^t`` (at most ``1/delta_s``) otherwise."""
    T, d = check_int("T", T, 1), _delta("delta_s", delta_s)
    if biased:
        r = 1 - d / 2
        return 2 / d * sum(r ** (t - 1) for t in range(T))
    return sum((1 - d) ** t for t in range(1, T))


def _lhs(eta_g, eta_local, P, K, L, delta_c, delta_s, biased) -> float:
    alpha, _ = step_sums(eta_local, P)
    rates = [eta_local] * P if np.ndim(eta_local) == 0 else list(eta_local)
    server = 12 * alpha * L ** 2 * eta_g ** 2 / delta_s ** 2 if biased else alpha * 3 * L ** 2 * eta_g ** 2 / delta_s
    return (server + L * eta_g) * (1 + (1 - delta_c) / K) * len(rates) * max(rates)


def condition(eta_g: float, eta_local, K: int, L: float, delta_c: float = 1.0, delta_s: float = 1.0,
              P: int | None = None, biased: bool = False) -> dict:
    """Condition (8) (unbiased server quantizer) or (11) (``biased``): the largest left-hand side over the
    local steps, ``(alpha_P 3 L^2 eta_g^2 / delta_s + L eta_g) (1 + (1 - delta_c)/K) P eta_l^(p)`` (with
    ``12 alpha_P L^2 eta_g^2 / delta_s^2`` for a biased one), and whether it is at most 1."""
    eta_g = check_real("eta_g", eta_g, 0, strict_low=True)
    K, L = check_int("K", K, 1), check_real("L", L, 0, strict_low=True)
    P = len(eta_local) if np.ndim(eta_local) else check_int("P", P, 1)
    lhs = _lhs(eta_g, eta_local, P, K, L, _delta("delta_c", delta_c), _delta("delta_s", delta_s), biased)
    return {"lhs": lhs, "holds": lhs <= 1.0}


def simple_condition(eta_g: float, eta_local: float, P: int, K: int, L: float, delta_c: float = 1.0,
                     delta_s: float = 1.0, biased: bool = False) -> bool:
    """The simpler sufficient condition stated after (8) and (11): ``eta_g <= 1/L`` and ``eta_l <=
    min(K / (2 P (K + 1 - delta_c)), delta_s / (3P))`` (``delta_s^2 / (12 P)`` for a biased server quantizer)."""
    P, K = check_int("P", P, 1), check_int("K", K, 1)
    delta_c, delta_s = _delta("delta_c", delta_c), _delta("delta_s", delta_s)
    server = delta_s ** 2 / (12 * P) if biased else delta_s / (3 * P)
    return eta_g <= 1 / L and eta_local <= min(K / (2 * P * (K + 1 - delta_c)), server)


def _terms(T, eta_g, eta_local, K, L, F, sigma2, G, delta_c, delta_s, tau_max_1, P, server_factor) -> dict:
    T, K = check_int("T", T, 1), check_int("K", K, 1)
    eta_g = check_real("eta_g", eta_g, 0, strict_low=True)
    L, F = check_real("L", L, 0, strict_low=True), check_real("F", F, 0)
    sigma2, G = check_real("sigma2", sigma2, 0), check_real("G", G, 0)
    delta_c, delta_s = _delta("delta_c", delta_c), _delta("delta_s", delta_s)
    alpha, beta = step_sums(eta_local, P)
    P = len(eta_local) if np.ndim(eta_local) else P
    tau = staleness_bound(tau_max_1, K)
    stale = (eta_g ** 2 * tau ** 2 * ((1 - delta_c) / (K * tau) if tau else 0.0) + eta_g ** 2 * tau ** 2 + 1)
    return {
        "optimization": 2 * F / (eta_g * T * alpha),
        "staleness_and_drift": 3 * L ** 2 * beta * stale * (sigma2 + P * G),
        "quantization": (L * eta_g / alpha + server_factor(L, eta_g, delta_s)) * (2 - delta_c) / K * beta
                        * (sigma2 + 4 * G),
        "tau_max_K": tau,
    }


def theorem_f1_terms(T: int, eta_g: float, eta_local, K: int, L: float, F: float, sigma2: float, G: float,
                     delta_c: float = 1.0, delta_s: float = 1.0, tau_max_1: float = 0.0,
                     P: int | None = None) -> dict:
    """The three terms of eq. (9) (unbiased quantizers; Condition (8) assumed, see :func:`condition`):
    ``2F / (eta_g T alpha_P)``, ``3 L^2 beta_P (eta_g^2 tau^2 ((1 - delta_c)/(K tau) + 1) + 1)(sigma2 + P G)``
    and ``(L eta_g / alpha_P + 3 L^2 eta_g^2 phi(T)) ((2 - delta_c)/K) beta_P (sigma2 + 4G)``,
    ``tau = tau_max_K``; plus ``tau_max_K``."""
    return _terms(T, eta_g, eta_local, K, L, F, sigma2, G, delta_c, delta_s, tau_max_1, P,
                  lambda L_, eg, ds: 3 * L_ ** 2 * eg ** 2 * phi(T, ds))


def theorem_f1_bound(*args, **kwargs) -> float:
    """Eq. (9): the bound on ``(1/T) sum_t E||grad f(x^t)||^2`` (the sum of :func:`theorem_f1_terms`)."""
    t = theorem_f1_terms(*args, **kwargs)
    return t["optimization"] + t["staleness_and_drift"] + t["quantization"]


def corollary_f2_terms(T: int, eta_g: float, eta_local, K: int, L: float, F: float, sigma2: float, G: float,
                       delta_c: float = 1.0, delta_s: float = 1.0, tau_max_1: float = 0.0,
                       P: int | None = None) -> dict:
    """Eq. (12), a possibly biased server quantizer (Condition (11)): as :func:`theorem_f1_terms` with
    ``12 L^2 eta_g^2 / delta_s^2`` in place of ``3 L^2 eta_g^2 phi(T)``."""
    return _terms(T, eta_g, eta_local, K, L, F, sigma2, G, delta_c, delta_s, tau_max_1, P,
                  lambda L_, eg, ds: 12 * L_ ** 2 * eg ** 2 / ds ** 2)


def corollary_f3_orders(T: int, P: int, K: int, L: float, F: float, sigma2: float, G: float,
                        delta_c: float = 1.0, delta_s: float = 1.0, tau_max_1: float = 0.0) -> dict:
    """The four terms of eq. (13) without their constants (``eta_l = O(1/(K sqrt(TP)))``, ``eta_g = O(K)``)."""
    T, P, K = check_int("T", T, 1), check_int("P", P, 1), check_int("K", K, 1)
    delta_c, delta_s = _delta("delta_c", delta_c), _delta("delta_s", delta_s)
    tau = check_real("tau_max_1", tau_max_1, 0)
    root = math.sqrt(T * P)
    return {
        "optimization": F / root,
        "staleness": L ** 2 * (sigma2 + P * G) * (tau ** 2 + tau * (1 - delta_c) + 1) / (T * K ** 2),
        "server_quantization": L ** 2 * (2 - delta_c) * (sigma2 + 4 * G) / (delta_s * T * K),
        "client_quantization": L * (2 - delta_c) * (sigma2 + 4 * G) / (K * root),
    }


def proposition35_orders(T: int, P: int, K: int, F: float, sigma2: float, G: float, delta_c: float = 1.0,
                         delta_s: float = 1.0, tau_max_1: float = 0.0) -> dict:
    """Eqs. (6)-(7) without constants: FedBuff's three terms and QAFeL's three extra ones (``L`` absorbed)."""
    T, P, K = check_int("T", T, 1), check_int("P", P, 1), check_int("K", K, 1)
    delta_c, delta_s = _delta("delta_c", delta_c), _delta("delta_s", delta_s)
    tau = check_real("tau_max_1", tau_max_1, 0)
    root = math.sqrt(T * P)
    fedbuff = {"optimization": F / root, "variance": (sigma2 + G) / (K * root),
               "staleness": (tau ** 2 + 1) * (sigma2 + P * G) / (T * K ** 2)}
    extra = {"client_quantization": (1 - delta_c) * (sigma2 + G) / (K * root),
             "server_quantization": (2 - delta_c) * (sigma2 + G) / (delta_s * T * K),
             "cross": tau * (1 - delta_c) * (sigma2 + P * G) / (T * K ** 2)}
    return {"fedbuff": fedbuff, "qafel_extra": extra, "fedbuff_total": sum(fedbuff.values()),
            "qafel_total": sum(fedbuff.values()) + sum(extra.values())}
