"""Calculators for the GHBM paper (Zaccone et al., "Communication-efficient federated learning with generalized
heavy-ball momentum"), Sec. 4 and Table 1.

* :func:`deviation_bound` -- Lemma 4.4 (eq. (8)): the tau-round average of pseudo-gradients deviates from the full
  gradient by at most ``8 E[((N - |S_tau|)/N)^2] (G^2 + ||grad f||^2)``, with ``|S_tau|`` the distinct clients seen
  in tau rounds; :func:`unseen_fraction_moment` computes that expectation exactly for uniform sampling, and for
  cyclic sampling it is ``(1 - tau C)^2`` (Corollary 4.5), zero from tau = 1/C on.
* :func:`cover_time_pmf` -- how many rounds of uniform sampling until every client has been seen (the batched
  coupon collector of footnote 2, which has no closed form: computed exactly as a Markov chain on the number
  seen); :func:`participation_period_pmf` -- a client's rounds between participations (geometric, mean 1/C:
  the tau_i of LocalGHBM / FedHBM).
* :func:`rates` -- Table 1's convergence rates side by side, up to constants.

``N`` is the number of clients (the paper's |S| or K), ``s = N C`` the clients per round.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import check_choice, check_int, check_real


def _ns(n: int, s: int) -> tuple[int, int]:
    n = check_int("n", n, 1)
    return n, check_int("s", s, 1, n, hint="n, the number of clients")


def unseen_fraction_moment(n: int, s: int, tau: int, sampling: str = "uniform") -> float:
    """``E[((n - |S_tau|) / n)^2]``: the squared fraction of clients not selected in the last ``tau`` rounds.

    Uniform sampling without replacement: with ``p1 = ((n-s)/n)^tau`` (one given client never drawn) and
    ``p2 = ((n-s)(n-s-1) / (n(n-1)))^tau`` (two given clients), ``E[U^2] = n p1 + n(n-1) p2`` for the number U of
    unseen clients. Cyclic sampling (Assumption 4.3): ``U = max(n - tau s, 0)`` exactly.
    """
    n, s = _ns(n, s)
    tau = check_int("tau", tau, 1)
    check_choice("sampling", sampling, ("uniform", "cyclic"))
    if sampling == "cyclic":
        return max(1.0 - tau * s / n, 0.0) ** 2
    p1 = ((n - s) / n) ** tau
    p2 = ((n - s) * (n - s - 1) / (n * (n - 1))) ** tau if n > 1 else 0.0
    return (n * p1 + n * (n - 1) * p2) / n ** 2


def deviation_bound(n: int, s: int, tau: int, G2: float, grad_norm2: float = 0.0, sampling: str = "uniform") -> float:
    """Lemma 4.4 / Corollary 4.5: ``8 E[((n - |S_tau|)/n)^2] (G^2 + ||grad f(theta)||^2)``."""
    check_real("G2", G2, 0)
    check_real("grad_norm2", grad_norm2, 0)
    return 8.0 * unseen_fraction_moment(n, s, tau, sampling) * (G2 + grad_norm2)


def cover_time_pmf(n: int, s: int, max_rounds: int | None = None) -> np.ndarray:
    """``P(T = t)``, t = 0, 1, ..., for T the first round by which uniform sampling (s of n per round, without
    replacement within a round) has selected every client. Exact: the number of clients seen is a Markov chain
    whose step is hypergeometric, ``P(k new | m seen) = C(n-m, k) C(m, s-k) / C(n, s)``."""
    n, s = _ns(n, s)
    max_rounds = max_rounds or int(50 * math.ceil(n / s) * max(1.0, math.log(n)))
    total = math.comb(n, s)
    step = np.zeros((n + 1, n + 1))
    for m in range(n + 1):
        for k in range(0, min(s, n - m) + 1):
            if s - k <= m:
                step[m, m + k] = math.comb(n - m, k) * math.comb(m, s - k) / total
    state = np.zeros(n + 1)
    state[0] = 1.0
    covered = [0.0]
    for _ in range(max_rounds):
        state = state @ step
        covered.append(state[n])
    return np.diff(np.array(covered), prepend=0.0)


def expected_cover_time(n: int, s: int) -> float:
    """``E[T]`` of :func:`cover_time_pmf` (for n = 100, s = 10: about 50 rounds, against 1/C = 10 when cyclic)."""
    pmf = cover_time_pmf(n, s)
    return float(np.arange(len(pmf)) @ pmf)


def participation_period_pmf(n: int, s: int, max_rounds: int = 200) -> np.ndarray:
    """``P(tau_i = k)``, k = 0..max_rounds: rounds between two participations of a client under uniform sampling,
    geometric with ``p = s/n`` (``P(0) = 0``; mean ``n/s = 1/C``, the paper's ``E[tau_i] = 1/C``)."""
    n, s = _ns(n, s)
    p = s / n
    k = np.arange(max_rounds + 1)
    pmf = np.where(k >= 1, p * (1 - p) ** np.maximum(k - 1, 0), 0.0)
    return pmf


def rates(T, L: float = 1.0, delta: float = 1.0, sigma2: float = 1.0, n: int = 100, C: float = 0.1, J: int = 8,
          zeta: float = 1.0, G: float = 1.0) -> dict[str, np.ndarray]:
    """Table 1's bounds on ``(1/T) sum_t E||grad f(theta^t)||^2``, up to constants, for rounds ``T`` (array ok).

    Keys: ``fedavg_full`` and ``fedavg_partial`` (Yang et al. 2021, bounded heterogeneity), ``fedcm`` (Xu et al.
    2021, bounded gradients zeta and heterogeneity G), ``fedavg_m_full`` (Cheng et al. 2024, full participation),
    ``scaffold_m`` (Cheng et al. 2024), ``ghbm`` (Theorem 4.7, cyclic participation, tau = 1/C).
    """
    T = np.asarray(T, dtype=float)
    n = check_int("n", n, 1)
    C = check_real("C", C, 0, 1, strict_low=True)
    m = n * C
    return {
        "fedavg_full": np.sqrt(L * delta * sigma2 / (n * J * T)) + L * delta / T,
        "fedavg_partial": np.sqrt(L * delta * sigma2 / (m * J * T)) + L * delta / T,
        "fedcm": np.sqrt(L * delta * (sigma2 + m * J * zeta ** 2) / (m * J * T))
        + (L * delta * (math.sqrt(sigma2 / J) + math.sqrt(m) * (zeta + G)) / np.sqrt(m * T)) ** (2 / 3),
        "fedavg_m_full": np.sqrt(L * delta * sigma2 / (n * J * T)) + L * delta / T,
        "scaffold_m": np.sqrt(L * delta * sigma2 / (m * J * T)) + L * delta / T * (1 + n ** (2 / 3) / m),
        "ghbm": np.sqrt(L * delta * sigma2 / (n * J * T)) + L * delta / T,
    }


__all__ = ["unseen_fraction_moment", "deviation_bound", "cover_time_pmf", "expected_cover_time",
           "participation_period_pmf", "rates"]
