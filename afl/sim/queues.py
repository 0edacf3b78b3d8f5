"""First-come-first-served request queues at clients (FedAST Sec. 3).

A FedAST client that receives several training requests (possibly for different models) processes them one at a
time in arrival order: a request submitted at ``t`` with duration ``d`` starts at ``max(t, busy_until)``.
"""
from __future__ import annotations

import numpy as np

from afl.errors import check_int, check_real


class FCFSQueues:
    """One FCFS server per client; :meth:`submit` returns the request's ``(start, end)`` times."""

    def __init__(self, n: int):
        self.busy_until = np.zeros(check_int("n", n, 1))
        self._jobs: list[list[tuple[float, float]]] = [[] for _ in range(len(self.busy_until))]  # (submit, end)

    def submit(self, client: int, t: float, duration: float) -> tuple[float, float]:
        """Queue a request of length ``duration`` arriving at ``client`` at time ``t``."""
        client = check_int("client", client, 0, len(self.busy_until) - 1)
        t, duration = check_real("t", t), check_real("duration", duration, 0)
        start = max(t, float(self.busy_until[client]))
        end = start + duration
        self.busy_until[client] = end
        self._jobs[client].append((t, end))
        return start, end

    def state_dict(self) -> dict:
        """Every client's queue, for a checkpoint (:mod:`afl.checkpoint`)."""
        return dict(busy_until=self.busy_until, jobs=self._jobs)

    def load_state_dict(self, state: dict) -> None:
        self.busy_until[:], self._jobs[:] = state["busy_until"], state["jobs"]

    def queue_length(self, client: int, t: float) -> int:
        """Requests submitted to ``client`` by time ``t`` and not finished at ``t`` (in service or waiting)."""
        client = check_int("client", client, 0, len(self.busy_until) - 1)
        t = check_real("t", t)
        return sum(submit <= t < end for submit, end in self._jobs[client])
