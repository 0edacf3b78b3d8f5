"""What every federated run shares: the federation (clients, data, engine, speeds), its history, the
settings every algorithm has, and the learner interface.

An algorithm is a *learner* plugged into one of the simulator's protocols (:mod:`afl.sim.schedule`): the
protocol decides when clients start, how many local steps they finish and when the server takes their
updates; the learner decides what they train from, what they send and how the server aggregates.
:class:`History` evaluates the server model on a fixed grid of simulated times, so methods with very
different round lengths are compared at the same moments (FAVAS Sec. 5, "total simulation time").
"""
from __future__ import annotations

import copy
import time as _wall
from collections import deque
from types import FunctionType
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..engine import LocalSGD
from ..errors import check, check_int, check_real
from ..jobs import Evaluation, Job, JobQueue, SavedJobs
from ..results import report_progress
from ..runtime import cpu_kind
from ..sim.schedule import Contact
from ..sim.speeds import SpeedProfile
from .state import ClientState


@dataclass
class Federation:
    """n clients: their lazy local trainer, their speeds, the initial model and the run's seed.

    ``bits_per_param``: width of an unquantized parameter on the wire (32 for float32). Every run on a federation
    starts its random streams (mini-batches, augmentation, dropout) where they stood when it was made
    (:meth:`restart`), so two runs on one federation are paired: same seed, same batches.
    """

    queue: JobQueue
    profile: SpeedProfile
    init: Tensor
    seed: int = 0
    bits_per_param: int = 32

    def __post_init__(self):
        check(self.profile.n == len(self.queue.streams), "profile", f"{self.profile.n} clients",
              f"one speed per client of the partition ({len(self.queue.streams)})")
        self._start = copy.deepcopy(self.queue.state_dict())

    def restart(self) -> None:
        """Put the random streams back where they stood when the federation was made (a run begins here)."""
        self.queue.cancel_jobs()
        self.queue.load_state_dict(copy.deepcopy(self._start))

    @property
    def n(self) -> int:
        return self.profile.n

    @property
    def engine(self) -> LocalSGD:
        return self.queue.engine

    @property
    def model_bytes(self) -> int:
        return self.init.numel() * self.bits_per_param // 8


class TargetReached(Exception):
    """Raised by :meth:`History.record` once the server model reaches the target accuracy; it ends the run."""


