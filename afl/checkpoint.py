"""Checkpoints inside a long run: its whole state between two rounds or two events, so that a run longer than a
sitting goes on where it stopped.

A finished run is saved at once (:class:`afl.results.PartialRuns`); a run of hours -- GHBM's Shakespeare column on
a CPU, over 3 hours a MIME run on one core, QAFeL's paper protocol -- also saves its state every ``every_s`` seconds
of wall time into one file, and before it stops at the command's time limit (:mod:`afl.deadline`). Started again
with the same file, the run restores that state and goes on: same seed, same numbers, as if it had never stopped
(``tests/test_checkpoint.py``, ``tests/test_checkpoint_events.py``). Saving computes and waits for nothing (pending
evaluations are kept as the models to evaluate, pending jobs as what they were submitted with), so a run with
checkpoints equals the run without them.

What a round boundary holds (:func:`afl.sim.schedule.simulate_rounds`): the round sampler's generator, the
timeline, and :meth:`afl.algorithms.base.Learner.snapshot` -- the learner's data (server model, momenta, past
models, the client store), its history (evaluations, counters, wall time so far) and its job queue's generators
(mini-batch streams). Between two events of an event clock (:meth:`afl.sim.schedule.ClientClock.run`: FAVAS,
QuAFL, FedBuff, QAFeL, FedAsync, CA2FL, FADAS, rounds that wait for the slowest client): the event queue (its
generator and live events), every client's run (start, step end times, model version), the server policy's own
state (its buffer, the clients in flight), and the learner's snapshot with the jobs of clients still training and
its quantizers' generators. FedAST's pool (:func:`afl.sim.pool.simulate_pool_schedule`) between two events and
Sync-ST's rounds keep the same kinds of state for several models (:func:`afl.algorithms.fedast.tasks_snapshot`). A
checkpoint carries the identity of its run (algorithm, settings, seed, federation);
one of another run is refused, never resumed. Files are written by ``torch.save`` and read with
``weights_only=True``: besides tensors and plain values, the unpickler builds only the classes a checkpoint holds
(:func:`safe_globals`), so a planted file cannot run code when it is loaded (``tests/test_checkpoint.py``).
"""
from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from . import deadline
from .errors import ParameterError, check_real, env_number

#: seconds of wall time between two checkpoints of a run, unless told otherwise (``AFL_CHECKPOINT_EVERY``)
EVERY_S = 600.0


#: the classes besides tensors and plain values that a checkpoint may hold, each declared where it is defined
#: (:func:`checkpointable`)
_HELD: list[type] = []


def checkpointable(cls: type) -> type:
    """Class decorator: a checkpoint may hold instances of ``cls`` (the unpickler builds no class not declared)."""
    _HELD.append(cls)
    return cls


def safe_globals() -> list:
    """What a checkpoint holds besides tensors and plain values: the classes declared :func:`checkpointable` (afl's
    round sampler, timeline, contacts, pool updates and client store), ``OrderedDict`` and ``bytes``, and numpy's
    random generators and arrays (as numpy pickles them)."""
    rng = np.random.default_rng(0)
    return [*_HELD, OrderedDict, bytes,
            rng.__reduce__()[0], rng.bit_generator.__reduce__()[0], type(rng.bit_generator),
            np.random.SeedSequence, rng.bit_generator.seed_seq.__reduce__()[0],
            np.zeros(1).__reduce__()[0], np.ndarray, np.dtype,
            *{type(np.dtype(t)) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                          "uint64", "float16", "float32", "float64")}]


def every_s() -> float:
    """Seconds between two checkpoints: ``$AFL_CHECKPOINT_EVERY`` if set (e.g. 60 in a job with a time limit of a few
    minutes), else :data:`EVERY_S`."""
    value = env_number("AFL_CHECKPOINT_EVERY", float, 0, "seconds of wall time, >= 0")
    return EVERY_S if value is None else value


def checkpointing(folder, *key) -> dict:
    """:func:`afl.algorithms.run_algorithm`'s keywords for the run named ``key`` (its grid key, e.g. split, method,
    seed) to checkpoint in ``folder`` every :func:`every_s` seconds: its file ``<key joined by ->.ckpt``; none
    without a folder."""
    if folder is None:
        return {}
    return dict(checkpoint=Path(folder) / ("-".join(map(str, key)) + ".ckpt"), checkpoint_every=every_s())


def boundary(checkpoint, state, where: str) -> None:
    """What a run does between two rounds or events: save ``state()`` to ``checkpoint`` (a :class:`RunCheckpoint`,
    or None) when it is due, and before stopping past the command's time limit (:class:`afl.deadline.TimeLimit`,
    saying ``where`` the run stopped)."""
    stop = deadline.passed()
    if checkpoint is not None and (stop or checkpoint.due()):
        checkpoint.save(state(), where)
    if stop:
        raise deadline.TimeLimit(f"the time limit stopped the run {where}")


