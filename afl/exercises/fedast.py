"""Exercises on FedAST (notebook 04; Askin et al., Sec. 4, eqs. (6)-(7)).

* :data:`check_realloc`: ``realloc(R, sigma2, eta_s, eta_c, tau)``: the real-valued requests R_m that minimize
  eq. (7)'s ``sum_m eta_s eta_c tau_m sigma_m^2 / R_m`` subject to ``sum_m R_m = R`` (scalars or one value per
  task for the step sizes and tau);
* :data:`check_round_times`: ``round_times(b, R, lam)`` = ``(b / (R lam), H_R / lam)``: the expected time to fill
  a buffer of b from R requests in flight, against a synchronous round that waits for the slowest of R.
"""
from __future__ import annotations

import numpy as np

from ..theory.fedast import buffered_round_time, harmonic, realloc_optimum, sync_round_time
from .checking import Exercise, Mistake


def _realloc_cases(rng):
    yield {"R": 96, "sigma2": [1.0, 1.0], "eta_s": 1.0, "eta_c": [0.05, 0.05], "tau": [10, 10]}   # equal tasks
    yield {"R": 100, "sigma2": [0.2, 3.0, 1.1], "eta_s": 1.0, "eta_c": 0.05, "tau": 5}            # scalars shared
    yield {"R": 60, "sigma2": [2.0], "eta_s": [1.5], "eta_c": [0.02], "tau": [7]}                  # a single task
    for i in range(8):
        M = int(rng.integers(2, 5))
        yield {"R": int(rng.integers(50, 500)), "sigma2": [round(float(v), 3) for v in rng.uniform(0.05, 4, M)],
               "eta_s": round(float(rng.uniform(0.5, 3)), 3) if i % 2 else
               [round(float(v), 3) for v in rng.uniform(0.5, 3, M)],
               "eta_c": [round(float(v), 4) for v in rng.uniform(0.005, 0.1, M)],
               "tau": [int(v) for v in rng.integers(1, 30, M)]}


def _proportional(weight):
    def share(R, sigma2, eta_s, eta_c, tau):
        M = len(sigma2)
        w = weight(*(np.broadcast_to(np.asarray(v, dtype=float), M) for v in (sigma2, eta_s, eta_c, tau)))
        return R * w / w.sum()
    return share


check_realloc = Exercise(
    name="check_realloc", signature="realloc(R, sigma2, eta_s, eta_c, tau)", cases=_realloc_cases,
    reference=lambda R, sigma2, eta_s, eta_c, tau: realloc_optimum(R, sigma2, eta_s, eta_c, tau, "paper"),
    source="FedAST eq. (7)'s optimum", implementations=("afl.theory.fedast:realloc_optimum",),
    idea="minimize eq. (7)'s sum over tasks under the constraint that the requests add up to R (a Lagrange "
         "multiplier): each R_m from the derivative of its own term.",
    hint="Lagrange on eq. (7): R_m proportional to sigma_m sqrt(eta_s eta_c tau_m), scaled so that the R_m sum "
         "to R.",
    mistakes=(
        Mistake(_proportional(lambda v, es, ec, t: v * es * ec * t),
                "proportional to the standard deviation sigma_m, not the variance: setting the derivative "
                "-a_m / R_m^2 + lambda to 0 gives R_m = sqrt(a_m / lambda)."),
        Mistake(_proportional(lambda v, es, ec, t: es / (ec * t ** 2) * v / 2),
                "that is the authors' code's rule (variant='code'), not eq. (7)'s minimizer."),
        Mistake(lambda R, sigma2, eta_s, eta_c, tau: np.full(len(sigma2), R / len(sigma2)),
                "an equal split ignores the tasks' variances: noisier tasks need more requests."),
        Mistake(_proportional(lambda v, es, ec, t: np.sqrt(v)),
                "the step sizes and tau_m weigh in too: sqrt(eta_s eta_c tau_m) sigma_m."),
        Mistake(lambda R, sigma2, eta_s, eta_c, tau: np.sqrt(np.asarray(sigma2) * eta_s * np.asarray(eta_c)
                                                             * np.asarray(tau)),
                "normalize: the R_m must sum to R."),
    ))


def _times_cases(rng):
    yield {"b": 1, "R": 1, "lam": 0.5}                         # a single client
    yield {"b": 40, "R": 40, "lam": 0.25}                      # the buffer as large as the requests
    yield {"b": 1, "R": 100, "lam": 1.0}
    for _ in range(8):
        R = int(rng.integers(2, 300))
        yield {"b": int(rng.integers(1, R + 1)), "R": R, "lam": round(float(rng.uniform(0.01, 2)), 4)}


check_round_times = Exercise(
    name="check_round_times", signature="round_times(b, R, lam)", cases=_times_cases,
    reference=lambda b, R, lam: (buffered_round_time(b, R, lam), sync_round_time(R, lam)),
    source="FedAST's buffered and synchronous round times",
    implementations=("afl.theory.fedast:buffered_round_time", "afl.theory.fedast:sync_round_time"),
    idea="R exponential clocks in parallel: how fast do their first events arrive together, and how long until the"
         " last of R has rung?",
    hint="R requests finishing at rate lam each merge into arrivals at rate R lam: b of them take b / (R lam); the "
         "slowest of R exponentials takes H_R / lam on average (H_R = 1 + 1/2 + ... + 1/R).",
    mistakes=(
        Mistake(lambda b, R, lam: (b / (R * lam), 1 / lam),
                "1 / lam is one client's mean time; a synchronous round waits for the slowest of R: H_R / lam."),
        Mistake(lambda b, R, lam: (b / (R * lam), R / lam),
                "the maximum of R exponentials is not their sum: E[max] = H_R / lam, about ln(R) / lam."),
        Mistake(lambda b, R, lam: (b / (R * lam), np.log(R) / lam),
                "ln R is only the leading term: H_R = ln R + 0.577... + O(1/R); use the exact harmonic number."),
        Mistake(lambda b, R, lam: (b / lam, harmonic(R) / lam),
                "the buffer fills from R clients at once: arrivals come at rate R lam, so b / (R lam)."),
    ))

__all__ = ["check_realloc", "check_round_times"]
