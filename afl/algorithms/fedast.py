"""FedAST (Askin, Sharma, Joe-Wong, Joshi; ``shared/papers/004_*``, Algorithm 2 with option S (static) or D
(dynamic: Realloc, Algorithms 3-4)): M models trained at once over one client pool
(:func:`afl.sim.simulate_pool_schedule`).

Task m keeps R_m requests active. A request carries the task's current model ``x_m^{(v)}``; its client runs
LocalTrain (Algorithm 1: ``tau_m`` SGD steps at ``eta_c``) and returns ``Delta = (x_m^{(v)} - y) / (tau_m
eta_c)``. Once ``b_m`` updates are buffered the server steps (Algorithm 2, line 10)
    x_m <- x_m - eta_s eta_c tau_m (1/b_m) sum Delta  =  x_m - eta_s (1/b_m) sum (x_m^{(v)} - y),
with each update's own (possibly stale) starting model ``x_m^{(v)}``. Each task trains on its own federation
(dataset, model, engine, partition over the same n clients); the pool decides who trains what when.

A task with a ``target`` accuracy stops at the first aggregation whose model reaches it (tested after every one, as
Sync-ST's; Sec. 5.3): its requests still out are cancelled and its R_m goes to the other tasks in proportion to
theirs (the authors' code), their buffers scaled alike (Algorithm 3, line 4).
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

import numpy as np
import torch

from ..budget import Work, busy_clients_work, check_work
from ..checkpoint import EVERY_S, RunCheckpoint
from ..errors import check, check_choice, check_int, check_real
from ..jobs import SavedJobs
from ..sim.pool import PoolTask, simulate_pool_schedule
from ..theory.fedast import REALLOC_VARIANTS, realloc_weights
from .base import History, TargetReached

#: Realloc moves requests in chunks of this many (the authors' code, ``R_bs_ratio``; its buffers are R / 32)
CHUNK = 32


@dataclass(frozen=True)
class FedASTTask:
    """One task's training: client lr ``lr`` (eta_c), server lr ``server_lr`` (eta_s), ``steps`` (tau_m) local
    steps per request, ``requests`` (R_m) active requests, buffer ``buffer`` (b_m), client weight decay. Defaults:
    the paper's (App. C: tau = 27, R = 96, b = 3, eta_s = 0.1)."""

    lr: float
    server_lr: float = 0.1
    steps: int = 27
    requests: int = 96
    buffer: int = 3
    weight_decay: float = 0.0
    name: str = ""
    target: float | None = None

    def __post_init__(self):
        check_real("lr", self.lr, 0, strict_low=True)
        check_real("server_lr", self.server_lr, 0, strict_low=True)
        check_real("weight_decay", self.weight_decay, 0)
        if self.target is not None:
            check_real("target", self.target, 0, 1, strict_low=True, hint="an accuracy in (0, 1]")
        self.pool_task()                                   # checks steps, requests, buffer

    def pool_task(self) -> PoolTask:
        return PoolTask(self.requests, self.buffer, self.steps, self.name)


@dataclass(frozen=True)
class Realloc:
    """Option D (Algorithm 3): every ``c_period = period x M x sum_m R_m`` arrivals (M: tasks still training),
    once every task has passed ``warmup`` rounds, give the sum_m R_m requests out again in proportion to
    :func:`~afl.theory.fedast.realloc_weights` of each task's normalized update variance (Algorithm 4 over its last
    ``window`` updates, averaged over the period as the code does).
    ``variant="paper"``: weights ``sqrt(eta_s eta_c tau sigma^2)``, requests in exact proportion to them (eq. (3),
    :func:`allocate_proportional`) and buffers ``b <- b R_new / R_old`` (line 4); ``"code"``: the authors'
    ``eta_s / (eta_c tau^2) sigma^2 / 2``, requests in whole chunks of ``chunk`` (:func:`allocate_chunks`: a 43/57
    split of 192 moves nothing) and buffers ``ceil(active requests / chunk)`` after every arrival. ``chunk``
    given with ``"paper"``: its requests move in such chunks too. Defaults: the paper's (V = 8,
    c_period = 0.75 M sum R); the code's chunks of 32."""

    variant: str = "paper"
    window: int = 8
    period: float = 0.75
    warmup: int = 8
    chunk: int | None = None

    def __post_init__(self):
        check_choice("variant", self.variant, REALLOC_VARIANTS)
        check_int("window", self.window, 2)
        check_real("period", self.period, 0, strict_low=True)
        check_int("warmup", self.warmup, 0)
        if self.chunk is not None:
            check_int("chunk", self.chunk, 1)

    def allocate(self, total: int, weights, active) -> list[int]:
        """``total`` requests over the tasks by ``weights``: in exact proportion (the paper's, no ``chunk``) or in
        chunks (the code's)."""
        if self.chunk is None and self.variant == "paper":
            return allocate_proportional(total, weights, active)
        return allocate_chunks(total, weights, self.chunk or CHUNK, active)


