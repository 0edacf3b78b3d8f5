"""FedAvg (McMahan et al. 2017), synchronous, as FAVAS (Leconte et al. 2023, Sec. 5) compares against it.

Each round the server samples s clients uniformly without replacement; each trains exactly K local steps
from the server model; the server replaces its model by their average. A round lasts as long as the
slowest sampled client's K steps plus the server's interaction time (QuAFL code, ``train_Fed_Avg``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check_int, check_real
from .base import Learner, Settings
from .registry import register, synchronous


@dataclass(frozen=True)
class FedAvgSettings(Settings):
    """FedAvg: ``s`` clients per round, ``server_time`` added to each round (10 in the QuAFL code)."""

    s: int = 20
    server_time: float = 10.0

    def __post_init__(self):
        super().__post_init__()
        check_int("s", self.s, 1)
        check_real("server_time", self.server_time, 0)

    def check_federation(self, fed) -> None:
        check_int("s", self.s, 1, fed.n, hint="n, the number of clients")


class FedAvg(Learner):
    """FedAvg learner: the average of the sampled clients' models after K steps."""

    def __init__(self, fed, history, cfg: FedAvgSettings):
        super().__init__(fed, history, cfg)
        self.jobs = {}

    def on_start(self, client: int, t: float) -> None:
        self.jobs[client] = self.queue.submit(client, self.w, self.K, self.lr)

    def on_server_step(self, t, contacts) -> None:
        self.history.record(t, self.w)
        self.w = torch.stack([self.jobs.pop(c.client).result() for c in contacts]).mean(0)
        self.count(contacts)


register("fedavg", FedAvgSettings, FedAvg, synchronous,
         "FedAvg (McMahan et al.): synchronous rounds of s clients, each round as long as its slowest client")
