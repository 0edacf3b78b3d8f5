"""Record of a simulated run for pictures: who trained when, server steps, buffer flushes.

Interval labels used by the schedulers (any string is allowed):

- ``"train"``: computing local steps (``steps`` = steps finished in the interval),
- ``"interrupted"``: a step cut off by the server's contact, its work is lost (FAVAS/QuAFL),
- ``"idle"``: done with its ``K`` steps, waiting for the server,
- ``"upload"`` / ``"queued"``: communicating, or waiting in a client's FCFS queue (FedAST).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from afl.checkpoint import checkpointable
from afl.errors import check, check_int, check_real


@checkpointable
@dataclass(frozen=True)
class Interval:
    """Client ``client`` was doing ``label`` from ``start`` to ``end`` (for model/task ``task``)."""

    client: int
    start: float
    end: float
    label: str = "train"
    steps: int = 0
    task: object = None

    @property
    def duration(self) -> float:
        return self.end - self.start


@checkpointable
@dataclass(frozen=True)
class Flush:
    """The server emptied its buffer at ``time``; ``clients`` are the updates it held (FedBuff, FedAST)."""

    time: float
    clients: tuple
    task: object = None


@checkpointable
class Timeline:
    """Intervals per client plus server steps and flushes; ``client_class`` maps client id -> class name."""

    def __init__(self, client_class: Mapping[int, str] | Sequence[str] | None = None,
                 class_order: Sequence[str] | None = None):
        if client_class is None:
            client_class = {}
        elif not isinstance(client_class, Mapping):
            client_class = dict(enumerate(client_class))
        self.client_class: dict[int, str] = {int(k): str(v) for k, v in client_class.items()}
        seen = list(dict.fromkeys(self.client_class.values()))
        self.class_order: tuple[str, ...] = tuple(class_order) if class_order is not None else tuple(seen)
        self.intervals: list[Interval] = []
        self.server_steps: list[float] = []
        self.flushes: list[Flush] = []

    @classmethod
    def for_profile(cls, profile) -> "Timeline":
        """An empty timeline knowing the speed class of every client of a :class:`~afl.sim.SpeedProfile`."""
        return cls([profile.class_name(i) for i in range(profile.n)], class_order=profile.names)

    def add(self, client: int, start: float, end: float, label: str = "train", steps: int = 0,
            task=None) -> Interval:
        """Record an interval; ``end >= start`` is required."""
        start, end = check_real("start", start), check_real("end", end)
        check(end >= start, "end", end, f"a time >= start ({start:g})")
        item = Interval(check_int("client", client, 0), start, end, str(label), check_int("steps", steps, 0), task)
        self.intervals.append(item)
        return item

    def server_step(self, time: float) -> None:
        """Record a server model update at ``time``."""
        self.server_steps.append(check_real("time", time))

    def flush(self, time: float, clients=(), task=None) -> Flush:
        """Record a buffer flush at ``time`` holding updates from ``clients``."""
        item = Flush(check_real("time", time), tuple(int(c) for c in clients), task)
        self.flushes.append(item)
        return item

    def class_of(self, client: int) -> str | None:
        return self.client_class.get(client)

    def clients(self) -> list[int]:
        """Every client seen (in intervals, flushes or the class map), ascending."""
        ids = set(self.client_class) | {i.client for i in self.intervals}
        ids |= {c for f in self.flushes for c in f.clients}
        return sorted(ids)

    def for_client(self, client: int) -> list[Interval]:
        """Intervals of one client, in start order."""
        return sorted((i for i in self.intervals if i.client == client), key=lambda i: (i.start, i.end))

    def total(self, label: str, client: int | None = None) -> float:
        """Summed duration of intervals with ``label`` (of one client, or of all)."""
        return sum(i.duration for i in self.intervals if i.label == label and (client is None or i.client == client))

    def steps_done(self, client: int | None = None) -> int:
        """Local steps recorded (of one client, or of all)."""
        return sum(i.steps for i in self.intervals if client is None or i.client == client)

    @property
    def t_end(self) -> float:
        """Latest time recorded (0 for an empty timeline)."""
        times = [i.end for i in self.intervals] + self.server_steps + [f.time for f in self.flushes]
        return max(times, default=0.0)

    def __repr__(self):
        return (f"Timeline({len(self.clients())} clients, {len(self.intervals)} intervals, "
                f"{len(self.server_steps)} server steps, {len(self.flushes)} flushes)")
