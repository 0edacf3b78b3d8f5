"""FedProx (Li et al. 2020): local SGD on ``f_i(w) + mu/2 ||w - theta||^2``, so every step's direction is

    d' = d + mu (w - theta)

(``theta``: the server model the client started from); the server is FedAvg's. The GHBM code adds
``mu/2 (w - theta)`` instead (``fedprox_client.py``): its ``mu`` is twice this one; ``proximal="code"`` runs
that form (Table 7's mu as the code used it).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import check_choice, check_real
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings


@dataclass(frozen=True)
class FedProxSettings(RoundSettings):
    """FedProx: proximal weight ``mu`` (GHBM Table 7: 0.1 for CIFAR, 1e-4 for Shakespeare); ``proximal``: the
    paper's pull ``mu (w - theta)`` or the GHBM code's ``mu/2 (w - theta)``."""

    mu: float = 0.1
    proximal: str = "paper"

    def __post_init__(self):
        super().__post_init__()
        check_real("mu", self.mu, 0)
        check_choice("proximal", self.proximal, ("paper", "code"))


class FedProx(RoundLearner):
    def __init__(self, fed, history, cfg: FedProxSettings):
        super().__init__(fed, history, cfg)
        self.hook = Drift(pull=float(cfg.mu) / (2.0 if cfg.proximal == "code" else 1.0))


register("fedprox", FedProxSettings, FedProx, synchronous,
         "FedProx (Li et al.): local steps on f_i + mu/2 ||w - theta||^2")
