"""Lazy local training and evaluation (DESIGN.md, "lazy, batched local training").

An algorithm does not train a client when it dispatches it: it submits a job (client, start parameters,
steps, learning rate, correction hook) and asks for the job's result only when its simulated clock needs
it. Evaluations of the server model and clients' full-batch gradients (MIME's) are lazy too. Asking for any
result runs all pending work at once (:func:`run_pending`): jobs through :class:`~afl.engine.LocalSGD`, those of
different hooks in one call, in memory-bounded chunks, evaluations as one stack of models, full-batch gradients in
one call.

Inside a fleet (:mod:`afl.fleet`) a run that asks for a result waits instead, and the fleet runs the pending
work of all its waiting runs together: :func:`run_pending` of all their queues, where jobs of interchangeable
engines (:attr:`LocalSGD.signature`) share one engine call, whatever their hooks.
"""
from __future__ import annotations

import threading
from collections import deque

import numpy as np
import torch
from torch import Tensor

from .data.augment import augment_noise
from .engine import Correction, HookGroup, LocalSGD
from .errors import ParameterError, check
from .streams import ClientStreams

_context = threading.local()   # .member: the fleet member whose thread this is (set by afl.fleet), else None


class _Pending:
    """A result computed by a later flush: ``_get()`` flushes if needed, then returns it or raises its error."""

    __slots__ = ("_out", "_error", "_queue")

    def __init__(self, queue):
        self._out, self._error, self._queue = None, None, queue

    @property
    def done(self) -> bool:
        return self._out is not None

    def _get(self):
        if self._out is None and self._error is None:
            self._queue.flush()
        if self._error is not None:
            raise self._error
        return self._out


class Job(_Pending):
    """One client's local training; ``result()`` returns its final parameters ``(P,)``."""

    __slots__ = ("client", "start", "steps", "lr", "weight_decay", "batches", "hook", "state", "seed")

    def __init__(self, queue, client, start, steps, lr, weight_decay, batches, hook, state, seed=None):
        super().__init__(queue)
        self.client, self.start, self.steps, self.lr = client, start, steps, lr
        self.weight_decay, self.batches, self.hook, self.state = weight_decay, batches, hook, state
        self.seed = seed                # dropout's seed, from the run's generator (None: the model draws nothing)

    def result(self) -> Tensor:
        return self._get()

    @classmethod
    def finished(cls, queue, client: int, out: Tensor) -> Job:
        """A job trained before (a run resumed from a checkpoint), holding its result."""
        job = cls(queue, client, None, 0, 0.0, 0.0, None, None, None)
        job._out = out
        return job


class Evaluation(_Pending):
    """Accuracy and loss of one model on the test split, computed with the next flush; ``value()``."""

    __slots__ = ("model",)

    def __init__(self, queue, model: Tensor):
        super().__init__(queue)
        self.model = model

    def value(self) -> dict[str, float]:
        return self._get()

    @classmethod
    def known(cls, queue, value: dict[str, float]) -> Evaluation:
        """An evaluation computed before (a run resumed from a checkpoint)."""
        evaluation = cls(queue, None)
        evaluation._out = value
        return evaluation


class FullGradient(_Pending):
    """Clients' full-batch gradients, each at its own model (:meth:`~afl.engine.LocalSGD.full_gradient`), computed
    with the next flush; ``value()`` ``(C, P)``."""

    __slots__ = ("params", "parts")

    def __init__(self, queue, params: Tensor, parts: list[Tensor]):
        super().__init__(queue)
        self.params, self.parts = params, parts

    def value(self) -> Tensor:
        return self._get()


