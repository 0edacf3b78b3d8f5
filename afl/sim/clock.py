"""A seeded simulated clock: a priority queue of timed events.

Events pop in order of ``(time, priority, insertion order)``: equal times are broken by ``priority`` (lower first,
default 0) and then first-pushed first-popped, so a run is a deterministic function of its seed. The queue owns the
run's random generator (``queue.rng``) so that every draw of a simulation comes from one seeded stream. Past the
command's time limit (:mod:`afl.deadline`) the clock stops: ``pop`` raises :class:`afl.deadline.TimeLimit`.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from afl import deadline
from afl.errors import check_int, check_real
from afl.sim._rng import generator


@dataclass(eq=False)
class Event:
    """Something that happens at ``time``: ``kind`` names it, ``payload`` carries its data."""

    time: float
    kind: str
    payload: dict = field(default_factory=dict)
    priority: int = 0
    seq: int = 0
    cancelled: bool = False

    def __getitem__(self, key):
        return self.payload[key]


class EventQueue:
    """Simulated clock. ``push`` schedules, ``pop`` advances ``now`` to the earliest live event and returns it."""

    def __init__(self, seed=None, start: float = 0.0):
        self.rng = generator(seed)
        self._now = check_real("start", start)
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0
        self._live = 0

    @property
    def now(self) -> float:
        """Time of the last popped event (``start`` before any pop). Never decreases."""
        return self._now

    def push(self, time: float, kind: str, priority: int = 0, **payload) -> Event:
        """Schedule an event at ``time >= now``; returns it (keep it to :meth:`cancel` it)."""
        t = check_real("time", time, self._now, hint="now: the clock never goes back")
        priority = check_int("priority", priority)
        event = Event(t, str(kind), payload, priority, self._seq)
        heapq.heappush(self._heap, (t, priority, self._seq, event))
        self._seq += 1
        self._live += 1
        return event

    def cancel(self, event: Event) -> None:
        """Drop a pushed event that has not been popped yet (a no-op if already cancelled)."""
        if not event.cancelled:
            event.cancelled = True
            self._live -= 1

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][3].cancelled:
            heapq.heappop(self._heap)

    def peek(self) -> Event | None:
        """The next event without removing it, or None if the queue is empty."""
        self._drop_cancelled()
        return self._heap[0][3] if self._heap else None

    def earliest(self, k: int) -> list[float]:
        """The times of the ``k`` earliest live events (fewer where fewer are pending), without removing them."""
        return [t for t, _, _, e in heapq.nsmallest(k + self._cancelled_in_heap(), self._heap) if not e.cancelled][:k]

    def _cancelled_in_heap(self) -> int:
        return len(self._heap) - self._live

    def pop(self, timed: bool = True) -> Event:
        """Remove and return the earliest event and move the clock to its time (:class:`afl.deadline.TimeLimit` past
        the command's time limit, unless not ``timed``: a caller that checks the limit itself, to save first)."""
        if timed:
            deadline.check()
        self._drop_cancelled()
        if not self._heap:
            raise IndexError("pop from an empty EventQueue")
        event = heapq.heappop(self._heap)[3]
        event.cancelled = True  # popped: cancelling it later must not change the count
        self._live -= 1
        self._now = event.time
        return event

    def __len__(self) -> int:
        return self._live

    def __bool__(self) -> bool:
        return self._live > 0

    def state_dict(self) -> dict:
        """The clock between two events, for a checkpoint (:mod:`afl.checkpoint`): ``now``, the insertion counter,
        the generator's state and every live event as ``(time, kind, payload, priority, seq)`` (payloads of plain
        values); an event is named by its ``seq`` (:meth:`live`)."""
        events = sorted((e.time, e.kind, dict(e.payload), e.priority, e.seq) for *_, e in self._heap if not e.cancelled)
        return dict(now=self._now, seq=self._seq, rng=self.rng.bit_generator.state, events=events)

    def load_state_dict(self, state: dict) -> None:
        """Go on from :meth:`state_dict`'s ``state`` (the generator in place: whoever holds ``rng`` keeps it)."""
        self.rng.bit_generator.state = state["rng"]
        self._now, self._seq = state["now"], state["seq"]
        self._heap = [(t, p, seq, Event(t, kind, payload, p, seq)) for t, kind, payload, p, seq in state["events"]]
        heapq.heapify(self._heap)
        self._live = len(self._heap)

    def live(self) -> dict[int, Event]:
        """The live events by their ``seq`` (a restored clock's events are new objects: find them here)."""
        return {e.seq: e for *_, e in self._heap if not e.cancelled}

    def __repr__(self):
        return f"EventQueue(now={self._now:g}, pending={self._live})"
