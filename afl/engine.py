"""Vectorized local SGD: many clients' local training at once (DESIGN.md, "The fast path").

A client's local result depends only on its start parameters, its mini-batch stream and its number of
steps. :class:`LocalSGD` runs C such clients together: their parameters are stacked on a leading client
axis (one ``(C, P)`` tensor at the interface, one ``(C, *shape)`` tensor per parameter inside), and a
*strategy* (:mod:`afl.strategies`: ``vmap`` over clients, a ``loop`` of per-client calls, or the
hand-written ``mlp``, chosen per device and model) computes every client's gradient. Each step updates

    d_i = g_i + wd_i * w_i            (torch.optim.SGD's weight decay)
    d_i = hook(t, w, d, w0, state)    (optional correction: momentum, control variates, prox, ...)
    w_i <- w_i - lr_i * d_i           only for clients with t < steps_i

Clients are sorted by their number of steps so that the active ones always form a prefix: a client that
has finished costs nothing. The result equals a per-client loop with ``torch.optim.SGD`` to float
tolerance (``tests/test_engine.py`` keeps that loop as the oracle).

``precision="bf16"`` (opt-in; reproductions default to ``"fp32"``) computes the clients' forward and backward
passes under bfloat16 autocast, images in channels-last layout, while parameters, gradients as applied, the
update and the server's evaluation stay in float32 (mixed precision, Micikevicius et al. 2018).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import torch
from torch import Tensor, nn

from .data.augment import augment_noise
from .errors import ParameterError, check, check_choice, check_int
from .graphs import CallGraphs, call_graphs, graphs_enabled
from .runtime import device_share, tune_cpu_allocator
from .strategies import Strategy, cross_entropy_sum, make_strategy

#: how the clients' forward and backward passes compute (see the module docstring)
PRECISIONS = ("fp32", "bf16")


def free_cuda_bytes(device: torch.device) -> int:
    """Memory free for tensors on a GPU: the device's free memory and what PyTorch's allocator holds cached but
    unused (freed tensors stay reserved: the previous engine's measured steps would otherwise shrink the next
    engine's chunk, 632 clients to 185 for the Shakespeare LSTM on an H100), times this process's share of the GPU
    (:func:`afl.runtime.device_share`: processes that share it)."""
    return int(device_share() * (torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device)
                                 - torch.cuda.memory_allocated(device)))


class Correction(Protocol):
    """Per-step direction hook.

    Called with the step index ``t``, the active clients' parameters ``w`` ``(k, P)``, their SGD
    direction ``d`` (gradient plus weight decay), their start parameters ``w0`` and ``state``, a dict
    of ``(k, P)`` views of per-client tensors submitted with the jobs. Returns the direction to step
    along; may update ``state`` tensors in place (the views write through to the jobs' state).

    A hook with a ``gradient_at`` attribute naming a state entry also receives, as
    ``state["gradient_at"]``, the gradient (without weight decay) of the parameters held there on the same
    mini-batch: MIME's ``g_i(x; zeta)`` at the server model (Karimireddy et al. 2021, eq. (4)).

    A hook with a true ``graph_safe`` attribute is a pure function of its arguments and its own constant
    fields (no host synchronisation, no Python state that changes between calls): its calls may be recorded as
    CUDA graphs and replayed (:mod:`afl.graphs`). Other hooks always run eagerly.
    """

    def __call__(self, t: int, w: Tensor, d: Tensor, w0: Tensor, state: dict[str, Tensor]) -> Tensor: ...


@dataclass
class HookGroup:
    """Clients ``rows`` of one :meth:`LocalSGD.run` call that step with ``hook`` (``None``: plain SGD), and their
    per-client ``state`` tensors ``(len(rows), P)`` (row i: client ``rows[i]``), handed to the hook and updated."""

    rows: Tensor | Sequence[int]
    hook: Correction | None = None
    state: dict[str, Tensor] = field(default_factory=dict)


@dataclass
class _Segment:
    """Clients ``start:stop`` of a sorted chunk, all of one group with a hook, and views of their state rows."""

    start: int
    stop: int
    hook: Correction
    state: dict[str, Tensor]


class FlatModel:
    """A module's parameters as one flat vector (the module's dtype), and its views per parameter."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.names, self.shapes, self.numels = [], [], []
        for name, p in module.named_parameters():
            self.names.append(name)
            self.shapes.append(tuple(p.shape))
            self.numels.append(p.numel())
        self.size = sum(self.numels)
        #: whether training draws random numbers (a dropout layer, or a module with a ``dropout`` rate above 0)
        self.random = any(m.p > 0 if isinstance(m, nn.modules.dropout._DropoutNd)
                          else isinstance(getattr(m, "dropout", 0), (int, float)) and getattr(m, "dropout", 0) > 0
                          for m in module.modules())

    def flatten(self, module: nn.Module | None = None) -> Tensor:
        """The parameters of ``module`` (default: the template) as a ``(P,)`` tensor."""
        module = module or self.module
        return torch.cat([p.detach().reshape(-1) for p in module.parameters()])

    def load_into(self, flat: Tensor, module: nn.Module | None = None) -> nn.Module:
        """Copy a ``(P,)`` vector into the parameters of ``module`` (default: the template)."""
        module = module or self.module
        with torch.no_grad():
            for p, v in zip(module.parameters(), self.views(flat.unsqueeze(0)).values()):
                p.copy_(v[0])
        return module

    def views(self, flat: Tensor) -> dict[str, Tensor]:
        """Split ``(C, P)`` into per-parameter ``(C, *shape)`` views (no copy)."""
        out, offset = {}, 0
        for name, shape, n in zip(self.names, self.shapes, self.numels):
            out[name] = flat[:, offset:offset + n].view(flat.shape[0], *shape)
            offset += n
        return out

def activation_bytes(module: nn.Module, sample: Tensor) -> tuple[int, int]:
    """Bytes of all module outputs for one input sample, and of what recurrent modules keep inside for backward
    beyond their outputs (their ``saved_bytes(input)``, :class:`afl.models.StackedLSTM`): a memory estimate for
    chunking."""
    outputs = recurrent = 0

    def count(m, inputs, out):
        nonlocal outputs, recurrent
        if isinstance(out, Tensor):
            outputs += out.numel() * out.element_size()
        if hasattr(m, "saved_bytes"):
            recurrent += m.saved_bytes(inputs[0])

    leaves = [m for m in module.modules() if not list(m.children())]
    handles = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            module(sample.unsqueeze(0))
    finally:
        for h in handles:
            h.remove()
    return outputs, recurrent


#: (fixed, per-client) bytes of a step measured on a GPU, per engine structure (LocalSGD.__init__)
_MEASURED: dict[tuple, tuple[int, int]] = {}

#: Clients a CPU trains in one batched step at most (a call of more runs in parts). Past a few dozen clients a
#: step's per-client tensors leave the cores' caches: on the 2-core Xeon of this project (2 MB L2 a core), ``afl
#: bench local-sgd --no-reference`` trained mlp32 at 117-122 GFLOP/s with 16-24 clients and 81-87 with 80-160;
#: mlp200 at 216-220 with 8-32 and 173-178 with 40-160; the char-LSTM alike with 10, 32 and 96. The FAVAS quick
#: grid as a fleet (calls of up to 420 clients) spent 48.8 s in the engine without this cap and 38.4 s with it.
CPU_CALL_CLIENTS = 24


class LocalSGD:
    """Local SGD for many clients at once over one on-device dataset.

    ``dataset`` needs ``train_x``, ``train_y``, ``inputs(x)`` (normalised inputs in the model's dtype) and
    ``augment`` (``None``, ``"flip"`` or ``"crop_flip"``). ``max_bytes`` bounds the memory of one chunk of
    clients (parameters, gradients and activations; default 2 GiB on a CPU, half the free memory on a GPU); larger
    sets of clients are run chunk by chunk. A chunk's memory is measured on a GPU (steps of 2 and 4 clients, checked
    at the chunk) and estimated from the activations on a CPU (``self.memory_basis``, ``self.bytes_per_client``);
    on a CPU a step trains at most :data:`CPU_CALL_CLIENTS` of them at once (``self.call_clients``), all of one
    hook group (``self.mix_groups``: :meth:`_calls`). ``strategy``: how a step is computed
    (:data:`afl.strategies.STRATEGIES`; ``"auto"`` picks per device and model,
    :func:`afl.strategies.choose_strategy`); ``self.strategy`` says which one runs. ``precision``: one of
    :data:`PRECISIONS` (``"bf16"``: mixed precision for a float32 model, see the module docstring).
    ``cuda_graphs``: record recurring calls on a GPU as CUDA graphs and replay them (:mod:`afl.graphs`; None: on a
    GPU unless ``AFL_CUDA_GRAPHS=0``; a :class:`~afl.graphs.CallGraphs`: that one, e.g. an emulating one on a
    CPU); ``self.graphs`` is the one in use, or None.
    """

    def __init__(self, module: nn.Module, dataset, batch_size: int, *, max_bytes: int | None = None,
                 augment: bool = True, loss: Callable[[Tensor, Tensor], Tensor] = cross_entropy_sum,
                 strategy: str = "auto", precision: str = "fp32", cuda_graphs: bool | CallGraphs | None = None):
        batch_size = check_int("batch_size", batch_size, 1)
        check_choice("precision", precision, PRECISIONS)
        device = dataset.train_x.device
        if device.type == "cpu":
            tune_cpu_allocator()
        self.model = FlatModel(module.to(device))
        self.dtype = next(self.model.module.parameters()).dtype
        if precision == "bf16":
            check(self.dtype == torch.float32, "precision", precision, f"'fp32' for a {self.dtype} model (bf16 is "
                  "mixed precision for float32 parameters)")
        self.precision = precision
        self.strategy: Strategy = make_strategy(strategy, self.model.module, self.model.names, loss, device,
                                                channels_last=precision == "bf16")
        # a lone client steps as a pair (:meth:`_lone`); set here for the GPU's memory measurement, whose steps
        # ask it, and narrowed below once the chunk is known
        self.pair_lone = self.strategy.batched
        self.dataset, self.batch_size, self.loss = dataset, batch_size, loss
        self.device = device
        self.augment = augment and getattr(dataset, "augment", None) is not None
        self._train_rows = dataset.train_x.reshape(len(dataset.train_x), -1)
        if max_bytes is None:
            max_bytes = 2 << 30
            if device.type == "cuda":
                max_bytes = int(free_cuda_bytes(device) * 0.5)
        check(max_bytes > 0, "max_bytes", max_bytes, "a positive number of bytes")
        # Engines with equal signatures are interchangeable: same dataset tensors, model structure, batch size,
        # augmentation, loss, strategy, dtype and precision (afl.fleet trains their jobs together).
        self.signature = (id(dataset.train_x), repr(self.model.module), tuple(self.model.shapes), batch_size,
                          self.augment, loss, self.strategy.name, self.dtype, precision, str(device))
        # Memory of a chunk of k clients, fixed + k * per_client: measured on a GPU, estimated on a CPU.
        param_bytes = torch.finfo(self.dtype).bits // 8 * self.model.size
        if device.type == "cuda":
            self.memory_basis = "measured"
            # measured once per process for each structure (a fleet builds one engine per run)
            structure = self.signature[1:] + (tuple(dataset.train_x.shape[1:]),)
            if structure not in _MEASURED:
                _MEASURED[structure] = self._measured_step_bytes(max_bytes, extra_per_client=4 * param_bytes)
            fixed, per_client = _MEASURED[structure]
        else:
            self.memory_basis = "estimated"
            sample = dataset.inputs(dataset.train_x[:1])[0]
            # 4x a batch's module outputs: a vmap step allocates 3.4x (cnn-cifar) and 3.8x (ResNet-20) of them per
            # client on a CPU; plus a recurrence's saved tensors (char-lstm: 75 MB estimated, 65 MB measured;
            # tools/engine_memory_probe.py)
            outputs, recurrent = activation_bytes(module, sample)
            fixed, per_client = 0, 6 * param_bytes + batch_size * (4 * outputs + recurrent)
        self.bytes_per_client = per_client
        self.chunk = max(1, int((max_bytes - fixed) // per_client))
        self.pair_lone = self.pair_lone and self.chunk > 1      # a chunk of one has no room for the pair
        # clients of one batched step: the memory chunk, on a CPU at most what its caches hold well
        self.call_clients = self.chunk if device.type == "cuda" else min(self.chunk, CPU_CALL_CLIENTS)
        self.mix_groups = device.type == "cuda"        # a step call may hold clients of several hook groups
        if cuda_graphs is None:
            cuda_graphs = device.type == "cuda" and graphs_enabled()
        if cuda_graphs is True:
            check(device.type == "cuda", "cuda_graphs", True, "False or None on a CPU (CUDA graphs need a GPU)")
            cuda_graphs = call_graphs(self.signature, device, anchor=dataset.train_x)
        self.graphs: CallGraphs | None = cuda_graphs or None

    def _measured_step_bytes(self, max_bytes: int, extra_per_client: int) -> tuple[int, int]:
        """(fixed, per-client) bytes of one local step on a GPU, from the CUDA allocator's peak: fitted as
        fixed + k * per-client on steps of 2 and 4 clients, then checked on a step of the chunk those give, which
        shrinks while it peaks above ``max_bytes`` (the small steps under-count: cuDNN picks other algorithms and
        workspaces for larger groups; cnn-cifar's fit from 2 and 4 filled 1.27x its budget on an H100).
        ``extra_per_client``: bytes a client needs beside the step (a hook's flat copies and state). The
        activation estimate used on a CPU over-counts here (it ran ResNet-20 on an H100 in chunks of 25 clients,
        most of the memory unused)."""
        small = [self._step_peak(k) for k in (2, 4)]
        per_client = max(1, (small[1] - small[0]) // 2) + extra_per_client
        fixed = max(0, small[0] - 2 * per_client)
        for _ in range(4):
            chunk = max(1, int((max_bytes - fixed) // per_client))
            peak = self._step_peak(chunk) + chunk * extra_per_client
            if peak <= max_bytes or chunk == 1:
                break
            per_client = -(-(peak - fixed) // chunk)
        return fixed, per_client

    def _step_peak(self, k: int) -> int:
        """Peak bytes the CUDA allocator holds above its current use during one local step of ``k`` clients."""
        start = self.model.flatten().to(self.device).expand(k, -1).clone()
        batches = torch.zeros(k, 1, self.batch_size, 2, dtype=torch.long, device=self.device)  # sample 0, bits 0
        lr = torch.zeros(k, dtype=self.dtype, device=self.device)
        torch.cuda.synchronize(self.device)
        before = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._run_sorted(start, batches, [1] * k, lr, None, [], None, uniform_lr=True)
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_allocated(self.device) - before

    def _clients_compute(self):
        """The context of the clients' forward and backward passes: bfloat16 autocast for ``precision="bf16"``."""
        if self.precision == "bf16":     # no cast cache: a recorded graph must cast the parameters it is given
            return torch.autocast(self.device.type, dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def _lone(self, per_client: Tensor) -> bool:
        """Whether a step's clients (``per_client``: a row each) are one client alone, to be paired with a copy of
        itself: a batched strategy's kernels round a batch of one otherwise than a batch of two or more (on a CPU,
        ``bmm`` of (1, 10, 32) by (1, 32, 200), an MLP's last weight gradient, differs from the same item beside
        another by 3e-6), so a client stepping alone -- the 25th of 25 jobs in step calls of 24, or the client with
        the most steps once the others of its call have finished -- would give other numbers than in company, and
        a run's numbers would depend on the runs whose jobs shared its engine calls (a fleet's) and on where it
        was resumed (``tests/test_engine.py``)."""
        return self.pair_lone and len(per_client) == 1

    def _gradient(self, params: list[Tensor], x: Tensor, y: Tensor) -> list[Tensor]:
        """The strategy's per-client gradients, in the parameters' dtype, each its own tensor: autograd may hand
        two parameters one gradient tensor (an LSTM's ``bias_ih`` and ``bias_hh`` enter only as their sum), and
        weight decay is then added in place to each. A lone client's from a pair of copies (:meth:`_lone`)."""
        if self._lone(x):
            return [g[:1] for g in self._gradient([_pair(p) for p in params], _pair(x), _pair(y))]
        with self._clients_compute():
            grads = self.strategy.gradient(params, x, y)
        out, seen = [], set()
        for g, p in zip(grads, params):
            g = g if g.dtype == p.dtype else g.to(p.dtype)
            out.append(g.clone() if g.data_ptr() in seen else g)
            seen.add(g.data_ptr())
        return out

    # -- one chunk ---------------------------------------------------------------------------------
    def _batch(self, idx: Tensor, generator: torch.Generator | None, augment: bool | None = None
               ) -> tuple[Tensor, Tensor]:
        """Inputs ``(k, B, ...)`` and labels ``(k, B)`` for dataset indices ``idx`` ``(k, B)``, or for
        (index, augmentation bits) pairs ``(k, B, 2)``; without bits, augmentation draws from ``generator``."""
        bits = None
        if idx.dim() == 3:
            idx, bits = idx[..., 0], idx[..., 1]
        flat = idx.reshape(-1)
        rows = self._train_rows.index_select(0, flat)    # 2-D gathers are ~2x faster than N-D ones
        x = self.dataset.inputs(rows.view(len(flat), *self.dataset.train_x.shape[1:]))
        if self.augment if augment is None else augment:
            bits = augment_noise(len(flat), generator) if bits is None else bits.reshape(-1)
            x = self.dataset.apply_augment(x, bits)
        y = self.dataset.train_y.index_select(0, flat)
        return x.view(*idx.shape, *x.shape[1:]), y.view(idx.shape)

    def _run_chunk(self, w: Tensor, batches: Tensor, steps: list[int], lr: Tensor, wd: Tensor | None,
                   corrections: list[_Segment], generator) -> Tensor:
        """:meth:`_run_sorted`, replayed from a CUDA graph where this call recurs (:mod:`afl.graphs`): same shapes,
        steps and hooks on the same rows. Eager where the batches draw their augmentation now (a generator's
        numbers cannot be recorded) or a hook is not ``graph_safe``."""
        graphs = self.graphs
        if graphs is None or (self.augment and batches.dim() == 3) or not all(
                getattr(seg.hook, "graph_safe", False) for seg in corrections):
            return self._run_sorted(w, batches, steps, lr, wd, corrections, generator, uniform_lr=True)
        names = [tuple(seg.state) for seg in corrections]
        key = (tuple(w.shape), tuple(batches.shape), tuple(steps), wd is not None,
               tuple((seg.start, seg.stop, seg.hook, n) for seg, n in zip(corrections, names)))
        head = [w, batches, lr] + ([] if wd is None else [wd])
        states = [t for seg in corrections for t in seg.state.values()]

        def call(w, batches, lr, *rest):
            wd, rest = (None, iter(rest)) if len(head) == 3 else (rest[0], iter(rest[1:]))
            segments = [_Segment(seg.start, seg.stop, seg.hook, {n: next(rest) for n in seg_names})
                        for seg, seg_names in zip(corrections, names)]
            return self._run_sorted(w, batches, steps, lr, wd, segments, None, uniform_lr=False)
        return graphs(key, call, head + states, updated=range(len(head), len(head) + len(states)))

    def _run_sorted(self, w: Tensor, batches: Tensor, steps: list[int], lr: Tensor, wd: Tensor | None,
                    corrections: list[_Segment], generator, uniform_lr: bool) -> Tensor:
        """Clients sorted by decreasing ``steps``: the active ones are always a prefix.

        Parameters live as one contiguous ``(C, *shape)`` tensor per model parameter (what the batched
        matmuls and convolutions want); flat ``(k, P)`` copies are made only for correction hooks, each applied
        to the active part of its own rows (``corrections``: contiguous runs of clients sharing a hook).
        ``uniform_lr``: a learning rate that all clients share is applied as a number (reading it waits for the
        device, which a recorded call must not: it then stays a tensor; the same result to rounding).
        """
        params = [v.contiguous() for v in self.model.views(w).values()]
        same_lr = float(lr[0]) if uniform_lr and len(lr) and bool((lr == lr[0]).all()) else None
        fused = not corrections and self.strategy.fused_update and self.precision == "fp32"
        k = len(steps)
        for t in range(steps[0] if steps else 0):
            while k and steps[k - 1] <= t:
                k -= 1
            x, y = self._batch(batches[:k, t], generator)
            active = [p[:k] for p in params]
            if fused:
                self._sgd_step(active, x, y, lr[:k], None if wd is None else wd[:k])
                continue
            grads = self._gradient(active, x, y)
            if wd is not None:
                for g, p in zip(grads, active):
                    g.addcmul_(p, wd[:k].view(-1, *[1] * (p.dim() - 1)))
            if any(seg.start < k for seg in corrections):
                flat_w = torch.cat([p.reshape(k, -1) for p in active], dim=1)
                d = torch.cat([g.reshape(k, -1) for g in grads], dim=1)
                for seg in corrections:
                    if seg.start < k:
                        d = self._correct(seg, t, min(seg.stop, k), flat_w, d, w, x, y)
                grads = list(self.model.views(d).values())
            for g, p in zip(grads, active):
                if same_lr is not None:
                    p.add_(g, alpha=-same_lr)
                else:
                    p.addcmul_(g, lr[:k].view(-1, *[1] * (p.dim() - 1)), value=-1.0)
        return torch.cat([p.reshape(len(steps), -1) for p in params], dim=1)

    def _sgd_step(self, params: list[Tensor], x: Tensor, y: Tensor, lr: Tensor, wd: Tensor | None) -> None:
        """The strategy's fused SGD step on ``params`` in place; a lone client's on a pair of copies
        (:meth:`_lone`)."""
        if not self._lone(x):
            return self.strategy.sgd_step(params, x, y, lr, wd)
        pairs = [_pair(p) for p in params]
        self.strategy.sgd_step(pairs, _pair(x), _pair(y), _pair(lr), None if wd is None else _pair(wd))
        for p, twin in zip(params, pairs):
            p.copy_(twin[:1])

    def _correct(self, seg: _Segment, t: int, stop: int, flat_w: Tensor, d: Tensor, w0: Tensor, x: Tensor,
                 y: Tensor) -> Tensor:
        """``d`` with rows ``seg.start:stop`` (the segment's active clients) replaced by its hook's direction."""
        a, n = seg.start, stop - seg.start
        views = {name: s[:n] for name, s in seg.state.items()}
        at = getattr(seg.hook, "gradient_at", None)
        if at is not None:
            reference = [v.contiguous() for v in self.model.views(views[at]).values()]
            views["gradient_at"] = torch.cat([g.reshape(n, -1) for g in
                                              self._gradient(reference, x[a:stop], y[a:stop])], dim=1)
        out = seg.hook(t, flat_w[a:stop], d[a:stop], w0[a:stop], views)
        if n == len(d):
            return out
        d[a:stop] = out
        return d

    # -- public --------------------------------------------------------------------------------------
    def run(self, start: Tensor, batches: Tensor, steps, lr, weight_decay=0.0, *,
            hook: Correction | None = None, state: dict[str, Tensor] | None = None,
            groups: Sequence[HookGroup] | None = None, generator: torch.Generator | None = None,
            seed: int | None = None) -> Tensor:
        """Train C clients; return their final parameters ``(C, P)``.

        ``start`` ``(C, P)``; ``batches`` ``(C, S, B)`` train indices (client c uses ``batches[c, t]`` at
        step t), or ``(C, S, B, 2)`` (index, augmentation bits) pairs (:class:`afl.streams.ClientStreams`);
        ``steps`` ``(C,)`` integers in ``[0, S]``; ``lr`` and ``weight_decay`` scalars or ``(C,)``; ``state``
        per-client ``(C, P)`` tensors handed to ``hook`` and updated in place. ``groups`` instead of ``hook`` and
        ``state``: clients with different hooks in one call (:class:`HookGroup`; their gradients are computed
        together, each hook corrects its own rows). ``seed``: dropout draws its masks from torch's global generator;
        with a seed, that generator is seeded for this call and restored after, so that a run's masks do not depend
        on what ran before it in the process.
        """
        if seed is not None:
            with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
                torch.manual_seed(seed)
                return self.run(start, batches, steps, lr, weight_decay, hook=hook, state=state, groups=groups,
                                generator=generator)
        C, P = start.shape
        check(P == self.model.size, "start", tuple(start.shape), f"(C, {self.model.size})")
        check(batches.shape[:1] + batches.shape[2:] in ((C, self.batch_size), (C, self.batch_size, 2)),
              "batches", tuple(batches.shape), f"(C={C}, S, B={self.batch_size}) or (C, S, B, 2)")
        steps = torch.as_tensor(steps, dtype=torch.long).reshape(-1).cpu()
        check(steps.numel() == C, "steps", tuple(steps.shape), f"({C},)")
        if C and (int(steps.min()) < 0 or int(steps.max()) > batches.shape[1]):
            raise ParameterError("steps", steps.tolist(), f"integers in [0, {batches.shape[1]}]")
        lr = self._per_client(lr, C, "lr")
        if bool((lr < 0).any()):
            raise ParameterError("lr", lr.tolist(), "non-negative learning rates")
        wd = self._per_client(weight_decay, C, "weight_decay")
        wd = wd if bool((wd != 0).any()) else None
        if groups is None:
            groups = [HookGroup(torch.arange(C), hook, dict(state or {}))]
        else:
            check(hook is None and state is None, "hook", hook, "None when groups are given (each group has its own)")
        group_of, row_of = self._check_groups(groups, C, start)

        out = torch.empty_like(start)
        for sel in self._calls(group_of, steps):
            sel_dev = sel.to(self.device)
            segments, chunk_states = self._segments(groups, group_of[sel], row_of[sel])
            out[sel_dev] = self._run_chunk(
                start.index_select(0, sel_dev), batches.index_select(0, sel_dev.to(batches.device)).to(self.device),
                steps[sel].tolist(), lr[sel_dev], None if wd is None else wd[sel_dev], segments, generator)
            for group, (rows, chunk_state) in zip(groups, chunk_states):
                for name, s in group.state.items():
                    s[rows] = chunk_state[name]
        return out

    def _calls(self, group_of: Tensor, steps: Tensor) -> list[Tensor]:
        """The clients of each step call, most steps first within a call (the active clients are a prefix) and the
        clients of one group next to each other. On a GPU (``mix_groups``) a call holds up to ``call_clients`` of
        any groups: a wide call is what a GPU is fast at. On a CPU, whose calls hold at most
        :data:`CPU_CALL_CLIENTS`, a call holds one group's clients: there, a call that mixes groups costs more than
        it saves, since any hook in a call makes every row of it go through flat copies of parameters and
        gradients, and rows with no hook lose the fused SGD update (measured, the GHBM quick grid of 16 methods as
        a fleet on one thread of a 2-core Xeon: 124.0 s in the engine mixed, 115.1 s per group; one by one
        112.4 s)."""
        by_group = torch.argsort(group_of, stable=True)
        order = by_group[torch.argsort(steps[by_group], descending=True, stable=True)]
        if self.mix_groups or not len(order):
            runs = [order]
        else:                                           # each group's clients, still most steps first
            order = order[torch.argsort(group_of[order], stable=True)]
            runs = order.split(torch.unique_consecutive(group_of[order], return_counts=True)[1].tolist())
        return [run[lo:lo + self.call_clients] for run in runs for lo in range(0, len(run), self.call_clients)]

    def _check_groups(self, groups: Sequence[HookGroup], C: int, start: Tensor) -> tuple[Tensor, Tensor]:
        """Each client's group and its row in the group's state, checking that the groups partition the clients."""
        group_of = torch.full((C,), -1, dtype=torch.long)
        row_of = torch.zeros(C, dtype=torch.long)
        for g, group in enumerate(groups):
            rows = torch.as_tensor(group.rows, dtype=torch.long).reshape(-1).cpu()
            if not (bool(((rows >= 0) & (rows < C)).all()) and bool((group_of[rows] == -1).all())
                    and len(rows.unique()) == len(rows)):
                raise ParameterError(f"groups[{g}].rows", rows.tolist(),
                                     f"distinct client indices in [0, {C}) that no other group holds")
            group_of[rows], row_of[rows] = g, torch.arange(len(rows))
            for name, s in group.state.items():
                check(s.shape == (len(rows), start.shape[1]), f"groups[{g}].state[{name!r}]", tuple(s.shape),
                      f"({len(rows)}, {start.shape[1]})")
        missing = torch.nonzero(group_of == -1).flatten().tolist()
        check(not missing, "groups", f"no group for clients {missing}", "groups that together hold every client")
        return group_of, row_of

    def _segments(self, groups, group_of: Tensor, row_of: Tensor) -> tuple[list[_Segment], list]:
        """For one chunk (its clients' groups and rows in their groups' state, in the chunk's order): the runs of
        consecutive clients of one group that has a hook, with views of their state rows, and for every group its
        rows in this chunk and the chunk's copy of their state (written back after the chunk)."""
        chunk_states = []
        for g, group in enumerate(groups):
            rows = row_of[group_of == g].to(self.device)
            chunk_states.append((rows, {n: s.index_select(0, rows) for n, s in group.state.items()}))
        segments, seen = [], [0] * len(groups)
        values, counts = torch.unique_consecutive(group_of, return_counts=True)
        a = 0
        for g, n in zip(values.tolist(), counts.tolist()):
            if groups[g].hook is not None:
                state = {name: s[seen[g]:seen[g] + n] for name, s in chunk_states[g][1].items()}
                segments.append(_Segment(a, a + n, groups[g].hook, state))
            seen[g] += n
            a += n
        return segments, chunk_states

    def _client_batches(self, params: Tensor, parts: list[Tensor]):
        """Yield ``(sel, share, views, x, y)``: clients ``sel`` with a chunk of their samples, their models' views,
        inputs and labels, walking all of each client's samples ``parts[c]`` (without augmentation) in chunks of
        ``width`` samples, at least ``batch_size``, as many as keep a training chunk's ``chunk * batch_size``
        samples in flight: few clients' whole data in one pass (a pass costs its kernel launches, which bound a
        GPU at a MIME round's 10 clients), clients whose chunks have equal sizes together; ``share``: ``size``
        over each client's total."""
        C, P = params.shape
        check(P == self.model.size and len(parts) == C, "params", tuple(params.shape),
              f"(len(parts) = {len(parts)}, {self.model.size})")
        sizes = torch.tensor([len(p) for p in parts])
        check(bool((sizes > 0).all()), "parts", sizes.tolist(), "non-empty index sets")
        in_flight = self.chunk * self.batch_size
        width = max(self.batch_size, in_flight // C)
        for lo in range(0, int(sizes.max()), width):
            take = (sizes - lo).clamp(0, width)
            for size in take.unique().tolist():
                if size == 0:
                    continue
                for sel in torch.nonzero(take == size).flatten().split(max(1, in_flight // size)):
                    idx = torch.stack([torch.as_tensor(parts[c])[lo:lo + size] for c in sel.tolist()])
                    x, y = self._batch(idx.to(self.device), None, augment=False)
                    sel_dev = sel.to(self.device)
                    share = (size / sizes[sel].to(params)).view(-1, 1)
                    yield sel_dev, share, self.model.views(params.index_select(0, sel_dev)), x, y

    @torch.no_grad()
    def full_gradient(self, params: Tensor, parts: list[Tensor]) -> Tensor:
        """Each client's full-batch gradient: the mean-loss gradient of model ``params[c]`` over all of client
        c's training samples ``parts[c]``, without augmentation or weight decay (MIME's ``nabla f_i(x)``,
        Karimireddy et al. 2021). ``(C, P)``; computed in chunks of samples (:meth:`_client_batches`)."""
        out = torch.zeros_like(params)
        with self._inference():
            for sel, share, views, x, y in self._client_batches(params, parts):
                views = [v.contiguous() for v in views.values()]
                out[sel] += torch.cat([g.reshape(len(sel), -1) for g in self._gradient(views, x, y)], 1) * share
        return out

    @torch.no_grad()
    def train_loss(self, params: Tensor, parts: list[Tensor]) -> Tensor:
        """Each client's mean training loss ``(C,)``: model ``params[c]`` on all of client c's samples ``parts[c]``,
        without augmentation (a loss-based client score, e.g. Sync-UCB-ST's); chunks as in :meth:`full_gradient`."""
        out = torch.zeros(len(params), dtype=params.dtype, device=params.device)
        with self._inference():
            for sel, share, views, x, y in self._client_batches(params, parts):
                with self._clients_compute():
                    logits = self.strategy.forward(views, x).to(params.dtype)
                loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                                   reduction="none")
                out[sel] += loss.view(len(sel), -1).mean(1) * share[:, 0]
        return out

    def _per_client(self, value, C: int, name: str) -> Tensor:
        v = torch.as_tensor(value, dtype=self.dtype, device=self.device)
        if v.dim() == 0:
            v = v.expand(C)
        check(v.shape == (C,), name, tuple(v.shape), f"a scalar or shape ({C},)")
        check(bool(torch.isfinite(v).all()), name, v.tolist(), "finite values")
        return v

    @contextlib.contextmanager
    def _inference(self):
        """The network in eval mode (dropout off) for what is not a training step: evaluations, MIME's full-batch
        gradients, clients' training losses; as it was after."""
        module = self.model.module
        training = module.training
        module.eval()
        try:
            yield
        finally:
            module.train(training)

    @torch.no_grad()
    def evaluate(self, params: Tensor, split: str = "test", batch: int = 4096) -> dict[str, Tensor]:
        """Accuracy and mean loss of each of M models ``(M, P)`` (or one ``(P,)``) on a split; the models are
        evaluated together, in chunks that hold as many samples in flight as a training chunk."""
        single = params.dim() == 1
        params = params.reshape(-1, self.model.size)
        x_all = getattr(self.dataset, f"{split}_x")
        y_all = getattr(self.dataset, f"{split}_y")
        M, n = params.shape[0], len(y_all)
        correct = torch.zeros(M, device=self.device)
        loss = torch.zeros(M, device=self.device)
        step = max(1, self.chunk * 3 * self.batch_size // batch)
        with self._inference():
            for m0 in range(0, M, step):
                views = self.model.views(params[m0:m0 + step])
                for lo in range(0, n, batch):
                    x = self.dataset.inputs(x_all[lo:lo + batch])
                    y = y_all[lo:lo + batch]
                    logits = self.strategy.forward(views, x, shared_input=True)
                    loss[m0:m0 + step] += nn.functional.cross_entropy(
                        logits.transpose(1, 2), y.expand(logits.shape[0], -1), reduction="none").sum(1)
                    correct[m0:m0 + step] += (logits.argmax(-1) == y).sum(1)
        out = {"accuracy": correct / n, "loss": loss / n}
        return {k: v[0] for k, v in out.items()} if single else out


def _pair(t: Tensor) -> Tensor:
    """A lone client's ``(1, ...)`` tensor, twice: ``(2, ...)``."""
    return torch.cat([t, t])


def sgd_step_flops(module: nn.Module, sample: Tensor, batch_size: int) -> int:
    """FLOPs of one SGD step (forward + backward) of one client on ``batch_size`` samples."""
    from torch.utils.flop_counter import FlopCounterMode
    x = sample.unsqueeze(0).expand(batch_size, *sample.shape).contiguous()
    params = [p for p in module.parameters()]
    with FlopCounterMode(display=False) as counter:
        out = module(x)
        loss = out.float().sum()
        torch.autograd.grad(loss, params)
    return int(counter.get_total_flops())
