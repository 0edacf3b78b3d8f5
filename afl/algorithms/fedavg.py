"""FedAvg (McMahan et al. 2017) and FedAvgM (Hsu et al. 2019): plain local SGD, the server averages.

Each round ``s`` sampled clients train K steps from the server model; with the weighted pseudo-gradient
``g = sum_i p_i (theta - y_i)`` (:mod:`afl.algorithms.rounds`) the server steps

    FedAvg:   theta <- theta - eta g                            (eta = 1: the average of the clients' models)
    FedAvgM:  m <- beta m + g,   theta <- theta - eta m         (server SGD with momentum; m starts at 0)

FedAvg's defaults are FAVAS's (Leconte et al. 2023, Sec. 5): uniform weights, and a round lasting as long as the
slowest sampled client's K steps plus the server's interaction time (QuAFL code, ``train_Fed_Avg``). In the GHBM
experiments it runs with ``timing="rounds"``, weights by data size and the paper's learning rates.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import check_real
from .registry import register, synchronous
from .rounds import RoundLearner, RoundSettings


@dataclass(frozen=True)
class FedAvgSettings(RoundSettings):
    """FedAvg, FAVAS's defaults: K = 20, lr = 0.5, s = 20, uniform weights, rounds as long as the slowest client
    plus ``server_time`` = 10 (the QuAFL code)."""

    K: int = 20
    lr: float = 0.5
    s: int = 20
    weighting: str = "uniform"
    timing: str = "slowest"
    server_time: float = 10.0


class FedAvg(RoundLearner):
    """FedAvg learner: ``theta <- theta - eta * sum_i p_i (theta - y_i)``."""


@dataclass(frozen=True)
class FedAvgMSettings(RoundSettings):
    """FedAvgM: server momentum ``beta`` (GHBM Table 7: beta = 0.9 with eta = 0.1)."""

    server_lr: float = 0.1
    beta: float = 0.9

    def __post_init__(self):
        super().__post_init__()
        check_real("beta", self.beta, 0, 1, strict_high=True)


class FedAvgM(RoundLearner):
    """FedAvgM learner: server heavy-ball on the pseudo-gradient."""

    def __init__(self, fed, history, cfg: FedAvgMSettings):
        super().__init__(fed, history, cfg)
        self.m = self.w.new_zeros(self.w.shape)

    def server_step(self, clients, delta, pseudo):
        self.m = self.cfg.beta * self.m + pseudo
        self.w = self.w - self.cfg.server_lr * self.m


register("fedavg", FedAvgSettings, FedAvg, synchronous,
         "FedAvg (McMahan et al.): rounds of s clients; the server averages (server lr eta)")
register("fedavgm", FedAvgMSettings, FedAvgM, synchronous,
         "FedAvgM (Hsu et al.): FedAvg with server momentum m <- beta m + g, theta <- theta - eta m")