class JobQueue:
    """Collects a run's jobs, evaluations and full-batch gradients and runs all pending ones together when a
    result is needed."""

    def __init__(self, engine: LocalSGD, streams: ClientStreams, seed: int = 0):
        check(streams.batch_size == engine.batch_size, "streams.batch_size", streams.batch_size,
              f"the engine's batch size {engine.batch_size}")
        self.engine, self.streams = engine, streams
        self.pending: list[Job] = []
        self.evaluations: list[Evaluation] = []
        self.gradients: list[FullGradient] = []
        self.client_steps = 0
        self.generator = torch.Generator().manual_seed(seed)

    def submit(self, client: int, start: Tensor, steps: int, lr: float, weight_decay: float = 0.0,
               hook: Correction | None = None, state: dict[str, Tensor] | None = None,
               batches: Tensor | None = None) -> Job:
        """Queue ``steps`` local SGD steps of ``client`` from ``start``.

        ``batches`` ``(>= steps, B)``: the mini-batches to use (e.g. drawn when the client started); by
        default the next ``steps`` batches of the client's stream, drawn now. Batches without augmentation
        bits get them now, from the queue's seeded generator, if the dataset augments. ``hook``: the job's
        correction (:class:`~afl.engine.Correction`); jobs of any hooks share engine calls, and those with equal
        hooks (the same function, or equal frozen dataclasses) one :class:`~afl.engine.HookGroup`.
        """
        check(0 <= client < len(self.streams), "client", client, f"an index in [0, {len(self.streams)})")
        check(int(steps) == steps and steps >= 0, "steps", steps, "a non-negative integer")
        steps = int(steps)
        if batches is None:
            batches = self.streams.take(client, steps)
        check(batches.shape[0] >= steps, "batches", tuple(batches.shape), f"at least {steps} batches")
        batches = batches[:steps]
        if self.engine.augment and batches.dim() == 2:
            batches = torch.stack([batches, augment_noise(tuple(batches.shape), self.generator)], dim=-1)
        seed = int(torch.randint(2 ** 31, (1,), generator=self.generator)) if self.engine.model.random else None
        job = Job(self, client, start, steps, lr, weight_decay, batches, hook, state, seed)
        self.pending.append(job)
        _enlist(self)
        return job

    def evaluate(self, model: Tensor) -> Evaluation:
        """The test accuracy and loss of ``model`` (a copy is kept), computed with the next flush."""
        ev = Evaluation(self, model.detach().clone())
        self.evaluations.append(ev)
        _enlist(self)
        return ev

    def full_gradient(self, params: Tensor, parts: list[Tensor]) -> FullGradient:
        """Each client's full-batch gradient at its model ``params[c]`` over its samples ``parts[c]`` (a copy of
        ``params`` is kept), computed with the next flush. In a fleet, all waiting runs' requests go in one engine
        call: MIME's rounds start with one, and each alone is a few launch-bound passes on a GPU."""
        request = FullGradient(self, params.detach().clone(), list(parts))
        self.gradients.append(request)
        _enlist(self)
        return request

    def state_dict(self, hooks: dict | None = None) -> dict:
        """Where the run's random streams stand (mini-batches, augmentation bits), its step count and its pending
        jobs (each as what it was submitted with, its correction named by ``hooks``, ``{name: hook}``), between two
        rounds or events (:mod:`afl.checkpoint`); a :class:`ParameterError` while full-batch gradients are pending,
        or for a pending job with a correction ``hooks`` does not name."""
        check(not self.gradients, "checkpoint", f"{len(self.gradients)} pending full-batch gradients",
              "a round boundary, where no full-batch gradient is pending")
        names = {id(hook): name for name, hook in (hooks or {}).items()}
        jobs = []
        for j in self.pending:
            if j.hook is not None and id(j.hook) not in names:
                raise ParameterError("checkpoint", f"client {j.client}'s pending job", "a job whose correction is "
                                     f"one of the learner's own ({', '.join(hooks or {}) or 'it has none'})")
            jobs.append(dict(client=j.client, start=j.start, steps=j.steps, lr=j.lr, weight_decay=j.weight_decay,
                             batches=j.batches, hook=names.get(id(j.hook)), state=j.state, seed=j.seed))
        return dict(rngs=self.streams.rngs, stream_pending=self.streams.pending, jobs=jobs,
                    generator=self.generator.get_state(), client_steps=self.client_steps)

    def load_state_dict(self, state: dict, hooks: dict | None = None) -> list[Job]:
        """Go on from :meth:`state_dict`'s ``state``; returns the pending jobs, queued again in their order (their
        corrections looked up by name in ``hooks``)."""
        self.streams.rngs, self.streams.pending = state["rngs"], state["stream_pending"]
        self.generator.set_state(state["generator"].cpu())   # a checkpoint loaded onto a GPU moved it there
        self.client_steps = state["client_steps"]
        self.pending = [Job(self, j["client"], j["start"], j["steps"], j["lr"], j["weight_decay"], j["batches"],
                            None if j["hook"] is None else hooks[j["hook"]], j["state"], j["seed"])
                        for j in state.get("jobs", [])]
        if self.pending:
            _enlist(self)
        return list(self.pending)

    def cancel_jobs(self) -> None:
        """Drop the pending jobs (a run that has ended never needs them); their ``result()`` raises."""
        for job in self.pending:
            job._error = RuntimeError(f"client {job.client}'s job was cancelled: the run ended before it was needed")
        self.pending = []

    def flush(self) -> None:
        """Run every pending job and evaluation (in a fleet's run: wait until the fleet has run them)."""
        member = getattr(_context, "member", None)
        if member is not None:
            member.wait()
        else:
            run_pending([self])


