"""Server-clock methods (QuAFL, FAVAS): the server contacts s uniform clients at fixed intervals.

Between contacts each client computes local steps at its own pace, up to K (:func:`afl.sim.schedule.
simulate_async_schedule` decides how many, E_i ^ K). Its mini-batches for a window are drawn when the
window starts, so its local model at any moment -- at the contact, or when FAVAS Fig. 2 measures the
spread ``sum_i ||w_i - w||^2`` -- is the same function of (start, batches, steps). Subclasses say what a
contacted client uploads and what it restarts from; the server always averages
``w_t = (w_{t-1} + sum_{i in S_t} upload_i) / (s + 1)``.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..errors import check_int
from .base import Learner, model_variance


class ClockedLearner(Learner):
    """Shared bookkeeping of QuAFL and FAVAS; subclasses define :meth:`upload` and :meth:`restart`."""

    def __init__(self, fed, history, K, lr, s, track_variance=False):
        super().__init__(fed, history, K, lr)
        self.s = check_int("s", s, 1, fed.n, hint="n, the number of clients")
        self.track_variance = track_variance
        self.starts = self.w.expand(fed.n, -1).clone()   # the model each client's current window started from
        self.batches: list[Tensor | None] = [None] * fed.n
        self.progress = None                              # set by the protocol: t -> steps done by t, per client

    def upload(self, clients: Tensor, local: Tensor, start: Tensor, steps: Tensor) -> Tensor:
        """What the contacted clients send, ``(s, P)``."""
        raise NotImplementedError

    def restart(self, clients: Tensor, local: Tensor, w_old: Tensor, w_new: Tensor) -> Tensor:
        """The models the contacted clients continue from, ``(s, P)``."""
        raise NotImplementedError

    def on_start(self, client: int, t: float) -> None:
        self.batches[client] = self.queue.streams.take(client, self.K)

    def on_server_step(self, t, contacts) -> None:
        self.record(t)
        clients = [c.client for c in contacts]
        jobs = [self.queue.submit(c.client, self.starts[c.client], c.steps, self.lr, batches=self.batches[c.client])
                for c in contacts]
        local = torch.stack([j.result() for j in jobs])
        idx = torch.as_tensor(clients, device=self.w.device)
        steps = torch.as_tensor([c.steps for c in contacts], dtype=torch.float32, device=self.w.device)
        sent = self.upload(idx, local, self.starts[idx], steps)
        w_old = self.w
        self.w = (w_old + sent.sum(0)) / (self.s + 1)
        self.starts[idx] = self.restart(idx, local, w_old, self.w)
        self.count(contacts)

    def finish(self) -> None:
        self.record(self.history.total_time)

    def record(self, t: float) -> None:
        """Evaluate the grid points up to ``t``; with ``track_variance``, the local models at each of them."""
        if not self.track_variance:
            self.history.record(t, self.w)
        while self.track_variance and self.history.due(t):
            g = self.history.next_eval
            self.history.record(g, self.w, variance=model_variance(self.w, self.local_models(g)))

    def local_models(self, t: float) -> Tensor:
        """Every client's local model ``(n, P)`` at time ``t``: its start trained for the steps done by ``t``."""
        steps = np.minimum(self.progress(t), self.K)
        batches = torch.stack([b if b is not None else torch.zeros(self.K, self.queue.engine.batch_size,
                                                                   dtype=torch.long) for b in self.batches])
        return self.queue.engine.run(self.starts, batches, steps.tolist(), self.lr)
