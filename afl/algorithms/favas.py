"""FAVAS: Federated AVeraging with ASynchronous clients (paper 001, Algorithm 1 and Sec. 4).

Clients train concurrently from the last server model they received, at most K steps, then wait. Every
server step the server contacts s clients drawn uniformly without replacement; contacted client i, having
finished E_i steps since its restart, sends its *unbiased* model

    w_unbiased^i = w_init^i + (w^i - w_init^i) / alpha^i                          (Alg. 1, l. 24)

and restarts from the new server model ``w_t = (w_{t-1} + sum_{i in S_t} w_unbiased^i) / (s + 1)`` (Sec. 4).
The reweighting (eq. (1)) is deterministic, ``alpha^i = E[E^i ^ K]``, or stochastic,
``alpha^i = P(E^i > 0) (E^i ^ K)``; the expectations are computed from the client's step-time model and the
server clock (:func:`afl.sim.counts.contact_steps_pmf`: exact for exponential, shifted-exponential and
constant step times, Monte Carlo otherwise). A stochastic-mode client with E = 0 has no progress to send
and sends w_init.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import check_choice
from ..sim.counts import contact_steps_pmf, truncated_steps_stats
from .clocked import ClockedLearner

MODES = ("deterministic", "stochastic")


def reweighting_stats(profile, K: int, s: int, server_interval: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per-client ``(E[E_i ^ K], P(E_i > 0))`` under the server clock (computed once per speed class)."""
    cache, mean, pos = {}, np.zeros(profile.n), np.zeros(profile.n)
    for i in range(profile.n):
        dist = profile.step_time(i)
        if dist not in cache:
            pmf = contact_steps_pmf(dist, K, profile.n, s, server_interval, rng=seed)
            cache[dist] = truncated_steps_stats(pmf)
        mean[i], pos[i] = cache[dist]
    return mean, pos


class Favas(ClockedLearner):
    """FAVAS learner: unbiased reweighted uploads, clients restart from the new server model."""

    def __init__(self, fed, history, K, lr, s, server_interval, mode="deterministic", track_variance=False):
        super().__init__(fed, history, K, lr, s, track_variance)
        check_choice("mode", mode, MODES)
        self.mode = mode
        mean, pos = reweighting_stats(fed.profile, K, s, server_interval, seed=fed.seed)
        self.expected_steps = torch.as_tensor(mean, dtype=torch.float32, device=self.w.device)
        self.p_progress = torch.as_tensor(pos, dtype=torch.float32, device=self.w.device)

    def upload(self, clients, local, start, steps):
        if self.mode == "deterministic":
            alpha = self.expected_steps[clients]
        else:
            alpha = self.p_progress[clients] * steps
        scale = torch.where(alpha > 0, 1.0 / alpha.clamp_min(1e-12), torch.zeros_like(alpha))
        return start + (local - start) * scale[:, None]

    def restart(self, clients, local, w_old, w_new):
        return w_new.expand(len(clients), -1)
