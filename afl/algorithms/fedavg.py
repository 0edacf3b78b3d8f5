"""FedAvg (McMahan et al. 2017), synchronous, as FAVAS compares against it (paper 001, Sec. 5).

Each round the server samples s clients uniformly without replacement; each trains exactly K local steps
from the server model; the server replaces its model by their average. A round lasts as long as the
slowest sampled client's K steps plus the server's interaction time (QuAFL code, ``train_Fed_Avg``).
"""
from __future__ import annotations

import torch

from .base import Learner


class FedAvg(Learner):
    """FedAvg learner: the average of the sampled clients' models after K steps."""

    def __init__(self, fed, history, K, lr):
        super().__init__(fed, history, K, lr)
        self.jobs = {}

    def on_start(self, client: int, t: float) -> None:
        self.jobs[client] = self.queue.submit(client, self.w, self.K, self.lr)

    def on_server_step(self, t, contacts) -> None:
        self.history.record(t, self.w)
        self.w = torch.stack([self.jobs.pop(c.client).result() for c in contacts]).mean(0)
        self.count(contacts)
