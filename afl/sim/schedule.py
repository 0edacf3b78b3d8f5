"""Training-free schedules: who computes how many local steps, and when the server takes their updates.

One event-driven core (:class:`ClientClock`) runs every client at its own pace -- one step after the other, each of
a random duration from its :class:`~afl.sim.SpeedProfile`, up to ``K`` steps, then waiting -- and three server
policies drive it:

- :func:`simulate_async_schedule` -- FAVAS / QuAFL: every ``server_interval`` the server contacts ``s`` clients
  drawn uniformly without replacement, interrupts them and collects ``E_i ^ K`` finished steps (FAVAS Alg. 1;
  QuAFL's ``train_quantized_fl``, where the interval is the server interaction + waiting time);
- :func:`simulate_buffered_schedule` -- FedBuff: at most ``concurrency`` clients (every client in the QuAFL/FAVAS
  code) run ``K`` steps and deliver; the server steps when ``Z`` updates are buffered, then starts idle clients on
  the new model;
- :func:`simulate_sync_schedule` -- FedAvg: ``s`` clients run ``K`` steps each, the round ends with the slowest;
- :func:`simulate_arrival_schedule` -- FedBuff / QAFeL as their FLSim code runs them: clients arrive at a rate, each
  trains ``K`` steps and delivers; the server steps when ``Z`` updates are buffered;
- :func:`simulate_rounds` -- GHBM's synchronous rounds, each one unit of simulated time: ``s`` clients, sampled
  uniformly without replacement or cyclically, each run ``K`` steps (speeds play no part).

Conventions: the first server contact is at ``server_interval`` (QuAFL's contact at time 0 collects nothing); a
step ending exactly at a contact counts as finished; the step in progress at a contact is lost ("interrupted").
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from afl.checkpoint import boundary, checkpointable
from afl.errors import ParameterError, check_int, check_real
from afl.sim._rng import generator
from afl.sim.arrivals import ArrivalProcess
from afl.sim.clock import Event, EventQueue
from afl.sim.speeds import SpeedProfile
from afl.sim.timeline import Timeline

STEP, SERVER = 0, 1  # event priorities at equal times: clients finishing first, then the server
_EVENT = "__event__"  # an event in a saved policy state, by its number


@checkpointable
@dataclass(frozen=True)
class Contact:
    """The server took ``client``'s update at ``time``: ``steps`` = E_i ^ K local steps computed on a model
    ``staleness`` server steps old, since the client (re)started at ``started``."""

    time: float
    client: int
    steps: int
    cls: str
    staleness: int
    started: float


@dataclass
class ScheduleResult:
    """A simulated schedule: its timeline, every contact, and the settings that produced it."""

    kind: str
    profile: SpeedProfile
    K: int
    timeline: Timeline
    contacts: list[Contact]
    params: dict = field(default_factory=dict)

    def steps(self, cls: str | None = None) -> np.ndarray:
        """E_i ^ K of every contact (of one class if ``cls`` is given), in contact order."""
        return np.array([c.steps for c in self.contacts if cls is None or c.cls == cls], dtype=int)

    def steps_by_class(self) -> dict[str, np.ndarray]:
        return {name: self.steps(name) for name in self.profile.names}

    def steps_pmf(self, cls: str | None = None) -> np.ndarray:
        """Empirical pmf of E_i ^ K over {0..K} (zeros if there was no contact)."""
        e = self.steps(cls)
        counts = np.bincount(e, minlength=self.K + 1).astype(float)
        return counts / max(len(e), 1)

    def staleness(self, cls: str | None = None) -> np.ndarray:
        return np.array([c.staleness for c in self.contacts if cls is None or c.cls == cls], dtype=int)

    def class_shares(self) -> dict[str, float]:
        """Fraction of collected updates that came from each class (compare with the population shares)."""
        total = max(len(self.contacts), 1)
        return {name: sum(c.cls == name for c in self.contacts) / total for name in self.profile.names}

    @property
    def server_steps(self) -> int:
        return len(self.timeline.server_steps)


class ClientClock:
    """Clients computing local steps at their own pace on one :class:`EventQueue` (FAVAS Alg. 1, l. 30-36).

    ``start`` launches a client on the current model: its ``K`` step durations are drawn at once and only the end of
    the ``K``-th step is an event ("done"); ``collect`` takes its update at ``t`` (``E = #steps ended by t``,
    interrupting it if ``E < K``) and records its intervals in ``timeline``; ``server_step`` does both for a group.
    """

    def __init__(self, profile: SpeedProfile, K: int, seed=0, learner=None):
        if not isinstance(profile, SpeedProfile):
            raise ParameterError("profile", profile, "a SpeedProfile (see afl.sim.two_speed / three_speed)")
        self.profile, self.K = profile, check_int("K", K, 1)
        self.queue = EventQueue(seed)
        self.timeline = Timeline.for_profile(profile)
        self.contacts: list[Contact] = []
        self.version = 0  # server model version = server steps so far
        n = profile.n
        self._dists = [profile.step_time(i) for i in range(n)]
        self._started = np.zeros(n)
        self._ends = np.zeros((n, self.K))  # end times of the K steps of the current run
        self._model = np.zeros(n, dtype=int)
        self._active = np.zeros(n, dtype=bool)
        self._pending: list[Event | None] = [None] * n
        self.vars: dict = {}  # the server policy's own state (its buffer, ...): saved with the clock
        self.learner = learner
        if learner is not None:
            learner.progress = self.progress

    def start(self, client: int, t: float) -> None:
        """Client restarts from zero on the current server model at ``t``."""
        self._started[client] = t
        self._ends[client] = t + np.cumsum(self._dists[client].sample(self.queue.rng, self.K))
        self._model[client], self._active[client] = self.version, True
        self._pending[client] = self.queue.push(self._ends[client, -1], "done", priority=STEP, client=client)
        if self.learner is not None:
            self.learner.on_start(client, t)

    def steps_done(self, client: int, t: float) -> int:
        """Steps the client has finished by time ``t`` (a step ending exactly at ``t`` counts), at most ``K``."""
        return int(np.searchsorted(self._ends[client], t, side="right"))

    def progress(self, t: float) -> np.ndarray:
        """Steps every client has finished in its current run by time ``t`` (0 for idle-by-design clients)."""
        return np.where(self._active, (self._ends <= t).sum(axis=1), 0)

    def _record(self, client: int, t: float, tail: str) -> int:
        start, steps = self._started[client], self.steps_done(client, t)
        last = self._ends[client, steps - 1] if steps > 0 else start
        if steps > 0:
            self.timeline.add(client, start, last, "train", steps)
        if t > last:
            self.timeline.add(client, last, t, "idle" if steps == self.K else tail)
        return steps

    def collect(self, client: int, t: float) -> Contact:
        """The server takes ``client``'s update at ``t``; an unfinished step is cut off."""
        if not self._active[client]:
            raise ParameterError("client", client, "a client that is training (start it first)")
        if self._pending[client] is not None:
            self.queue.cancel(self._pending[client])
            self._pending[client] = None
        steps = self._record(client, t, "interrupted")
        self._active[client] = False
        contact = Contact(t, int(client), steps, self.profile.class_name(client),
                          self.version - int(self._model[client]), float(self._started[client]))
        self.contacts.append(contact)
        return contact

    def server_step(self, t: float, clients, restart: bool = True, flush: bool = False) -> list[Contact]:
        """Collect ``clients`` at ``t``, update the server model, and (if ``restart``) send it back to them."""
        clients = [int(c) for c in clients]
        got = [self.collect(c, t) for c in clients]
        if self.learner is not None:
            self.learner.on_server_step(t, got)
        self.version += 1
        self.timeline.server_step(t)
        if flush:
            self.timeline.flush(t, clients)
        if restart:
            for c in clients:
                self.start(c, t)
        return got

    def state_dict(self) -> dict:
        """The schedule between two events, for a checkpoint (:mod:`afl.checkpoint`): the event queue, timeline,
        contacts, every client's run, and the server policy's own state :attr:`vars` (an event there, as a client's
        pending "done", is saved as its number)."""
        pending = [-1 if e is None else e.seq for e in self._pending]
        own = {k: {_EVENT: v.seq} if isinstance(v, Event) else v for k, v in self.vars.items()}
        return dict(queue=self.queue.state_dict(), timeline=self.timeline, contacts=self.contacts,
                    version=self.version, started=self._started, ends=self._ends, model=self._model,
                    active=self._active, pending=pending, vars=own)

    def load_state_dict(self, state: dict) -> None:
        """Go on from :meth:`state_dict`'s ``state``."""
        self.queue.load_state_dict(state["queue"])
        live = self.queue.live()
        self.timeline, self.contacts, self.version = state["timeline"], state["contacts"], state["version"]
        self._started, self._ends, self._model = state["started"], state["ends"], state["model"]
        self._active = state["active"]
        self._pending = [None if seq < 0 else live[seq] for seq in state["pending"]]
        self.vars.update({k: live[v[_EVENT]] if isinstance(v, dict) and _EVENT in v else v
                          for k, v in state["vars"].items()})

    def run(self, t_end: float, begin, on_done=None, on_server=None, checkpoint=None) -> None:
        """``begin()`` (the first starts and server events), then process events up to ``t_end``: ``on_done(client,
        t)`` when a client ends its K-th step, ``on_server(event)`` for every other event. Clients still active at
        ``t_end`` get their open interval recorded up to ``t_end`` (an unfinished run is drawn as training).

        ``checkpoint`` (a :class:`afl.checkpoint.RunCheckpoint`, with a learner): go on from its saved state instead
        of ``begin()`` if it has one; between two events, save the state whenever it is due, and before stopping at
        the command's time limit (:mod:`afl.deadline`)."""
        saved = None if checkpoint is None else checkpoint.load(self.learner.w.device)
        if saved is None:
            begin()
        else:
            self.load_state_dict(saved["clock"])
            self.learner.restore(saved["learner"], self.queue.now)
        while self.queue and self.queue.peek().time <= t_end:
            boundary(checkpoint, lambda: dict(clock=self.state_dict(), learner=self.learner.snapshot()),
                     f"at simulated time {self.queue.now:g}")
            event = self.queue.pop(timed=False)
            if event.kind == "done":
                self._pending[event["client"]] = None
                if on_done is not None:
                    on_done(event["client"], event.time)
            elif on_server is not None:
                on_server(event)
        for c in map(int, np.flatnonzero(self._active)):
            steps = self.steps_done(c, t_end)
            if steps == self.K:
                self._record(c, t_end, "idle")
            elif t_end > self._started[c]:
                self.timeline.add(c, self._started[c], t_end, "train", steps)

    def result(self, kind: str, **params) -> ScheduleResult:
        return ScheduleResult(kind, self.profile, self.K, self.timeline, self.contacts, params)


