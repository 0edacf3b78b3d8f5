"""FedCM (Xu et al. 2021, "FedCM: Federated learning with client-level momentum").

The server sends its model and the last round's pseudo-gradient ``g`` (zero at first); every local step mixes
the fresh direction with it,

    d' = alpha d + (1 - alpha) g / (K eta_l)

and the server steps ``theta <- theta - eta g`` (GHBM code, ``fedcm_client.py``). With eta = 1 this is GHBM with
tau = 1 (:mod:`afl.algorithms.ghbm`) with ``beta = 1 - alpha`` and GHBM's ``eta_l`` equal to ``alpha eta_l``
(tests check it). Sent: theta and g down, Delta_i up (1.5x FedAvg).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check_real
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings


@dataclass(frozen=True)
class FedCMSettings(RoundSettings):
    """FedCM: ``alpha``, the weight of the fresh gradient (GHBM Table 7: 0.1, i.e. momentum 0.9)."""

    alpha: float = 0.1

    def __post_init__(self):
        super().__post_init__()
        check_real("alpha", self.alpha, 0, 1, strict_low=True)


class FedCM(RoundLearner):
    down, up = 2, 1

    def __init__(self, fed, history, cfg: FedCMSettings):
        super().__init__(fed, history, cfg)
        self.hook = Drift(scale=float(cfg.alpha))
        self.g = torch.zeros_like(self.w)

    def client_state(self, client):
        return {"shift": (1 - self.cfg.alpha) / (self.K * self.lr) * self.g}

    def server_step(self, clients, delta, pseudo):
        super().server_step(clients, delta, pseudo)
        self.g = pseudo


register("fedcm", FedCMSettings, FedCM, synchronous,
         "FedCM (Xu et al.): every local step mixes in the last round's server pseudo-gradient")