#: what FedAST's first requests (those sent with model version 0) train from: "paper" -- x^(0), as Algorithm 2
#: sends it; "code" -- as the authors' code runs them (askinb/FedAST ``server.async_run_fedast``): its event loop pops
#: the :data:`~afl.sim.pool.POPPED` = 20 earliest-finishing events at a time (``num_of_threads``) and trains them
#: right there, and its stored version 0 is ``weight.data``, a view of the live weights that every aggregation
#: overwrites (``load_state_dict``), so a version-0 request trains from the model live when its batch is popped, or,
#: where it is sent during a batch and ends before the batch's last event, from the model live when it is sent (the
#: code trains it at once); "current" -- afl's earlier reading of the code: the model live when its client starts it
FIRST_WAVES = ("paper", "code", "current")


class _Request:
    """A request out: the model it trains from (``start``; None while a first-wave request waits for it), its job
    (None while deferred: its ``batches`` drawn when sent), when its client starts it (``began``) and when it ends."""

    __slots__ = ("start", "job", "batches", "began", "end")

    def __init__(self, start, job=None, batches=None, began: float = 0.0, end: float = 0.0):
        self.start, self.job, self.batches, self.began, self.end = start, job, batches, began, end


class FedASTServer:
    """Algorithm 2's server, driven by :func:`~afl.sim.simulate_pool_schedule`'s hooks: one model, buffer and
    :class:`~afl.algorithms.base.History` per task. Arrivals are matched to their requests per (task, client) in
    order (a client serves its requests first come, first served). ``realloc``: option D (:class:`Realloc`), else
    option S. ``first_wave``: what the requests sent with version 0 train from (:data:`FIRST_WAVES`)."""

    def __init__(self, feds, tasks, total_time: float, eval_every: float, realloc: Realloc | None = None,
                 first_wave: str = "paper"):
        check_choice("first_wave", first_wave, FIRST_WAVES)
        self.feds, self.tasks, self.first_wave = list(feds), list(tasks), first_wave
        self.w = [fed.init.clone() for fed in self.feds]
        self.steps_at = [[(0.0, w)] for w in self.w]     # (time, model) of each version, while version 0 is out
        self.deferred = [0] * len(self.tasks)            # first-wave requests still waiting for their model, per task
        self.batch_end = -np.inf                         # "code": the last event of the batch the loop popped last
        self.histories = [History(fed.queue, eval_every, total_time, target=t.target)
                          for fed, t in zip(self.feds, self.tasks)]
        self.pending = defaultdict(deque)
        self.buffers = [[] for _ in self.tasks]
        self.realloc = realloc
        self.rounds = [0] * len(self.tasks)
        self.control = None
        if realloc is not None:
            self.window = [deque(maxlen=realloc.window) for _ in self.tasks]
            self.samples = [[] for _ in self.tasks]
            self.arrivals = 0
            self.variances: list[tuple[float, list]] = []     # (time, per-task variance estimate) at each Realloc

    def bind(self, control) -> None:
        self.control = control

    #: what a checkpoint keeps of the server besides its histories and queues (``pending``: its requests out)
    STATE = ("w", "steps_at", "deferred", "batch_end", "buffers", "rounds", "window", "samples", "arrivals",
             "variances")

    @property
    def device(self) -> torch.device:
        return self.w[0].device

    def snapshot(self) -> dict:
        """The server between two events, for a checkpoint (:mod:`afl.checkpoint`): models, buffers, Realloc's
        estimates, every request out (its model, job and mini-batches), each task's history and job queue."""
        requests = [[m, c, [[r.start, r.job, r.batches, r.began, r.end] for r in q]]
                    for (m, c), q in self.pending.items()]
        own = {name: getattr(self, name) for name in self.STATE if hasattr(self, name)}
        return tasks_snapshot(self.feds, self.histories, own | {"pending": requests})

    def restore(self, state: dict, now: float) -> None:
        own = tasks_restore(self.feds, self.histories, state, now)
        self.pending = defaultdict(deque, {(m, c): deque(_Request(*r) for r in q) for m, c, q in own.pop("pending")})
        vars(self).update(own)

    def live(self) -> list[int]:
        return [m for m in range(len(self.tasks)) if not self.control.finished[m]]

    def on_request(self, m: int, client: int, t: float, start: float | None = None, end: float | None = None) -> None:
        task, fed = self.tasks[m], self.feds[m]
        began = t if start is None else start
        first = self.first_wave != "paper" and self.rounds[m] == 0
        at_once = self.first_wave == "code" and end is not None and t < self.batch_end and end < self.batch_end
        if first and not at_once:                      # trains from a model chosen later (FIRST_WAVES)
            batches = fed.queue.streams.take(client, task.steps)       # drawn now, as for every request
            self.pending[(m, client)].append(_Request(None, batches=batches, began=began, end=end or began))
            self.deferred[m] += 1
        else:
            job = fed.queue.submit(client, self.w[m], task.steps, task.lr, task.weight_decay)
            self.pending[(m, client)].append(_Request(self.w[m], job))
        self.histories[m].counters["bytes_down"] += fed.model_bytes

    def on_pop(self, t: float, batch_end: float) -> None:
        """The authors' loop pops its next batch at ``t``, the earliest events, ending by ``batch_end``
        (:func:`~afl.sim.simulate_pool_schedule`): with the code's first wave, the waiting version-0 requests among
        them train from the models live now."""
        self.batch_end = batch_end
        if self.first_wave != "code":
            return
        for (m, _), queue in self.pending.items():
            for r in queue:
                if r.job is None and r.start is None and r.end <= batch_end:
                    r.start = self.w[m]

    def on_update(self, m: int, client: int, t: float) -> None:
        r = self.pending[(m, client)].popleft()
        if r.job is None:                               # a first-wave request: its model is known now
            task = self.tasks[m]
            if r.start is None:                         # "current": the version live when its client started it
                r.start = [w for at, w in self.steps_at[m] if at <= r.began][-1]
            r.job = self.feds[m].queue.submit(client, r.start, task.steps, task.lr, task.weight_decay,
                                              batches=r.batches)
            self.deferred[m] -= 1
        delta = r.start - r.job.result()
        self.buffers[m].append(delta)
        counters = self.histories[m].counters
        counters["uploads"] += 1
        counters["client_steps"] += self.tasks[m].steps
        counters["bytes_up"] += self.feds[m].model_bytes
        if self.realloc is not None:
            self._estimate(m, delta, t)

    def on_server_step(self, m: int, t: float, updates) -> None:
        try:
            self.histories[m].record(t, self.w[m])
        except TargetReached:
            self._finish_task(m)
            return
        self.w[m] = self.w[m] - self.tasks[m].server_lr * torch.stack(self.buffers[m]).mean(0)
        if self.deferred[m] and self.first_wave == "current":
            self.steps_at[m].append((t, self.w[m]))
        self.buffers[m] = []
        self.rounds[m] += 1
        self.histories[m].counters["server_steps"] += 1
        try:
            self.histories[m].reach(t, self.w[m])     # tested after every aggregation, as Sync-ST: reached at t
        except TargetReached:
            self._finish_task(m)

    def _finish_task(self, m: int) -> None:
        """Task m reached its target: cancel its requests, give its R_m to the others in proportion to theirs
        (largest remainders; the code draws the remainder at random) and scale their buffers alike."""
        control = self.control
        freed = control.requests[m]
        control.finish(m, top_up=self.realloc is None)
        self.feds[m].queue.cancel_jobs()
        self.pending = defaultdict(deque, {k: v for k, v in self.pending.items() if k[0] != m})
        self.deferred[m] = 0
        live = self.live()
        if not live:
            return
        old = [control.requests[i] for i in live]
        share = [freed * r / sum(old) for r in old]
        extra = [int(x) for x in share]
        for j in sorted(range(len(live)), key=lambda j: extra[j] - share[j])[:freed - sum(extra)]:
            extra[j] += 1
        for i, r, add in zip(live, old, extra):
            control.set(i, requests=r + add, buffer=max(1, round(control.buffer[i] * (r + add) / r)))

    def _estimate(self, m: int, delta: torch.Tensor, t: float) -> None:
        """Algorithm 4 on task m's last V updates, and Algorithm 3 when the period is over."""
        cfg, control = self.realloc, self.control
        self.window[m].append(delta)
        if len(self.window[m]) == cfg.window:
            self.samples[m].append(normalized_variance(torch.stack(list(self.window[m]))))
        self.arrivals += 1
        live = self.live()
        if cfg.variant == "code":
            control.set(m, buffer=max(1, -(-control.active[m] // (cfg.chunk or CHUNK))))
        period = cfg.period * len(live) * control.budget
        if (self.arrivals < period or min(self.rounds) <= cfg.warmup
                or not all(self.samples[i] for i in live)):
            return
        self.arrivals = 0
        variance = [float(np.mean(self.samples[i])) if i in live else 0.0 for i in range(len(self.tasks))]
        self.samples = [[] for _ in self.tasks]
        self.variances.append((t, variance))
        tasks = self.tasks
        weights = realloc_weights(variance, [k.server_lr for k in tasks], [k.lr for k in tasks],
                                  [k.steps for k in tasks], cfg.variant)
        active = [not f for f in control.finished]
        new = cfg.allocate(control.budget, weights, active)
        for i in live:
            buffer = None if cfg.variant == "code" else max(1, round(control.buffer[i] * new[i] / control.requests[i]))
            control.set(i, requests=new[i], buffer=buffer)

    def finish(self) -> None:
        for m, (h, w) in enumerate(zip(self.histories, self.w)):
            if h.reached is None:
                try:
                    h.finish(w)
                except TargetReached:
                    pass


def tasks_snapshot(feds, histories, own: dict) -> dict:
    """A several-task server's state for a checkpoint: ``own`` (its data, jobs in it as :class:`~afl.jobs.SavedJobs`
    keeps them), each task's history and job queue (FedAST's, Sync-ST's)."""
    saved = SavedJobs([fed.queue for fed in feds])
    return dict(own={name: saved.encode(value) for name, value in own.items()},
                histories=[h.state_dict() for h in histories], queues=[fed.queue.state_dict() for fed in feds])


def tasks_restore(feds, histories, state: dict, now: float) -> dict:
    """Go on from :func:`tasks_snapshot`'s ``state`` at simulated time ``now``; returns the server's own data."""
    pending = [fed.queue.load_state_dict(q) for fed, q in zip(feds, state["queues"])]
    for h, saved in zip(histories, state["histories"]):
        h.load_state_dict(saved, now)
    saved = SavedJobs([fed.queue for fed in feds])
    return {name: saved.decode(value, pending) for name, value in state["own"].items()}


def tasks_identity(method: str, feds, tasks, **settings) -> dict:
    """What makes a several-task run this run, for its checkpoint: the method, its tasks and settings, and each
    task's federation (seed, clients' data sizes, initial model)."""
    return dict(method=method, tasks=[repr(t) for t in tasks], **settings,
                feds=[[fed.seed, [len(p) for p in fed.queue.streams.parts], float(fed.init.double().sum())]
                      for fed in feds])


def normalized_variance(deltas: torch.Tensor) -> float:
    """Algorithm 4, line 2: ``(1/V) sum_i ||Delta_i - mean||^2 / ||mean||^2`` over the last V updates ``(V, P)``
    of a task (any common scale of the updates cancels). Algorithm 3 then weighs tasks by
    :func:`afl.theory.fedast.realloc_weights` of it: the paper's ``sqrt(eta_s eta_c tau sigma^2)`` or the code's
    ``eta_s / (eta_c tau^2) sigma^2 / 2`` (whose variance also leaves out bias parameters)."""
    check(deltas.dim() == 2 and deltas.shape[0] >= 2, "deltas", tuple(deltas.shape), "(V >= 2, P) updates")
    mean = deltas.mean(0)
    norm2 = float(mean @ mean)
    check(norm2 > 0, "deltas", "a zero mean update", "updates whose mean is not zero")
    return float(((deltas - mean) ** 2).sum(1).mean()) / norm2


def allocate_proportional(total: int, weights, active=None) -> list[int]:
    """Algorithm 3, line 3, as eq. (3) states it: ``total`` requests in proportion to ``weights`` over the active
    tasks, rounded to whole requests by largest remainders (ties: the first), at least one each; finished tasks
    (``active[m]`` False) get 0."""
    total = check_int("total", total, 1)
    w = [check_real("weights", float(x), 0) for x in weights]
    active = [True] * len(w) if active is None else [bool(a) for a in active]
    check(len(active) == len(w) >= 1, "active", active, f"one flag per task ({len(w)})")
    check(total >= sum(active) >= 1, "total", total, f"at least one request per active task ({sum(active)})")
    w = [x if a else 0.0 for x, a in zip(w, active)]
    scale = sum(w)
    share = [total * x / scale if scale else total * a / sum(active) for x, a in zip(w, active)]
    out = [max(1, int(s)) if a else 0 for s, a in zip(share, active)]
    for m in sorted((m for m in range(len(w)) if active[m]), key=lambda m: out[m] - share[m]):
        if sum(out) >= total:
            break
        out[m] += 1
    while sum(out) > total:                          # the minimum of one pushed the sum over: take from the largest
        out[out.index(max(out))] -= 1
    return out


def allocate_chunks(total: int, weights, chunk: int = CHUNK, active=None) -> list[int]:
    """Algorithm 3, line 3, in whole chunks as the authors' code does (``redistributeActiveWorks``): every active
    task first gets one chunk; each further chunk goes to the task whose share ``int(total w_m / sum w) - chunk *
    (chunks it has)`` is largest (ties: the first). Finished tasks (``active[m]`` False) get 0."""
    total, chunk = check_int("total", total, 1), check_int("chunk", chunk, 1)
    w = [check_real("weights", float(x), 0) for x in weights]
    active = [True] * len(w) if active is None else [bool(a) for a in active]
    check(len(active) == len(w) >= 1, "active", active, f"one flag per task ({len(w)})")
    check(any(active), "active", active, "at least one task still training")
    w = [x if a else 0.0 for x, a in zip(w, active)]
    left = total - chunk * sum(active)
    check(left >= 0, "total", total, f"at least one chunk of {chunk} per active task ({sum(active)})")
    scale = sum(w) or 1.0
    share = [int(total * x / scale) - chunk if a else -float("inf") for x, a in zip(w, active)]
    out = [chunk if a else 0 for a in active]
    while left > 0:
        m = share.index(max(share))
        out[m] += min(chunk, left)
        share[m] -= chunk
        left -= chunk
    return out


def pool_work(profile, models: int, total_time: float, eval_every: float, clients: int | None = None) -> Work:
    """At most the work of a pool training ``models`` models for ``total_time``: every client busy without a pause
    on its cheapest model (:func:`afl.budget.busy_clients_work`), every model evaluated every ``eval_every``.
    ``clients``: that many clients in ``profile``'s proportions."""
    fastest = np.min([profile.mean_step_times(m) for m in range(models)], axis=0)
    return busy_clients_work(fastest, total_time, eval_every, models, clients)


def check_pool_work(profile, models: int, total_time: float, eval_every: float, allow_large: bool) -> float:
    """``total_time`` once the run's times are checked and its work (:func:`pool_work`) is within afl's limits, or
    ``allow_large``."""
    total_time = check_real("total_time", total_time, 0, strict_low=True)
    check_work(pool_work(profile, models, total_time, check_real("eval_every", eval_every, 0, strict_low=True)),
               allow_large, "allow_large=True")
    return total_time


def plan_fedast(profile, tasks, total_time: float, cap: int | None = None, seed=0, max_new: int = 2,
                cap_first: bool = True) -> list[int]:
    """The client steps of each task's arrived updates in :func:`run_fedast` without Realloc (FedAST static) until
    ``total_time`` if none reaches its target: the pool's schedule alone, without training. A plan of a run's work
    (:mod:`afl.queue`); equal to the run's own count until a task finishes."""
    schedule = simulate_pool_schedule(profile, [t.pool_task() for t in tasks], total_time, cap=cap, seed=seed,
                                      max_new=max_new, cap_first=cap_first)
    arrived = np.bincount([u.task for u in schedule.updates], minlength=len(tasks))
    return [int(a) * t.steps for a, t in zip(arrived, tasks)]


def run_fedast(feds, tasks, profile, total_time: float, eval_every: float, cap: int | None = None, seed=0,
               max_new: int = 2, realloc: Realloc | None = None, cap_first: bool = True, first_wave: str = "paper",
               allow_large: bool = False, checkpoint=None, checkpoint_every: float = EVERY_S) -> dict:
    """Train ``tasks`` (:class:`FedASTTask`), task m on federation ``feds[m]``, over ``profile``'s clients (one
    cost per task) until ``total_time`` or until every task reached its target; option D with ``realloc``.
    Returns ``{"tasks": [per-task history dict with "model", "name"], "schedule", "reallocations"}``
    (``reallocations``: (time, per-task variance estimate) of each Realloc). ``cap_first=False``: the first
    requests ignore the cap, as the authors' code sends them (:func:`~afl.sim.simulate_pool_schedule`).
    ``first_wave``: what the first requests train from (:data:`FIRST_WAVES`). ``allow_large``: run even above
    afl's work limits (:func:`pool_work`). ``checkpoint``: a file path; the run saves its state there every
    ``checkpoint_every`` seconds of wall time and at the command's time limit, and goes on from it when started again
    (:mod:`afl.checkpoint`); the file is deleted when the run ends."""
    feds, tasks = list(feds), list(tasks)
    check(len(feds) == len(tasks) >= 1, "feds", f"{len(feds)} federations", f"one per task ({len(tasks)})")
    for m, fed in enumerate(feds):
        check(fed.n == profile.n, f"feds[{m}]", f"{fed.n} clients", f"the pool's {profile.n} clients")
    check_int("max_new", max_new, 1)
    total_time = check_pool_work(profile, len(tasks), total_time, eval_every, allow_large)
    server = FedASTServer(feds, tasks, total_time, eval_every, realloc, first_wave)
    saving = None if checkpoint is None else RunCheckpoint(checkpoint, tasks_identity(
        "fedast", feds, tasks, total_time=total_time, eval_every=eval_every, cap=cap, seed=seed, max_new=max_new,
        realloc=repr(realloc), cap_first=cap_first, first_wave=first_wave), checkpoint_every)
    schedule = simulate_pool_schedule(profile, [t.pool_task() for t in tasks], total_time, cap=cap, seed=seed,
                                      max_new=max_new, learner=server, cap_first=cap_first, checkpoint=saving)
    if saving is not None:
        saving.discard()
    for fed in feds:
        fed.queue.cancel_jobs()                          # requests still out when the time ran out
    server.finish()
    return {"tasks": [h.to_dict() | {"model": w, "name": t.name} for h, w, t in zip(server.histories, server.w, tasks)],
            "schedule": schedule, "reallocations": server.variances if realloc is not None else []}


__all__ = ["CHUNK", "FIRST_WAVES", "FedASTTask", "Realloc", "FedASTServer", "normalized_variance",
           "allocate_proportional", "allocate_chunks", "pool_work", "check_pool_work", "run_fedast"]
