"""FAVAS: Federated AVeraging with ASynchronous clients (Leconte et al. 2023, Algorithm 1 and Sec. 4).

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

``reweighting``: ``"literal"`` is the paper's ``1 / alpha^i``: every upload then carries, in expectation, the
progress of *one* local step, whatever K. ``"normalized"`` scales by ``alpha_bar / alpha^i`` instead, with
``alpha_bar`` the clients' mean ``E[E ^ K]``: still unbiased across clients (every client's expected
contribution is the same), but an upload carries ``alpha_bar`` steps' worth of progress, as a FedAvg update
of the same clients would. It is the literal rule with the server step scaled by ``alpha_bar`` (the step
size that Theorem 3's eta absorbs), not a different estimator.

Ablations, so that each ingredient shows in accuracy: ``reweighting="none"`` sends the local model as it is
(the fast clients' bias comes back); ``client_mixing=True`` keeps QuAFL's client side instead of the restart,
``w^i <- (w_{t-1} + s w^i) / (s + 1)`` (FAVAS Sec. 3's source of client drift).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import check_choice
from ..sim.counts import contact_steps_pmf, truncated_steps_stats
from .clocked import ClockedLearner, ClockedSettings, mix_with_server
from .registry import register, server_clock

MODES = ("deterministic", "stochastic")
REWEIGHTINGS = ("literal", "normalized", "none")


@dataclass(frozen=True)
class FavasSettings(ClockedSettings):
    """FAVAS: ``mode`` of alpha (eq. (1)), ``reweighting`` (``1/alpha``, ``alpha_bar/alpha``, or ``"none"``: the
    ablation without it) and ``client_mixing`` (the ablation with QuAFL's client mixing instead of the restart)."""

    mode: str = "deterministic"
    reweighting: str = "literal"
    client_mixing: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_choice("mode", self.mode, MODES)
        check_choice("reweighting", self.reweighting, REWEIGHTINGS)


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

    def __init__(self, fed, history, cfg: FavasSettings):
        super().__init__(fed, history, cfg)
        self.mode, self.reweighting, self.client_mixing = cfg.mode, cfg.reweighting, cfg.client_mixing
        mean, pos = reweighting_stats(fed.profile, cfg.K, cfg.s, cfg.contact_interval(), seed=fed.seed)
        as_tensor = lambda a: torch.as_tensor(a, dtype=self.w.dtype, device=self.w.device)  # noqa: E731
        self.expected_steps, self.p_progress = as_tensor(mean), as_tensor(pos)
        self.scale = float(mean.mean()) if cfg.reweighting == "normalized" else 1.0

    def upload(self, clients, local, start, steps):
        if self.reweighting == "none":
            return local
        if self.mode == "deterministic":
            alpha = self.expected_steps[clients]
        else:
            alpha = self.p_progress[clients] * steps
        scale = torch.where(alpha > 0, self.scale / alpha.clamp_min(1e-12), torch.zeros_like(alpha))
        return start + (local - start) * scale[:, None]

    def restart(self, clients, local, w_old, w_new):
        if self.client_mixing:
            return mix_with_server(w_old, local, self.s)
        return w_new.expand(len(clients), -1)


register("favas", FavasSettings, Favas, server_clock,
         "FAVAS (Leconte et al.): server clock, unbiased uploads w_init + (w - w_init)/alpha, clients reset")