def simulate_async_schedule(profile: SpeedProfile, K: int, s: int, server_interval: float, t_end: float,
                            seed=0, learner=None, checkpoint=None) -> ScheduleResult:
    """FAVAS / QuAFL schedule: contacts of ``s`` uniform clients every ``server_interval``.

    Without a ``learner`` nothing is trained; with one (see :class:`afl.algorithms.base.Learner`) it is told of
    every (re)start and server step, which is how the algorithms of :mod:`afl.algorithms` run on this schedule.
    ``checkpoint``: as in :meth:`ClientClock.run` (every schedule here takes one).
    """
    clock = ClientClock(profile, K, seed, learner)
    n = profile.n
    s = check_int("s", s, 1, n)
    server_interval = check_real("server_interval", server_interval, 0, strict_low=True)
    t_end = check_real("t_end", t_end, 0, strict_low=True)

    def begin():
        for c in range(n):
            clock.start(c, 0.0)
        clock.queue.push(server_interval, "server", priority=SERVER)

    def on_server(event):
        clock.server_step(event.time, clock.queue.rng.choice(n, size=s, replace=False))
        clock.queue.push(event.time + server_interval, "server", priority=SERVER)

    clock.run(t_end, begin, on_server=on_server, checkpoint=checkpoint)
    return clock.result("async", s=s, server_interval=server_interval, t_end=t_end, seed=seed)


