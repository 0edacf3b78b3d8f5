"""Server-clock methods (QuAFL, FAVAS): the server contacts s uniform clients at fixed intervals.

Between contacts each client computes local steps at its own pace, up to K (:func:`afl.sim.schedule.
simulate_async_schedule` decides how many, E_i ^ K). Its mini-batches for a window are drawn when the
window starts, so its local model at any moment -- at the contact, or when FAVAS Fig. 2 measures the
spread ``sum_i ||w_i - w||^2`` -- is the same function of (start, batches, steps). Subclasses say what a
contacted client uploads and what it restarts from; the server always averages
``w_t = (w_{t-1} + sum_{i in S_t} upload_i) / (s + 1)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..errors import check_int, check_real
from .base import Learner, Settings, model_variance


@dataclass(frozen=True)
class ClockedSettings(Settings):
    """``s`` clients contacted every ``server_interval`` (FAVAS Sec. 5: s = 20; Delta = 10 as in the QuAFL
    code); ``track_variance`` also records FAVAS Fig. 2's spread of the local models at every evaluation."""

    s: int = 20
    server_interval: float = 10.0
    track_variance: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_int("s", self.s, 1)
        check_real("server_interval", self.server_interval, 0, strict_low=True)

    def check_federation(self, fed) -> None:
        check_int("s", self.s, 1, fed.n, hint="n, the number of clients")

    def contact_interval(self) -> float:
        """The simulated time between two contacts."""
        return self.server_interval


def mix_with_server(server: Tensor, local: Tensor, s: int) -> Tensor:
    """QuAFL's client side (FAVAS Sec. 3): a contacted client continues from ``(w_server + s w^i) / (s + 1)``."""
    return (server + s * local) / (s + 1)


class ClockedLearner(Learner):
    """Shared bookkeeping of QuAFL and FAVAS; subclasses define :meth:`upload` and :meth:`restart`."""

    def __init__(self, fed, history, cfg: ClockedSettings, lr: float | None = None):
        super().__init__(fed, history, cfg)
        self.s, self.track_variance = cfg.s, cfg.track_variance
        if lr is not None:
            self.lr = lr
        self.starts = self.clients.table("start", self.w)   # the model each client's current window started from
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
        steps = torch.as_tensor([c.steps for c in contacts], dtype=self.w.dtype, device=self.w.device)
        sent = self.upload(idx, local, self.starts[idx], steps)
        w_old = self.w
        self.w = (w_old + sent.sum(0)) / (self.s + 1)
        self.starts[idx] = self.restart(idx, local, w_old, self.w)
        self.count(contacts)

    def finish(self) -> None:
        self.record(self.history.total_time, inclusive=True)

    def record(self, t: float, inclusive: bool = False) -> None:
        """Evaluate the grid points before ``t`` (at ``t`` too, ``inclusive``: :meth:`afl.algorithms.base.History.
        record`); with ``track_variance``, the local models at each of them."""
        if not self.track_variance:
            self.history.record(t, self.w, inclusive)
        while self.track_variance and self.history.due(t, inclusive):
            g = self.history.next_eval
            self.history.record(g, self.w, True, variance=model_variance(self.w, self.local_models(g)))

    def local_models(self, t: float) -> Tensor:
        """Every client's local model ``(n, P)`` at time ``t``: its start trained for the steps done by ``t``."""
        steps = np.minimum(self.progress(t), self.K)
        jobs = [self.queue.submit(i, self.starts[i], int(k), self.lr, batches=b) if b is not None and k > 0
                else None for i, (k, b) in enumerate(zip(steps, self.batches))]
        return torch.stack([self.starts[i] if j is None else j.result() for i, j in enumerate(jobs)])
