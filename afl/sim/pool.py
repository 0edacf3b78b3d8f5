"""One client pool shared by several tasks, each with its own buffer (FedAST, Askin et al., Sec. 3 and Algorithm 2,
with the request rules of the authors' code, askinb/FedAST ``server.async_run_fedast``).

Task m keeps ``requests`` (R_m) local-training requests active. A request goes to a client drawn uniformly from
all ``n``, carries the task's current model version, and is served first come, first served
(:class:`~afl.sim.queues.FCFSQueues`): it ends at ``max(send time, the client's last finish) + duration``, the
duration being ``steps`` times one draw of the client's step time for that task (``profile.request_time`` with
``per_step=False``, as the code draws it). When an update of task m arrives, the server puts it in the task's buffer,
steps once ``buffer`` (b_m) updates are in, and then sends up to ``max_new`` (the code's 2) new requests to bring
the task back to R_m, never above the total budget ``sum_m R_m``. **Availability**: with ``cap`` set, at most
``cap`` distinct clients hold requests at once; a request drawn for a client outside them while ``cap`` are busy
is dropped (the deficit is made up at the task's next arrivals, two at most each). By default the cap also
holds for the first requests, which are sent task by task, so that with more requests than the cap the last
tasks start short (6 tasks of R = 96 under a cap of 300: the last two start with about 37); ``cap_first=False``
sends the first requests regardless of the cap, as the authors' code does.

FedAST's delays (App. C.6): ``three_speed(n, base=ShiftedExponential(shift=0.5, mean=1.0),
costs=[FEDAST_MODEL_COSTS[...]])`` gives a job ``27 x (Exp(mean e s) + e s / 2)`` for a task of cost e on a client
of speed factor s (1.3 / 1 / 0.7).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from afl.checkpoint import boundary, checkpointable
from afl.errors import check, check_int, check_real
from afl.sim.clock import EventQueue
from afl.sim.queues import FCFSQueues
from afl.sim.speeds import SpeedProfile
from afl.sim.timeline import Timeline


#: the events the authors' loop pops and trains at a time (``num_of_threads`` = 20 in its configurations)
POPPED = 20


@dataclass(frozen=True)
class PoolTask:
    """One task's share of the pool: ``requests`` active requests (R_m), a buffer of ``buffer`` updates (b_m),
    ``steps`` local steps per request (tau_m); ``name`` labels it in timelines and pictures (default: its index)."""

    requests: int
    buffer: int
    steps: int = 27
    name: str = ""

    def __post_init__(self):
        check_int("requests", self.requests, 1)
        check_int("buffer", self.buffer, 1)
        check_int("steps", self.steps, 1)


@checkpointable
@dataclass(frozen=True)
class Update:
    """A finished request of ``task``: sent at ``sent`` with model version ``version``, served by ``client``
    from ``start`` to ``end``; ``staleness`` = server rounds of the task between sending and arrival."""

    task: int
    client: int
    sent: float
    start: float
    end: float
    version: int
    staleness: int


class PoolControl:
    """What a learner may change while the pool runs (FedAST's Realloc, Algorithm 3, and finished tasks): each
    task's target number of active requests ``requests[m]`` (R_m) and buffer size ``buffer[m]`` (b_m), read by the
    pool at every event, and :meth:`finish`. ``active[m]``: requests of task m out now (read only)."""

    def __init__(self, tasks):
        self.requests = [k.requests for k in tasks]
        self.buffer = [k.buffer for k in tasks]
        self.active = [0] * len(tasks)
        self.finished = [False] * len(tasks)
        self._finishing: list[tuple[int, bool]] = []

    def set(self, m: int, requests: int | None = None, buffer: int | None = None) -> None:
        """New R_m and/or b_m for task m (a finished task keeps 0 requests)."""
        if requests is not None:
            self.requests[m] = 0 if self.finished[m] else check_int("requests", requests, 0)
        if buffer is not None:
            self.buffer[m] = check_int("buffer", buffer, 1)

    def finish(self, m: int, top_up: bool = False) -> None:
        """Task m is done (its target reached): its requests still out are cancelled and it gets no more. Its R_m
        is the learner's to give to others (:meth:`set`); with ``top_up`` every other task is brought up to its
        R_m at once (the code's static option), else two at most per arrival (K_m in {0, 1, 2})."""
        if not self.finished[m]:
            self.finished[m] = True
            self.requests[m] = 0
            self._finishing.append((m, top_up))

    @property
    def budget(self) -> int:
        """The total of active requests, sum_m R_m (Algorithm 3's constraint)."""
        return sum(self.requests)


@dataclass
class PoolSchedule:
    """What :func:`simulate_pool_schedule` returns: every arrived update in arrival order, each task's server-step
    times, the dropped requests (cap reached), the busy-client count after every event, the cancelled requests
    of finished tasks ``(task, client, time)``, each task's finish time (None: still training at the end) and the
    allocation ``(time, R_1..R_M)`` after every change."""

    profile: SpeedProfile
    tasks: tuple
    timeline: Timeline
    updates: list = field(default_factory=list)
    server_steps: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    busy_clients: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)
    finished_at: list = field(default_factory=list)
    allocations: list = field(default_factory=list)

    def round_times(self, task: int) -> np.ndarray:
        """Lengths of task ``task``'s server rounds (time between successive steps, from 0)."""
        return np.diff(np.concatenate([[0.0], self.server_steps[task]]))

    def staleness(self, task: int) -> np.ndarray:
        return np.array([u.staleness for u in self.updates if u.task == task], dtype=int)


def simulate_pool_schedule(profile: SpeedProfile, tasks, t_end: float, cap: int | None = None, seed=0,
                           max_new: int = 2, learner=None, cap_first: bool = True, popped: int = POPPED,
                           checkpoint=None) -> PoolSchedule:
    """Simulate ``tasks`` (:class:`PoolTask`, one per model of ``profile``'s costs) sharing ``profile``'s clients
    until ``t_end`` or until every task has finished. ``learner`` (optional) is told ``on_request(task, client,
    t, start, end)`` when a request is sent (train from the task's current model; the client starts it at ``start``
    and ends it at ``end``), ``on_update(task, client, t)`` when it arrives and ``on_server_step(task, t, updates)``
    when the task's buffer is full; if it has ``on_pop(t, end)``, it is told when the authors' event loop would pop
    its next batch of ``popped`` events (the earliest, ending by ``end``), before the first of them arrives; if it
    has ``bind(control)``
    it gets the run's :class:`PoolControl` first, to reallocate requests and buffers and finish tasks. A client
    serves its requests in the order they were sent (FCFS), so a learner can match each arrival to its request
    by keeping, per (task, client), its requests in order. ``checkpoint`` (a :class:`afl.checkpoint.RunCheckpoint`,
    with a learner that has ``snapshot()`` and ``restore(state, now)``): go on from its saved state if it has one;
    between two events, save the state whenever it is due, and before stopping at the command's time limit."""
    tasks = tuple(tasks)
    check(len(tasks) >= 1 and all(isinstance(k, PoolTask) for k in tasks), "tasks", tasks, "PoolTask objects")
    check(len(profile.costs) >= len(tasks), "profile", f"{len(profile.costs)} model costs",
          f"one cost per task ({len(tasks)}): SpeedProfile.with_costs")
    t_end = check_real("t_end", t_end, 0, strict_low=True)
    n = profile.n
    if cap is not None:
        cap = check_int("cap", cap, 1, n, hint="distinct busy clients, at most n")
    max_new = check_int("max_new", max_new, 1)
    clock = EventQueue(seed)
    rng = clock.rng
    fcfs = FCFSQueues(n)
    held = np.zeros(n, dtype=int)                        # requests each client holds (in service or queued)
    control = PoolControl(tasks)
    active = control.active
    out_now: list[dict] = [{} for _ in tasks]              # task -> {event: client} of its requests out now
    version = [0] * len(tasks)
    buffers: list[list[Update]] = [[] for _ in tasks]
    out = PoolSchedule(profile, tasks, Timeline.for_profile(profile), server_steps=[[] for _ in tasks],
                       finished_at=[None] * len(tasks), allocations=[(0.0, tuple(control.requests))])
    if learner is not None and hasattr(learner, "bind"):
        learner.bind(control)

    def send(m: int, t: float, capped: bool = True) -> None:
        c = int(rng.integers(n))
        if capped and cap is not None and held[c] == 0 and int(np.count_nonzero(held)) >= cap:
            out.dropped.append((m, t))
            return
        start, end = fcfs.submit(c, t, profile.request_time(rng, c, tasks[m].steps, model=m, per_step=False))
        held[c] += 1
        active[m] += 1
        out.timeline.add(c, start, end, "train", tasks[m].steps, task=tasks[m].name or m)
        event = clock.push(end, "update", task=m, client=c, sent=t, start=start, version=version[m])
        out_now[m][event] = c
        if learner is not None:
            learner.on_request(m, c, t, start, end)

    def top_up(m: int, t: float, most: int | None = None, capped: bool = True) -> None:
        free = min(control.requests[m] - active[m], control.budget - sum(active))
        for _ in range(free if most is None else min(free, most)):
            send(m, t, capped)

    def settle(t: float) -> None:
        """Cancel finished tasks' requests; record a changed allocation."""
        while control._finishing:
            m, refill = control._finishing.pop(0)
            out.finished_at[m] = t
            for event, c in out_now[m].items():
                clock.cancel(event)
                held[c] -= 1
                out.cancelled.append((m, c, t))
            active[m] = 0
            out_now[m].clear()
            if refill:
                for i in range(len(tasks)):
                    if not control.finished[i]:
                        top_up(i, t)
        if tuple(control.requests) != out.allocations[-1][1]:
            out.allocations.append((t, tuple(control.requests)))

    def state_dict(batch_end: float) -> dict:
        """The pool between two events (its requests out named by their events' numbers)."""
        return dict(clock=clock.state_dict(), fcfs=fcfs.state_dict(), held=held,
                    requests=control.requests, buffer=control.buffer, active=active, finished=control.finished,
                    finishing=control._finishing, out_now=[[[e.seq, c] for e, c in d.items()] for d in out_now],
                    version=version, buffers=buffers, batch_end=batch_end,
                    out={k: getattr(out, k) for k in ("timeline", "updates", "server_steps", "dropped",
                                                      "busy_clients", "cancelled", "finished_at", "allocations")})

    def load_state_dict(state: dict) -> float:
        """Go on from :func:`state_dict`'s ``state`` (the containers the closures hold, in place); its batch end."""
        clock.load_state_dict(state["clock"])
        live = clock.live()
        fcfs.load_state_dict(state["fcfs"])
        held[:] = state["held"]
        for mine, saved in ((control.requests, "requests"), (control.buffer, "buffer"), (active, "active"),
                            (control.finished, "finished"), (control._finishing, "finishing"), (version, "version"),
                            (buffers, "buffers")):
            mine[:] = state[saved]
        out_now[:] = [{live[seq]: c for seq, c in d} for d in state["out_now"]]
        vars(out).update(state["out"])
        return state["batch_end"]

    saved = None if checkpoint is None else checkpoint.load(learner.device)
    if saved is None:
        for m in range(len(tasks)):
            top_up(m, 0.0, capped=cap_first)
        batch_end = -np.inf
    else:
        batch_end = load_state_dict(saved["pool"])
        learner.restore(saved["learner"], clock.now)
    pops = learner is not None and hasattr(learner, "on_pop")
    popped = check_int("popped", popped, 1)
    while not all(control.finished) and clock.peek() is not None and clock.peek().time <= t_end:
        boundary(checkpoint, lambda: dict(pool=state_dict(batch_end), learner=learner.snapshot()),
                 f"at simulated time {clock.now:g}")
        e = clock.pop(timed=False)
        if pops and e.time > batch_end:                 # the code's loop pops its next batch now
            batch_end = max([e.time] + clock.earliest(popped - 1))
            learner.on_pop(e.time, batch_end)
        m, c, t = e["task"], e["client"], e.time
        del out_now[m][e]
        held[c] -= 1
        active[m] -= 1
        u = Update(m, c, e["sent"], e["start"], t, e["version"], version[m] - e["version"])
        out.updates.append(u)
        buffers[m].append(u)
        if learner is not None:
            learner.on_update(m, c, t)
        if not control.finished[m] and len(buffers[m]) >= control.buffer[m]:
            version[m] += 1
            out.server_steps[m].append(t)
            out.timeline.flush(t, [b.client for b in buffers[m]], task=tasks[m].name or m)
            if learner is not None:
                learner.on_server_step(m, t, buffers[m])
            buffers[m] = []
        settle(t)
        if not control.finished[m]:
            top_up(m, t, max_new)
        out.busy_clients.append((t, int(np.count_nonzero(held))))
    return out


__all__ = ["POPPED", "PoolTask", "Update", "PoolControl", "PoolSchedule", "simulate_pool_schedule"]