def simulate_buffered_schedule(profile: SpeedProfile, K: int, Z: int, t_end: float, seed=0, server_time: float = 0.0,
                               concurrency: int | None = None, learner=None, checkpoint=None) -> ScheduleResult:
    """FedBuff schedule: at most ``concurrency`` clients run ``K`` steps; the server steps when ``Z`` have delivered.

    Deliveries are taken first come, first served. A server step takes ``server_time`` (QuAFL code: the
    interaction time): deliveries arriving meanwhile wait in the buffer for the next step. After a step, the
    ``Z`` clients it took are idle, and clients drawn uniformly from all idle ones start on the new model
    until ``concurrency`` are in flight (training or waiting in the buffer); at time 0, ``concurrency``
    uniform clients start. ``concurrency=None`` (every client; the QuAFL/FAVAS code): no draw is needed,
    the ``Z`` clients of a step restart at once. ``learner``, ``checkpoint``: as in :func:`simulate_async_schedule`.
    """
    clock = ClientClock(profile, K, seed, learner)
    n = profile.n
    Z = check_int("Z", Z, 1, n)
    cap = n if concurrency is None else check_int("concurrency", concurrency, Z, n, hint="Z to n, or None for every client")
    t_end, server_time = check_real("t_end", t_end, 0, strict_low=True), check_real("server_time", server_time, 0)
    v = clock.vars
    v.update(buffer=[], free_at=0.0, wake=None, in_flight=np.zeros(n, dtype=bool))

    def launch(t, k):
        """Start k clients drawn uniformly from the idle ones (all of them, in order, if k are idle)."""
        idle = np.flatnonzero(~v["in_flight"])
        chosen = idle if k == len(idle) else clock.queue.rng.choice(idle, size=k, replace=False)
        for c in map(int, chosen):
            v["in_flight"][c] = True
            clock.start(c, t)

    def maybe_step(t):
        buffer = v["buffer"]
        if len(buffer) < Z:
            return
        if t < v["free_at"]:
            if v["wake"] is None:
                v["wake"] = clock.queue.push(v["free_at"], "server", priority=SERVER)
            return
        group = buffer[:Z]
        del buffer[:Z]
        clock.server_step(t, group, restart=concurrency is None, flush=True)
        if concurrency is not None:
            v["in_flight"][group] = False
            launch(t, cap - int(v["in_flight"].sum()))
        v["free_at"] = t + server_time
        maybe_step(t)

    def on_done(client, t):
        v["buffer"].append(client)
        maybe_step(t)

    def on_server(event):
        v["wake"] = None
        maybe_step(event.time)

    def begin():
        if concurrency is None:
            v["in_flight"][:] = True
            for c in range(n):
                clock.start(c, 0.0)
        else:
            launch(0.0, cap)

    clock.run(t_end, begin, on_done=on_done, on_server=on_server, checkpoint=checkpoint)
    return clock.result("buffered", Z=Z, t_end=t_end, seed=seed, server_time=server_time, concurrency=concurrency)


