"""FedBuff (Nguyen et al. 2022), as FAVAS uses it (paper 001, Sec. 5) and in its general form.

Every client trains K local steps from the server model it last received and uploads its update
``Delta_j = w_start - w_end``; the server buffers updates and, once Z have arrived, steps

    w <- w - eta_g * (1/Z) * sum_{j in buffer} s(tau_j) * Delta_j

with server learning rate eta_g and staleness weight s(tau) of the update's staleness tau (server steps
since its client started): ``"none"`` (s = 1, as in FAVAS and the QuAFL code) or ``"sqrt"``
(s = 1 / sqrt(1 + tau), Nguyen et al. 2022). FAVAS: Z = 10, eta_g = 1. Clients restart from the newest
server model as soon as they have uploaded.
"""
from __future__ import annotations

import math

import torch

from ..errors import check, check_choice, check_int
from .base import Learner

STALENESS = {"none": lambda tau: 1.0, "sqrt": lambda tau: 1.0 / math.sqrt(1.0 + tau)}


class FedBuff(Learner):
    """FedBuff learner: every client always trains K steps; the server applies buffers of Z updates."""

    def __init__(self, fed, history, K, lr, Z=10, server_lr=1.0, staleness="none"):
        super().__init__(fed, history, K, lr)
        Z = check_int("Z", Z, 1, fed.n, hint="n, the number of clients")
        check(server_lr > 0, "server_lr", server_lr, "a positive server learning rate")
        check_choice("staleness", staleness, STALENESS)
        self.Z, self.server_lr, self.weight = Z, float(server_lr), STALENESS[staleness]
        self.version = 0
        self.jobs = {}

    def on_start(self, client: int, t: float) -> None:
        self.jobs[client] = (self.queue.submit(client, self.w, self.K, self.lr), self.w, self.version)
        self.history.counters["bytes_down"] += self.message_bytes()

    def on_server_step(self, t, contacts) -> None:
        self.history.record(t, self.w)
        update = torch.zeros_like(self.w)
        for c in contacts:
            job, start, version = self.jobs.pop(c.client)
            update += self.weight(self.version - version) * (start - job.result())
        self.w = self.w - self.server_lr * update / len(contacts)
        self.version += 1
        self.count(contacts, downloads=0)
