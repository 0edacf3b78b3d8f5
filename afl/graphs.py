"""Replayed calls: the engine's local training recorded once as a CUDA graph and replayed on new inputs.

At the 10-50 clients of a GHBM round, a GPU step of a small CNN costs more in the host's launches (vmap's
dispatch, autograd, a few hundred kernels a step) than in the kernels themselves. A CUDA graph records every
kernel of a call -- all its local steps, hooks and updates -- once, and replays them with one launch. A call is
replayed only where it is the same computation: same shapes, the same steps per client, the same hooks on the same
rows; its tensors are copied into the graph's static inputs first, and what it updates in place copied back.

:class:`CallGraphs` keeps the graphs of one engine structure (shared by every engine of that structure: a fleet
builds one per run, all interchangeable). A call is recorded the second time its key is seen (one-off calls, such
as FAVAS's interrupted clients, stay eager) and the graphs share one memory pool: only one replays at a time and
each one's output is consumed before the next. A capture that fails turns graphs off for that structure, with a
warning, and the call runs eagerly. ``AFL_CUDA_GRAPHS=0`` turns them off everywhere.

``emulate=True`` runs the same bookkeeping on any device without recording (a "replay" calls the function on the
static buffers): the tests check on a CPU that the engine's calls survive the round trip through static inputs.
"""
from __future__ import annotations

import os
import warnings
from collections import Counter, OrderedDict
from typing import Callable, Hashable, Sequence

import torch
from torch import Tensor

from .errors import ParameterError

#: graphs kept per engine structure (least recently used dropped first)
CAPACITY = 16
#: a call is recorded on this sighting of its key (earlier sightings run eagerly)
RECORD_AFTER = 2
#: keys whose sightings are counted at most (then the count starts over)
SIGHTINGS_KEPT = 10_000


def graphs_enabled() -> bool:
    """Whether CUDA graphs may be used: ``AFL_CUDA_GRAPHS`` unset or ``1``; ``0`` turns them off."""
    value = os.environ.get("AFL_CUDA_GRAPHS", "1")
    if value not in ("0", "1"):
        raise ParameterError("AFL_CUDA_GRAPHS", value, "'1' (CUDA graphs where they apply, the default) or '0' (off)")
    return value == "1"


class _Recorded:
    __slots__ = ("inputs", "output", "graph", "fn")

    def __init__(self, inputs: list[Tensor], output: Tensor | None, graph, fn):
        self.inputs, self.output, self.graph, self.fn = inputs, output, graph, fn


class CallGraphs:
    """Recorded calls of one engine structure on ``device``, keyed by what makes two calls the same computation.

    ``capacity`` graphs at most; a key is recorded at its ``record_after``-th sighting. ``emulate``: record
    nothing, replay by calling the function on the static buffers (any device; for tests)."""

    def __init__(self, device: torch.device, capacity: int = CAPACITY, record_after: int = RECORD_AFTER,
                 emulate: bool = False):
        self.device, self.capacity, self.record_after, self.emulate = device, capacity, record_after, emulate
        self.entries: OrderedDict[Hashable, _Recorded] = OrderedDict()
        self.sightings: Counter = Counter()
        self.buffers: dict[tuple, Tensor] = {}       # static inputs, shared by graphs: (slot, shape, dtype)
        self.failed: BaseException | None = None
        self.replays = self.recorded = 0
        self.anchor: Tensor | None = None
        self._pool = self._stream = None

    def __call__(self, key: Hashable, fn: Callable[..., Tensor], args: Sequence[Tensor],
                 updated: Sequence[int] = ()) -> Tensor:
        """``fn(*args)``, a new tensor; ``fn`` may update ``args[i]`` in place for ``i`` in ``updated`` (those
        updates reach ``args``). Replayed from a graph where ``key`` was recorded, recorded at its
        ``record_after``-th sighting, else run as it is."""
        if self.failed is not None:
            return fn(*args)
        entry = self.entries.get(key)
        if entry is None:
            if len(self.sightings) >= SIGHTINGS_KEPT:    # calls that never recur (FAVAS's interrupted clients)
                self.sightings.clear()
            self.sightings[key] += 1
            if self.sightings[key] < self.record_after:
                return fn(*args)
            return self._record(key, fn, args)
        self.entries.move_to_end(key)
        for buf, a in zip(entry.inputs, args):
            buf.copy_(a)
        if self.emulate:
            entry.output = entry.fn(*entry.inputs)
        else:
            entry.graph.replay()
        self.replays += 1
        for i in updated:
            args[i].copy_(entry.inputs[i])
        return entry.output.clone()

    def _static(self, args: Sequence[Tensor]) -> list[Tensor]:
        out = []
        for slot, a in enumerate(args):
            buf = self.buffers.get((slot, tuple(a.shape), a.dtype))
            if buf is None:
                buf = torch.empty_like(a, memory_format=torch.contiguous_format)
                self.buffers[(slot, tuple(a.shape), a.dtype)] = buf
            out.append(buf)
        return out

    def _record(self, key: Hashable, fn: Callable[..., Tensor], args: Sequence[Tensor]) -> Tensor:
        """This call's result, computed eagerly (on the capture's stream: the warm-up that a capture needs), and the
        call recorded for the next sightings of ``key``."""
        if self.emulate:
            output = fn(*args)
            inputs = self._static(args)
            self._keep(key, _Recorded(inputs, None, None, fn))
            return output
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
            self._pool = torch.cuda.graph_pool_handle()
        current = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(current)
        with torch.cuda.stream(self._stream):
            output = fn(*args)
        current.wait_stream(self._stream)
        output = output.clone()         # on the current stream, before the capture's stream reuses the memory
        try:
            inputs = self._static(args)
            for buf, a in zip(inputs, args):
                buf.copy_(a)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool, stream=self._stream):
                static_output = fn(*inputs)
            self._keep(key, _Recorded(inputs, static_output, graph, None))
        except Exception as error:  # noqa: BLE001 -- any failed capture falls back to eager calls, said once
            self.failed = error
            self.entries.clear()
            warnings.warn(f"afl: CUDA graphs are off for this engine: recording a call failed ({error!r}); its calls "
                          "run eagerly (set AFL_CUDA_GRAPHS=0 to silence)", RuntimeWarning, stacklevel=3)
        return output

    def _keep(self, key: Hashable, entry: _Recorded) -> None:
        self.entries[key] = entry
        self.recorded += 1
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)


#: engine structure (LocalSGD.signature) -> its recorded calls, shared by the engines of that structure
_BY_STRUCTURE: dict[Hashable, CallGraphs] = {}


def call_graphs(structure: Hashable, device: torch.device, anchor: Tensor) -> CallGraphs:
    """The :class:`CallGraphs` of an engine structure on a CUDA ``device`` (one per process and structure).
    ``anchor``: the dataset tensor whose ``id`` the structure holds; it is kept alive with the graphs, so that no
    other tensor can take that ``id`` while graphs that read it may be replayed."""
    if structure not in _BY_STRUCTURE:
        _BY_STRUCTURE[structure] = CallGraphs(device)
        _BY_STRUCTURE[structure].anchor = anchor
    return _BY_STRUCTURE[structure]


__all__ = ["CAPACITY", "RECORD_AFTER", "CallGraphs", "call_graphs", "graphs_enabled"]