class SavedJobs:
    """Data holding jobs, as a checkpoint holds it (:mod:`afl.checkpoint`) and back, for a run of ``queues``: a
    pending job by its queue and place (each queue's :meth:`JobQueue.state_dict` holds the jobs themselves), a
    finished one by its queue, client and result, a deque as a list (a checkpoint is read with
    ``torch.load(weights_only=True)``, whose unpickler builds lists, not deques)."""

    DEQUE, PENDING, FINISHED = "__deque__", "__pending_job__", "__finished_job__"

    def __init__(self, queues: list[JobQueue]):
        self.queues = list(queues)

    def encode(self, value):
        places = {id(job): [q, i] for q, queue in enumerate(self.queues) for i, job in enumerate(queue.pending)}
        return self._encode(value, places)

    def _encode(self, value, places: dict):
        if isinstance(value, Job):
            if id(value) in places:
                return {self.PENDING: places[id(value)]}
            owner = next(q for q, queue in enumerate(self.queues) if queue is value._queue)
            return {self.FINISHED: [owner, value.client], "out": value.result()}
        if isinstance(value, deque):
            return {self.DEQUE: [self._encode(v, places) for v in value], "maxlen": value.maxlen}
        if isinstance(value, dict):
            return {k: self._encode(v, places) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._encode(v, places) for v in value)
        return value

    def decode(self, value, pending: list[list[Job]]):
        """What :meth:`encode` saved, rebuilt (``pending``: each queue's pending jobs as its
        :meth:`JobQueue.load_state_dict` restored them)."""
        if isinstance(value, dict):
            if self.PENDING in value:
                q, i = value[self.PENDING]
                return pending[q][i]
            if self.FINISHED in value:
                q, client = value[self.FINISHED]
                return Job.finished(self.queues[q], client, value["out"])
            if self.DEQUE in value:
                return deque((self.decode(v, pending) for v in value[self.DEQUE]), maxlen=value["maxlen"])
            return {k: self.decode(v, pending) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.decode(v, pending) for v in value)
        return value


def _enlist(queue: JobQueue) -> None:
    """In a fleet's run, make ``queue`` one of the queues the fleet runs when the run waits."""
    member = getattr(_context, "member", None)
    if member is not None and not any(q is queue for q in member.queues):
        member.queues.append(queue)


def run_pending(queues: list[JobQueue]) -> None:
    """Run the pending jobs, evaluations and full-batch gradients of ``queues``: one engine call per group of
    interchangeable engines (equal :attr:`~afl.engine.LocalSGD.signature`), whatever the jobs' hooks (a
    :class:`~afl.engine.HookGroup` for each hook and set of state names); one evaluation and one full-gradient
    call per engine group.

    A group that fails is run again queue by queue, so that bad input of one run (one queue) fails only that
    run: its jobs and evaluations keep the error and raise it when their result is asked for.
    """
    work = {_train: {}, _full_gradients: {}, _evaluate: {}}
    for q in queues:
        for kind, items in ((_train, q.pending), (_full_gradients, q.gradients), (_evaluate, q.evaluations)):
            for item in items:
                work[kind].setdefault(q.engine.signature, []).append(item)
        q.pending, q.gradients, q.evaluations = [], [], []
    for kind, groups in work.items():
        for items in groups.values():
            _isolated(kind, items)


