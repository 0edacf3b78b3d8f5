"""Lazy local-training jobs (DESIGN.md, "lazy, batched local training").

An algorithm does not train a client when it dispatches it: it submits a job (client, start parameters,
steps, learning rate, correction hook) and asks for the job's result only when its simulated clock needs
it. Asking for any result runs every pending job at once through :class:`~afl.engine.LocalSGD`
(grouped by hook), in memory-bounded chunks.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .engine import Correction, LocalSGD
from .errors import check
from .streams import ClientStreams


class Job:
    """One client's local training; ``result()`` returns its final parameters ``(P,)``."""

    __slots__ = ("client", "start", "steps", "lr", "weight_decay", "batches", "hook", "state", "_out", "_queue")

    def __init__(self, queue, client, start, steps, lr, weight_decay, batches, hook, state):
        self.client, self.start, self.steps, self.lr = client, start, steps, lr
        self.weight_decay, self.batches, self.hook, self.state = weight_decay, batches, hook, state
        self._out, self._queue = None, queue

    @property
    def done(self) -> bool:
        return self._out is not None

    def result(self) -> Tensor:
        if self._out is None:
            self._queue.flush()
        return self._out


class JobQueue:
    """Collects jobs and runs all pending ones together when a result is needed."""

    def __init__(self, engine: LocalSGD, streams: ClientStreams, seed: int = 0):
        check(streams.batch_size == engine.batch_size, "streams.batch_size", streams.batch_size,
              f"the engine's batch size {engine.batch_size}")
        self.engine, self.streams = engine, streams
        self.pending: list[Job] = []
        self.client_steps = 0
        self.generator = torch.Generator(device=engine.device).manual_seed(seed)

    def submit(self, client: int, start: Tensor, steps: int, lr: float, weight_decay: float = 0.0,
               hook: Correction | None = None, state: dict[str, Tensor] | None = None,
               batches: Tensor | None = None) -> Job:
        """Queue ``steps`` local SGD steps of ``client`` from ``start``.

        ``batches`` ``(>= steps, B)``: the mini-batches to use (e.g. drawn when the client started); by
        default the next ``steps`` batches of the client's stream, drawn now.
        """
        check(0 <= client < len(self.streams), "client", client, f"an index in [0, {len(self.streams)})")
        check(int(steps) == steps and steps >= 0, "steps", steps, "a non-negative integer")
        steps = int(steps)
        if batches is None:
            batches = self.streams.take(client, steps)
        check(batches.shape[0] >= steps, "batches", tuple(batches.shape), f"at least {steps} batches")
        job = Job(self, client, start, steps, lr, weight_decay, batches[:steps], hook, state)
        self.pending.append(job)
        return job

    def flush(self) -> None:
        """Run every pending job (one engine call per hook/state signature)."""
        groups: dict[tuple, list[Job]] = {}
        for job in self.pending:
            key = (id(job.hook), tuple(sorted(job.state or {})))
            groups.setdefault(key, []).append(job)
        self.pending = []
        for jobs in groups.values():
            self._run(jobs)

    def _run(self, jobs: list[Job]) -> None:
        S, B = max(j.steps for j in jobs), self.engine.batch_size
        batches = torch.zeros(len(jobs), S, B, dtype=torch.long)
        for i, j in enumerate(jobs):
            batches[i, :j.steps] = j.batches
        start = torch.stack([j.start for j in jobs])
        state = {k: torch.stack([j.state[k] for j in jobs]) for k in (jobs[0].state or {})}
        out = self.engine.run(start, batches, [j.steps for j in jobs], [j.lr for j in jobs],
                              [j.weight_decay for j in jobs], hook=jobs[0].hook, state=state,
                              generator=self.generator)
        for i, j in enumerate(jobs):
            j._out = out[i]
            for k in state:
                j.state[k].copy_(state[k][i])
            j.start = j.batches = None
        self.client_steps += sum(j.steps for j in jobs)