@dataclass
class History:
    """Accuracy, loss and costs of the server model on a grid of simulated times ``0, Δ, 2Δ, ... <= T``.

    ``record(now, model)`` is called *before* the server model changes at simulated time ``now``: every grid
    point before ``now`` gets the model that held there, and a grid point *at* ``now`` is left to the next call, so
    that it sees every server step at or before it, as the papers' loops evaluate after the round.
    ``finish(model)`` fills the grid to the end, ``total_time`` included.
    Evaluations are lazy (:meth:`afl.jobs.JobQueue.evaluate`): they run with the next local training, many
    models at once, and :attr:`series` holds their values. With a ``target`` accuracy every evaluation is
    awaited, and the first one at or above it raises :class:`TargetReached` (QAFeL's "uploads to reach the
    target": the run stops there, ``reached`` is that grid time and ``reached_accuracy`` the accuracy it tested).
    """

    queue: JobQueue
    eval_every: float
    total_time: float
    target: float | None = None
    counters: dict = field(default_factory=lambda: dict(server_steps=0, client_steps=0, uploads=0, bytes_up=0,
                                                        bytes_down=0))
    wall_start: float = field(default_factory=_wall.perf_counter)

    def __post_init__(self):
        check(self.eval_every > 0, "eval_every", self.eval_every, "a positive simulated time")
        check(self.total_time > 0, "total_time", self.total_time, "a positive simulated time")
        if self.target is not None:
            check_real("target", self.target, 0, 1, strict_low=True, hint="an accuracy in (0, 1]")
        self.reached: float | None = None
        self.reached_accuracy: float | None = None
        self.resumed_at: list[float] = []       # simulated times at which the run went on from a checkpoint
        self._earlier: list[tuple] = []         # (CPU kind, PyTorch threads) of each sitting before this one
        self._next = 0.0
        self._rows: list[tuple[float, Evaluation, dict]] = []
        self._shown = 0.0                       # the fraction of the run the progress bar was last told
        self._done = 0.0                        # every server step before this simulated time is done

    def _progress(self, now: float) -> None:
        """Tell the progress bar how far the run is (its server steps done up to ``now``) at each server step, not
        only at evaluations, which may lie many minutes apart; at most once a thousandth of the run, and at its end."""
        fraction = min(now, self.total_time) / self.total_time
        if fraction > self._shown and (fraction - self._shown >= 1e-3 or fraction == 1.0):
            self._shown = fraction
            report_progress(fraction)

    @property
    def next_eval(self) -> float:
        return self._next

    def due(self, now: float, inclusive: bool = False) -> bool:
        """Whether a grid point not yet recorded lies before ``now`` (at or before it where ``inclusive``, or where
        ``now`` is past the end), within ``total_time``."""
        return self._fills(self._next, now, inclusive)

    def _fills(self, time: float, now: float, inclusive: bool) -> bool:
        if inclusive or now > self.total_time + 1e-9:
            return time <= min(now, self.total_time) + 1e-9
        return time < now - 1e-9

    def record(self, now: float, model: Tensor, inclusive: bool = False, **extra) -> None:
        """Evaluate ``model`` for every grid time before ``now`` not yet recorded (``inclusive``: at ``now`` too,
        where ``model`` is what holds at ``now``, every step at ``now`` done)."""
        # called before the step at ``now`` (whose training may not have run yet): the steps done end at the last call
        self._progress(now if inclusive else self._done)
        self._done = now
        times = self.pending(now, inclusive)
        if not times:
            return
        evaluation = self.queue.evaluate(model)
        row = dict(self.counters, **{k: float(v) for k, v in extra.items()})
        self._rows += [(time, evaluation, row) for time in times]
        self._next = round(times[-1] + self.eval_every, 9)
        if self.target is not None and evaluation.value()["accuracy"] >= self.target:
            self.reached, self.reached_accuracy = times[0], evaluation.value()["accuracy"]
            raise TargetReached(times[0])

    def pending(self, now: float, inclusive: bool = False) -> list[float]:
        """The grid times not yet recorded that a :meth:`record` at ``now`` fills (:meth:`due`, point by point)."""
        times, time = [], self._next
        while self._fills(time, now, inclusive):
            times.append(time)
            time = round(time + self.eval_every, 9)
        return times

    def reach(self, now: float, model: Tensor) -> None:
        """With a ``target``: test ``model``, made by a server step at ``now``, at once; at or above the target, the
        run reached it at ``now`` (:class:`TargetReached`), as the papers (and FedAST's code) test after an
        aggregation rather than on the evaluation grid."""
        if self.target is None or self.reached is not None:
            return
        accuracy = self.queue.evaluate(model).value()["accuracy"]
        if accuracy >= self.target:
            self.reached, self.reached_accuracy = now, accuracy
            raise TargetReached(now)

    def finish(self, model: Tensor, **extra) -> None:
        """Every grid point left, ``total_time`` included, gets ``model`` (the last server step is done)."""
        self.record(self.total_time, model, inclusive=True, **extra)

    def state_dict(self) -> dict:
        """The grid so far (pending evaluations as their models: saving computes nothing), the counters and the
        wall time so far, for a checkpoint (:mod:`afl.checkpoint`)."""
        rows = [(t, e.value() if e.done else e.model, row) for t, e, row in self._rows]
        return dict(rows=rows, next=self._next, counters=dict(self.counters), reached=self.reached,
                    reached_accuracy=self.reached_accuracy,
                    resumed_at=list(self.resumed_at), sittings=[list(s) for s in self._sittings()],
                    wall=_wall.perf_counter() - self.wall_start)

    def load_state_dict(self, state: dict, now: float) -> None:
        """Go on from ``state``, resumed at simulated time ``now``: models not yet evaluated are queued again."""
        self._rows = [(t, Evaluation.known(self.queue, e) if isinstance(e, dict) else self.queue.evaluate(e), row)
                      for t, e, row in state["rows"]]
        self._next, self.reached = state["next"], state["reached"]
        self.reached_accuracy = state.get("reached_accuracy")
        check(self.reached is None or self.reached_accuracy is not None, "checkpoint", "a run stopped at its target",
              "a checkpoint that keeps the accuracy that reached the target (this one was written by an earlier afl: "
              "start the run over with --fresh)")
        self.counters.update(state["counters"])
        self.resumed_at = state["resumed_at"] + [now]
        self._earlier = _sittings_of(state, len(self.resumed_at))
        self.wall_start = _wall.perf_counter() - state["wall"]
        self._shown, self._done = min(now, self.total_time) / self.total_time, now
        report_progress(self._shown, resumed=True)   # a head start, not speed

    def _sittings(self) -> list[tuple]:
        """(CPU kind, PyTorch threads) of every sitting of the run, this one last."""
        return self._earlier + [(cpu_kind(), torch.get_num_threads())]

    @property
    def series(self) -> dict[str, list]:
        """``time``, ``accuracy``, ``loss``, the counters and any extra value, one entry per grid time so far."""
        out: dict[str, list] = {}
        for time, evaluation, row in self._rows:
            for k, v in dict(time=time, **evaluation.value(), **row).items():
                out.setdefault(k, []).append(v)
        return out

    def to_dict(self) -> dict:
        """``curve`` (every series on the grid) plus the run's totals and speed (``wall_seconds``: its compute time,
        over every sitting of a run resumed from checkpoints, whose ``resumed_at`` lists the simulated times, and
        ``sitting_cpus`` the CPU kind of each sitting where they were not all alike: the same seed rounds otherwise on
        another kind of CPU; ``sitting_threads`` likewise each sitting's PyTorch threads where those recorded differ:
        a kernel's sums split over another number of threads round otherwise)."""
        series = self.series
        wall = _wall.perf_counter() - self.wall_start
        computed = self.queue.client_steps
        acc = series.get("accuracy", [])
        resumed = {"resumed_at": self.resumed_at} if self.resumed_at else {}
        sittings = self._sittings() if self.resumed_at else []
        cpus, threads = [c for c, _ in sittings], [t for _, t in sittings]
        if len(set(cpus)) > 1:
            resumed["sitting_cpus"] = cpus
        if len({t for t in threads if t is not None}) > 1:
            resumed["sitting_threads"] = threads
        return {"curve": series, "final_accuracy": acc[-1] if acc else None, **self.counters,
                "target": self.target, "target_reached_at": self.reached,
                "target_reached_accuracy": self.reached_accuracy,
                "computed_client_steps": computed, "wall_seconds": wall,
                "client_steps_per_s": computed / wall if wall > 0 else None, **resumed}


