"""FedProx (Li et al. 2020): local SGD on ``f_i(w) + mu/2 ||w - theta||^2``, so every step's direction is

    d' = d + mu (w - theta)

(``theta``: the server model the client started from); the server is FedAvg's. The GHBM code adds
``mu/2 (w - theta)`` instead (``fedprox_client.py``): its ``mu`` is twice this one.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import check_real
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings


@dataclass(frozen=True)
class FedProxSettings(RoundSettings):
    """FedProx: proximal weight ``mu`` (GHBM Table 7: 0.1 for CIFAR, 1e-4 for Shakespeare)."""

    mu: float = 0.1

    def __post_init__(self):
        super().__post_init__()
        check_real("mu", self.mu, 0)


class FedProx(RoundLearner):
    def __init__(self, fed, history, cfg: FedProxSettings):
        super().__init__(fed, history, cfg)
        self.hook = Drift(pull=float(cfg.mu))


register("fedprox", FedProxSettings, FedProx, synchronous,
         "FedProx (Li et al.): local steps on f_i + mu/2 ||w - theta||^2")