def simulate_arrival_schedule(profile: SpeedProfile, K: int, Z: int, arrivals: ArrivalProcess, t_end: float,
                              seed=0, concurrency: int | None = None, learner=None, checkpoint=None) -> ScheduleResult:
    """FedBuff schedule with arrivals (QAFeL App. D; FLSim's asynchronous trainer): at every arrival of
    ``arrivals`` one client drawn uniformly from the idle ones starts ``K`` steps on the current model (its step
    times from ``profile``: QAFeL's one step of HalfNormal(1) duration); finished clients deliver, first come,
    first served, and the server steps, instantly, each time ``Z`` updates are buffered; the clients it took are
    idle again. How many train at once follows from the rate (Little's law, :func:`afl.sim.rate_for_concurrency`);
    ``concurrency`` caps it, and an arrival finding the cap reached (or no idle client) is turned away
    (``params["turned_away"]`` counts them). Staleness is recorded per update in the contacts. ``checkpoint``: as
    in :func:`simulate_async_schedule`.
    """
    clock = ClientClock(profile, K, seed, learner)
    n = profile.n
    Z = check_int("Z", Z, 1, n)
    cap = n if concurrency is None else check_int("concurrency", concurrency, 1, n, hint="1 to n, or None: no cap")
    t_end = check_real("t_end", t_end, 0, strict_low=True)
    if not isinstance(arrivals, ArrivalProcess):
        raise ParameterError("arrivals", arrivals, "an ArrivalProcess (afl.sim.make_arrivals)")
    rng, v = clock.queue.rng, clock.vars
    v.update(buffer=[], in_flight=np.zeros(n, dtype=bool), turned_away=0)

    def arrive(t):
        idle = np.flatnonzero(~v["in_flight"])
        if len(idle) == 0 or n - len(idle) >= cap:
            v["turned_away"] += 1
        else:
            c = int(rng.choice(idle))
            v["in_flight"][c] = True
            clock.start(c, t)
        clock.queue.push(float(arrivals.next_times(rng, t, 1)[0]), "arrival", priority=SERVER)

    def on_done(client, t):
        buffer = v["buffer"]
        buffer.append(client)
        if len(buffer) == Z:
            group = buffer[:]
            buffer.clear()
            clock.server_step(t, group, restart=False, flush=True)
            v["in_flight"][group] = False

    def begin():
        clock.queue.push(float(arrivals.next_times(rng, 0.0, 1)[0]), "arrival", priority=SERVER)

    clock.run(t_end, begin, on_done=on_done, on_server=lambda event: arrive(event.time), checkpoint=checkpoint)
    return clock.result("arrivals", Z=Z, t_end=t_end, seed=seed, rate=arrivals.rate, arrivals=arrivals.kind,
                        concurrency=concurrency, turned_away=v["turned_away"])