class RunCheckpoint:
    """The checkpoint file ``path`` of the run ``identity`` (a dict of plain values), saved every ``every_s``
    seconds of wall time (0: at every round boundary)."""

    def __init__(self, path, identity: dict, every_s: float = EVERY_S):
        self.path, self.identity = Path(path), identity
        self.every_s = check_real("checkpoint_every", every_s, 0, hint="seconds of wall time, >= 0")
        self._last = time.perf_counter()

    def load(self, device=None) -> dict | None:
        """The saved state, or None if there is none; a :class:`ParameterError` if the file holds another run's
        state or is not a checkpoint."""
        if not self.path.is_file():
            return None
        try:
            with torch.serialization.safe_globals(safe_globals()):
                saved = torch.load(self.path, map_location=device, weights_only=True)
        except Exception as error:  # noqa: BLE001 -- any unreadable file is reported the same way
            raise ParameterError("checkpoint", str(self.path), f"a checkpoint written by afl (unreadable: {error}); "
                                 "delete it to start the run over") from None
        if not isinstance(saved, dict) or saved.get("identity") != self.identity:
            raise ParameterError("checkpoint", str(self.path), "a checkpoint of this run (it holds another run's "
                                 "state: another algorithm, setting, seed or federation); delete it, or write "
                                 "elsewhere")
        self._last = time.perf_counter()
        return saved["state"]

    def due(self) -> bool:
        """Whether ``every_s`` seconds have passed since the last save (or load, or start)."""
        return time.perf_counter() - self._last >= self.every_s

    def save(self, state: dict, where: str | None = None) -> None:
        """Write ``state`` with the run's identity and ``where`` it is in its own time ("at simulated time 92.1",
        "after round 120": :func:`saved_where`); the file is replaced whole (a write cut off by an interruption leaves
        the previous checkpoint)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        part = self.path.with_name(self.path.name + ".part")
        torch.save({"identity": self.identity, "state": state} | ({"where": where} if where else {}), part)
        os.replace(part, self.path)
        _note_where(self.path, where)
        self._last = time.perf_counter()

    def discard(self) -> None:
        """Delete the file and its note (the run has ended)."""
        for path in (self.path, _note(self.path)):
            path.unlink(missing_ok=True)
            path.with_name(path.name + ".part").unlink(missing_ok=True)


def _note(path: Path) -> Path:
    """The small file beside the checkpoint ``path`` that says where its run was, read without the checkpoint."""
    return path.with_name(path.name + ".where")


def _note_where(path: Path, where: str | None) -> None:
    """Write ``where`` beside the checkpoint just saved at ``path``, with that file's size and modification time:
    a note left from an earlier save (a stop between the two writes) names another file and is not believed."""
    note = _note(path)
    if not where:
        note.unlink(missing_ok=True)
        return
    stat = path.stat()
    part = note.with_name(note.name + ".part")
    part.write_text(json.dumps({"where": where, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}))
    os.replace(part, note)


def saved_where(path) -> str:
    """Where the run of the checkpoint file ``path`` was when it was saved, as :meth:`RunCheckpoint.save` wrote it
    ("(where not recorded)" in a checkpoint of an earlier afl, "(unreadable)" in a damaged file): from the note
    beside it where that note names this very file (milliseconds), else from the file itself (its tensors mapped,
    not read, but its other state unpickled: seconds for a FedAST pool)."""
    path = Path(path)
    try:
        note, stat = json.loads(_note(path).read_text()), path.stat()
        if isinstance(note, dict) and (note.get("size"), note.get("mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
            return str(note["where"])
    except (OSError, ValueError, KeyError):
        pass                        # no note, a damaged one, or no checkpoint: the file itself says
    try:
        with torch.serialization.safe_globals(safe_globals()):
            saved = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 -- any unreadable file is reported the same way
        return "(unreadable)"
    return (saved.get("where") or "(where not recorded)") if isinstance(saved, dict) else "(unreadable)"


#: the kept runs :func:`kept_words` names with where each is (the rest it counts)
SHOWN = 8


def kept_runs(folder) -> list[tuple[str, str]]:
    """(run, where it was saved) of each checkpoint file in ``folder`` (none if there is no such folder)."""
    folder = Path(folder)
    return [(f.stem, saved_where(f)) for f in sorted(folder.glob("*.ckpt"))] if folder.is_dir() else []


def kept_words(kept: list[tuple[str, str]]) -> str:
    """``kept`` (:func:`kept_runs`) in words: the first :data:`SHOWN` runs with where each is, the rest counted."""
    words = "; ".join(f"{run} {where}" for run, where in kept[:SHOWN])
    return words + (f"; and {len(kept) - SHOWN} more" if len(kept) > SHOWN else "")


__all__ = ["EVERY_S", "every_s", "checkpointable", "safe_globals", "checkpointing", "boundary", "RunCheckpoint",
           "saved_where", "kept_runs", "kept_words"]