def _sittings_of(state: dict, count: int) -> list[tuple]:
    """(CPU kind, PyTorch threads) of each of the ``count`` sittings recorded in a checkpoint's history: as afl records
    them now, or from an earlier afl's two lists (its threads unknown, None, before it recorded them; its CPU kind
    'not recorded' before that)."""
    if "sittings" in state:
        return [tuple(s) for s in state["sittings"]]
    cpus = state.get("cpus", ["not recorded (an earlier afl)"] * count)
    return list(zip(cpus, state.get("threads", [None] * count)))


@dataclass(frozen=True)
class Settings:
    """What every algorithm's clients share: ``K`` local SGD steps at learning rate ``lr`` (defaults: the FAVAS
    paper's MNIST setting). Each algorithm extends this dataclass with its own settings and their paper
    defaults; values are checked on construction, and against the federation by :meth:`check_federation`."""

    K: int = 20
    lr: float = 0.5

    def __post_init__(self):
        check_int("K", self.K, 1)
        check_real("lr", self.lr, 0, strict_low=True)

    def check_federation(self, fed: Federation) -> None:
        """Checks that need the number of clients (``s <= n``, ...); nothing by default."""


class Learner:
    """Model-side half of an algorithm, driven by a protocol of :mod:`afl.sim.schedule`.

    ``on_round(t, clients)``: (synchronous protocols) a round of ``clients`` begins at t.
    ``on_start(client, t)``: the client (re)starts local training at simulated time t.
    ``on_server_step(t, contacts)``: the server takes the contacted clients' updates at t.
    ``self.clients``: the :class:`ClientState` store of per-client tensors that live across rounds.
    """

    def __init__(self, fed: Federation, history: History, cfg: Settings):
        self.fed, self.history, self.cfg = fed, history, cfg
        self.K, self.lr = cfg.K, float(cfg.lr)
        self.queue = fed.queue
        self.w = fed.init.clone()
        self.clients = ClientState(fed.n, self.w)

    @classmethod
    def gradients_per_job(cls, K: int, batches: int) -> int:
        """Mini-batch gradients one client's job of ``K`` local steps costs, its data being ``batches`` batches
        (a method that also takes a full-batch gradient, :meth:`afl.jobs.JobQueue.full_gradient`, pays them): what
        a plan prices (:attr:`afl.budget.Work.gradients`). Plain local SGD: one a step."""
        return K

    def on_round(self, t: float, clients: list[int]) -> None:
        """Synchronous protocols: ``clients`` are about to start a round at ``t`` (before their ``on_start``)."""

    def on_start(self, client: int, t: float) -> None:
        raise NotImplementedError

    def on_server_step(self, t: float, contacts: list[Contact]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Evaluate the grid points left after the last server step."""
        self.history.finish(self.w)

    #: attributes that wire the learner to its run, not state of its own
    WIRING = ("fed", "history", "cfg", "queue")

    def snapshot(self) -> dict:
        """The run's state between two server steps or events, for a checkpoint (:mod:`afl.checkpoint`): every
        attribute holding data (the server model, momenta, past models, the client store, counters, the jobs of
        clients still training: pending as what they were submitted with, finished as their result), the state of
        an attribute that keeps its own (a quantizer's generators: ``state_dict``), the history and the job queue.
        Functions (correction hooks) are what ``__init__`` builds from the settings, and are built again; an
        attribute of any other kind is a ``TypeError`` (it could not be saved)."""
        hooks, saved = self._hooks(), SavedJobs([self.queue])
        data = {}
        for name, value in vars(self).items():
            if name in self.WIRING or callable(value):
                continue
            if hasattr(value, "state_dict") and hasattr(value, "load_state_dict"):
                data[name] = {_OWN: value.state_dict()}
                continue
            if not _is_data(value):
                raise TypeError(f"{type(self).__name__}.{name} ({type(value).__name__}) is neither data nor a "
                                "function: a checkpoint cannot hold it")
            data[name] = saved.encode(value)
        return dict(learner=data, history=self.history.state_dict(), queue=self.queue.state_dict(hooks))

    def restore(self, snapshot: dict, now: float) -> None:
        """Go on from a :meth:`snapshot`, at simulated time ``now``."""
        jobs, saved = [self.queue.load_state_dict(snapshot["queue"], self._hooks())], SavedJobs([self.queue])
        for name, value in snapshot["learner"].items():
            if isinstance(value, dict) and _OWN in value:
                getattr(self, name).load_state_dict(value[_OWN])
            else:
                setattr(self, name, saved.decode(value, jobs))
        self.history.load_state_dict(snapshot["history"], now)

    def _hooks(self) -> dict:
        """The corrections a job of this learner may carry, by attribute name: what it or its class holds that is
        called but is no method (built again by ``__init__``, or the class's own)."""
        found = {name: value for cls in reversed(type(self).__mro__) for name, value in vars(cls).items()
                 if callable(value) and not isinstance(value, (FunctionType, type, staticmethod))}
        found.update((name, value) for name, value in vars(self).items() if name not in self.WIRING and callable(value))
        return found

    def message_bytes(self) -> int:
        """Bytes of one model on the wire (uploads and downloads alike)."""
        return self.fed.model_bytes

    def count(self, contacts: list[Contact], uploads: int | None = None, downloads: int | None = None,
              up_messages: float = 1, down_messages: float = 1) -> None:
        """Count a server step: its clients' steps, ``uploads`` (default: one per contact) and ``downloads``,
        each of ``up_messages`` / ``down_messages`` model-sized messages (SCAFFOLD: 2 each way; a fraction of a
        model counts its share of the bytes)."""
        c = self.history.counters
        uploads = len(contacts) if uploads is None else uploads
        c["server_steps"] += 1
        c["client_steps"] += sum(x.steps for x in contacts)
        c["uploads"] += uploads
        c["bytes_up"] += round(uploads * up_messages * self.message_bytes())
        c["bytes_down"] += round((len(contacts) if downloads is None else downloads) * down_messages
                                 * self.message_bytes())


#: an attribute's own state (``state_dict``) in a snapshot, under this key
_OWN = "__state__"


def _is_data(value) -> bool:
    """Tensors, arrays, numbers, strings, generators, client stores, jobs and containers of them: what a learner's
    state is made of."""
    if isinstance(value, (Tensor, np.ndarray, np.generic, np.random.Generator, ClientState, Job, int, float, str,
                          type(None))):
        return True
    if isinstance(value, dict):
        return all(_is_data(v) for v in value.values())
    return isinstance(value, (list, tuple, deque)) and all(_is_data(v) for v in value)


def model_variance(server: Tensor, clients: Tensor) -> float:
    """FAVAS Fig. 2's variance: ``sum_i ||w_i - w||^2`` over all clients' current local models."""
    return float(((clients - server) ** 2).sum())


__all__ = ["Federation", "History", "TargetReached", "Settings", "Learner", "model_variance"]