def simulate_sync_schedule(profile: SpeedProfile, K: int, s: int, t_end: float, seed=0, server_time: float = 0.0,
                           learner=None, checkpoint=None) -> ScheduleResult:
    """FedAvg schedule: each round ``s`` uniform clients run ``K`` steps; it ends ``server_time`` after the slowest.

    ``server_time``: the server's interaction time added to every round (QuAFL code, ``train_Fed_Avg``).
    ``learner``, ``checkpoint``: as in :func:`simulate_async_schedule`.
    """
    clock = ClientClock(profile, K, seed, learner)
    n = profile.n
    s = check_int("s", s, 1, n)
    t_end, server_time = check_real("t_end", t_end, 0, strict_low=True), check_real("server_time", server_time, 0)
    v = clock.vars
    v.update(chosen=[], waiting=[])     # the round's clients, and those not yet done (in the order they started)

    def new_round(t):
        v["chosen"] = [int(c) for c in clock.queue.rng.choice(n, size=s, replace=False)]
        v["waiting"] = list(v["chosen"])
        if learner is not None:
            learner.on_round(t, list(v["chosen"]))
        for c in v["chosen"]:
            clock.start(c, t)

    def on_done(client, t):
        v["waiting"].remove(client)
        if not v["waiting"]:
            clock.queue.push(t + server_time, "server", priority=SERVER)

    def on_server(event):
        clock.server_step(event.time, v["chosen"], restart=False)
        new_round(event.time)

    clock.run(t_end, lambda: new_round(0.0), on_done=on_done, on_server=on_server, checkpoint=checkpoint)
    return clock.result("sync", s=s, t_end=t_end, seed=seed, server_time=server_time)


