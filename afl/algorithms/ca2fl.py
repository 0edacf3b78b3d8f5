"""CA2FL (Wang, Cao, Wu, Chen & Chen, ICLR 2024, "Tackling the data heterogeneity in asynchronous federated
learning with cached update calibration", its algorithm CA2FL): buffered asynchronous aggregation in which the server
caches each client's latest update ``h_i`` and calibrates every step with them,

    v_t = h_t + (1/|S_t|) sum_{i in S_t} (Delta_i - h_i),      h_t = (1/N) sum_{i=1..N} h_i
    x_{t+1} = x_t - eta v_t,   then h_i <- Delta_i for i in S_t

(``Delta_i = w_start - w_end``, afl's sign: the paper adds ``x_end - x_start``). Caches start at zero, so a
client's first update enters whole and the cached mean counts the clients not yet heard from as zero. Clients
are FedBuff's (:mod:`afl.algorithms.fedbuff`): K local SGD steps from the server model they received, at most
``concurrency`` in flight, a server step per ``Z`` updates. The cache costs the server ``N`` model-sized vectors;
it costs the clients nothing (uploads and downloads are FedBuff's). ``server_lr`` 1.0 is our default (the
unofficial FLGo port's ``eta``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check_real
from .fedbuff import Buffered, BufferedSettings
from .registry import buffered, register


@dataclass(frozen=True)
class CA2FLSettings(BufferedSettings):
    """CA2FL: the server learning rate ``server_lr`` (eta) on the calibrated buffer."""

    server_lr: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_real("server_lr", self.server_lr, 0, strict_low=True)


class CA2FL(Buffered):
    """CA2FL learner: the buffer's mean departure from each client's cached update, plus the caches' mean."""

    def __init__(self, fed, history, cfg: CA2FLSettings):
        super().__init__(fed, history, cfg)
        self.server_lr = float(cfg.server_lr)
        self.clients.table("cache", 0.0)

    def step(self, clients, updates, starts, staleness) -> None:
        cache = self.clients["cache"]
        rows = torch.as_tensor(clients, device=cache.device)
        v = cache.mean(0) + (updates - cache[rows]).mean(0)
        self.w = self.w - self.server_lr * v
        cache[rows] = updates


register("ca2fl", CA2FLSettings, CA2FL, buffered,
         "CA2FL (Wang et al.): FedBuff calibrated by each client's cached latest update")