def _isolated(work, items: list) -> None:
    """``work(items)``; if it fails, ``work`` queue by queue on the items not done yet, each queue's items keeping
    its own error."""
    try:
        work(items)
    except Exception as error:  # noqa: BLE001 -- raised again by the items' result()
        items = [it for it in items if not it.done]
        queues = _by_queue(items)
        if len(queues) == 1:
            for it in items:
                it._error = error
        else:
            for own in queues.values():
                _isolated(work, own)


def _train(jobs: list[Job]) -> None:
    """Train ``jobs`` (one engine group) chunk by chunk: the engine's own chunks (most steps first), so that only
    one chunk's stacked start models and results are in memory beside the jobs' own tensors (the same numbers as
    one engine call over all of them). A model that draws random numbers (dropout) trains each run's jobs in calls
    of their own: a call's masks come from one seed, so a call shared with other runs would make a run's numbers
    depend on the fleet it ran in."""
    engine = jobs[0]._queue.engine
    jobs = sorted(jobs, key=lambda j: -j.steps)                 # stable, as the engine's own order
    runs = [jobs] if not engine.model.random else list(_by_queue(jobs).values())
    for own in runs:
        for lo in range(0, len(own), engine.chunk):
            _train_chunk(engine, own[lo:lo + engine.chunk])


def _by_queue(items: list) -> dict[int, list]:
    """``items`` grouped by the run (job queue) they belong to, each group in the given order."""
    groups: dict[int, list] = {}
    for it in items:
        groups.setdefault(id(it._queue), []).append(it)
    return groups


def _train_chunk(engine: LocalSGD, jobs: list[Job]) -> None:
    """Train ``jobs`` in one engine call (a lone one computes as in company: :meth:`afl.engine.LocalSGD._lone`)."""
    S = max(j.steps for j in jobs)
    batches = torch.zeros(len(jobs), S, *jobs[0].batches.shape[1:], dtype=torch.long)
    for i, j in enumerate(jobs):
        batches[i, :j.steps] = j.batches
    start = torch.stack([j.start for j in jobs])
    kinds: dict[tuple, list[int]] = {}              # jobs with equal hooks and state names share a HookGroup
    for i, j in enumerate(jobs):
        kinds.setdefault((j.hook, tuple(sorted(j.state or {}))), []).append(i)
    groups = [HookGroup(members, hook, {k: torch.stack([jobs[i].state[k] for i in members]) for k in names})
              for (hook, names), members in kinds.items()]
    seeds = [j.seed for j in jobs if j.seed is not None]  # one seed from the jobs' own: the same call, the same masks
    seed = int(np.random.SeedSequence(seeds).generate_state(1)[0]) if seeds else None
    out = engine.run(start, batches, [j.steps for j in jobs], [j.lr for j in jobs],
                     [j.weight_decay for j in jobs], groups=groups, seed=seed)
    for group in groups:
        for row, i in enumerate(group.rows):
            for k, s in group.state.items():
                jobs[i].state[k].copy_(s[row])
    for i, j in enumerate(jobs):
        j._out = out[i].clone()         # not a view: a view would keep the whole chunk alive until its last job is read
        j.start = j.batches = None
        j._queue.client_steps += j.steps


def _full_gradients(requests: list[FullGradient]) -> None:
    """One engine call for all ``requests``; a lone one equals it in company (``tests/test_fleet.py``)."""
    out = requests[0]._queue.engine.full_gradient(torch.cat([r.params for r in requests]),
                                                  [p for r in requests for p in r.parts])
    for r, g in zip(requests, out.split([len(r.parts) for r in requests])):
        r._out, r.params, r.parts = g.clone(), None, None


def _evaluate(evaluations: list[Evaluation]) -> None:
    """One stack of models for all ``evaluations``: their matmuls sum over features, so a lone model tests as in
    company (``tests/test_fleet.py``, every model of the zoo; the character LSTM measured on Shakespeare)."""
    res = evaluations[0]._queue.engine.evaluate(torch.stack([e.model for e in evaluations]))
    for e, acc, loss in zip(evaluations, res["accuracy"].tolist(), res["loss"].tolist()):
        e._out, e.model = {"accuracy": acc, "loss": loss}, None