SAMPLINGS = ("uniform", "cyclic")


@checkpointable
class RoundSampler:
    """Who takes part in round r (GHBM, Zaccone et al. 2024, Sec. 5 and App. C.9).

    ``"uniform"``: ``s`` of the ``n`` clients, uniformly without replacement, afresh every round.
    ``"cyclic"``: the clients, shuffled once, are cut into ``n / s`` groups taken in turn (Assumption 4.3):
    every client then takes part exactly every ``n / s`` rounds.
    """

    def __init__(self, n: int, s: int, sampling: str = "uniform", seed=0):
        if sampling not in SAMPLINGS:
            raise ParameterError("sampling", sampling, f"one of {', '.join(SAMPLINGS)}")
        self.n, self.s = check_int("n", n, 1), check_int("s", s, 1, n, hint="n, the number of clients")
        if sampling == "cyclic" and n % s:
            raise ParameterError("s", s, f"a divisor of n = {n} for cyclic sampling (n / s groups of s clients)")
        self.sampling = sampling
        self.rng = generator(seed)
        self.order = self.rng.permutation(n)

    def __call__(self, r: int) -> list[int]:
        if self.sampling == "cyclic":
            g = r % (self.n // self.s)
            return [int(c) for c in self.order[g * self.s:(g + 1) * self.s]]
        return [int(c) for c in self.rng.choice(self.n, size=self.s, replace=False)]


def simulate_rounds(profile: SpeedProfile, K: int, s: int, t_end: float, seed=0, sampling: str = "uniform",
                    learner=None, checkpoint=None) -> ScheduleResult:
    """Synchronous rounds of one simulated time unit each (GHBM: "simulated time is rounds").

    Round r runs over ``[r, r + 1)``: the :class:`RoundSampler` picks ``s`` clients, each starts at r and
    delivers ``K`` steps at r + 1, where the server steps. ``floor(t_end)`` rounds are run; ``profile`` only
    names the clients' classes for the timeline. ``learner``: as in :func:`simulate_async_schedule`.
    ``checkpoint`` (a :class:`afl.checkpoint.RunCheckpoint`, with a learner): go on from its saved round if it
    has one, and save the state at the end of a round whenever it is due, and before stopping at the command's time
    limit (:mod:`afl.deadline`).
    """
    K = check_int("K", K, 1)
    t_end = check_real("t_end", t_end, 1, hint="at least one round")
    sampler = RoundSampler(profile.n, s, sampling, seed)
    timeline, contacts, start = Timeline.for_profile(profile), [], 0
    saved = checkpoint.load(learner.w.device) if checkpoint is not None else None
    if saved is not None:
        start, sampler, timeline, contacts = saved["round"], saved["sampler"], saved["timeline"], saved["contacts"]
        learner.restore(saved["learner"], float(start))
    for r in range(start, int(t_end)):
        chosen = sampler(r)
        if learner is not None:
            learner.on_round(float(r), chosen)
            for c in chosen:
                learner.on_start(c, float(r))
        got = [Contact(float(r + 1), c, K, profile.class_name(c), 0, float(r)) for c in chosen]
        for c in chosen:
            timeline.add(c, r, r + 1, "train", K)
        contacts.extend(got)
        if learner is not None:
            learner.on_server_step(float(r + 1), got)
        timeline.server_step(float(r + 1))
        if r + 1 < int(t_end):
            boundary(checkpoint, lambda: dict(round=r + 1, sampler=sampler, timeline=timeline, contacts=contacts,
                                              learner=learner.snapshot()), f"after round {r + 1}")
    return ScheduleResult("rounds", profile, K, timeline, contacts,
                          dict(s=s, t_end=t_end, seed=seed, sampling=sampling))
