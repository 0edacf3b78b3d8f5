"""How the engine computes one local SGD step of many clients: a strategy per (device, model).

Every strategy computes the same thing -- for k clients with parameters stacked on a leading client axis
(one ``(k, *shape)`` tensor per model parameter) and their mini-batches ``x`` ``(k, B, ...)``, ``y``
``(k, B)``, each client's gradient of its own mean loss -- and differs only in how:

* ``"vmap"`` -- ``torch.func.vmap`` of the model's forward over the client axis, one autograd pass. Batched
  matmuls for linear layers; every convolution becomes one grouped convolution (fast on GPUs, slow on CPUs),
  optionally fed channels-last (``channels_last=True``, with the engine's ``precision="bf16"``).
* ``"loop"`` -- a plain loop over clients, each a ``functional_call`` of the model on its own parameters
  (views of the stacked tensors), images in channels-last layout. On a CPU this is what oneDNN's convolution
  and pooling kernels are fastest at (measured: ``afl bench local-sgd``), except for models with a GroupNorm of
  one channel per group, whose channels-last kernel is slow: those stay in NCHW (QAFeL's CNN: 58 against 46
  client-steps/s at batch 32 on a 2-core CPU; ResNet-20, GroupNorm(2): 7.6 channels-last against 7.0). There
  the NCHW max-pool is a quarter of a step (1.2 ms a call of 32 x 32 x 34 x 34 against 0.19 ms channels-last),
  but neither converting to channels-last around each pool (17.9 -> 20.0 ms a step) nor four strided maxima with
  the kernel's tie rule (3.9 ms a call) beats it (measured 2026-11-27).
* ``"lstm"`` -- :class:`afl.models.CharLSTM` with the client axis written into every op (batched matmuls, the
  embedding as a one-hot matmul), one plain autograd pass: the same maths as ``vmap`` without its dispatch on each
  of the recurrence's thousands of small ops a step, which bounds a ``vmap`` step (about 0.1 s on an H100).
* ``"lstm-loop"`` -- :class:`afl.models.CharLSTM` one client at a time through PyTorch's fused LSTM op
  (``torch.lstm``), the CPU's choice: its kernel walks the recurrence in a few large calls.
* ``"mlp"`` -- :class:`afl.models.MLP` (Linear-ReLU-...-Linear with cross-entropy) with its forward and
  backward written out as batched matmuls (``baddbmm``), no autograd; without a correction hook the SGD
  update is fused into the weight-gradient matmul (``W <- (1 - lr wd) W - lr g^T h``).

:func:`choose_strategy` picks ``mlp`` for afl's MLPs trained with cross-entropy, for the character LSTM ``lstm-loop``
on a CPU and ``lstm`` elsewhere, ``loop`` for models with convolutions on a CPU, ``vmap`` otherwise. Every strategy
equals the per-client ``torch.optim.SGD`` oracle to float tolerance (``tests/test_engine.py``).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from .errors import ParameterError, check_choice
from .models import MLP, CharLSTM, lstm_cell

STRATEGIES = ("auto", "vmap", "loop", "mlp", "lstm", "lstm-loop")


def cross_entropy_sum(logits: Tensor, y: Tensor) -> Tensor:
    """Sum over clients of each client's mean cross-entropy; ``logits`` ``(C, B, K)``, ``y`` ``(C, B)``."""
    C, B = y.shape
    return nn.functional.cross_entropy(logits.reshape(C * B, -1), y.reshape(-1), reduction="sum") / B


class Strategy:
    """Per-client gradients and forwards of one model over stacked parameters (see the module docstring)."""

    name = "strategy"
    fused_update = False      # has :meth:`sgd_step`, a plain SGD step without materialized gradients
    # one kernel call for all k clients: its rounding for k = 1 may differ from k >= 2 (afl.engine pairs a lone one)
    batched = True

    def __init__(self, module: nn.Module, names: list[str], loss: Callable[[Tensor, Tensor], Tensor]):
        self.module, self.names, self.loss = module, names, loss
        self.buffers = dict(module.named_buffers())

    def gradient(self, params: list[Tensor], x: Tensor, y: Tensor) -> list[Tensor]:
        """One ``(k, *shape)`` gradient per parameter of each client's loss on its batch."""
        raise NotImplementedError

    def forward(self, params: dict[str, Tensor], x: Tensor, shared_input: bool = False) -> Tensor:
        """Outputs ``(k, B, ...)`` of k models (``params``: name -> ``(k, *shape)``) on their inputs
        ``(k, B, ...)``, or on one input ``(B, ...)`` for all with ``shared_input``."""
        raise NotImplementedError

    def sgd_step(self, params: list[Tensor], x: Tensor, y: Tensor, lr: Tensor, wd: Tensor | None) -> None:
        raise NotImplementedError

    def _autograd_gradient(self, params: list[Tensor], x: Tensor, y: Tensor) -> list[Tensor]:
        """The gradients by one autograd pass through :meth:`forward` (the clients' losses are summed; each
        client's parameters reach only its own loss)."""
        leaves = {n: p.detach().requires_grad_(True) for n, p in zip(self.names, params)}
        with torch.enable_grad():
            return list(torch.autograd.grad(self.loss(self.forward(leaves, x), y), list(leaves.values())))

    def __repr__(self) -> str:
        return self.name


class VmapStrategy(Strategy):
    name = "vmap"

    def __init__(self, module, names, loss, channels_last: bool = False):
        super().__init__(module, names, loss)
        self.channels_last = channels_last and any(isinstance(m, nn.Conv2d) for m in module.modules())

    def _one(self, p, xb):
        return functional_call(self.module, (p, self.buffers), (xb,))

    def _layout(self, x: Tensor, shared_input: bool) -> Tensor:
        """Images channels-last. vmap folds the client axis k into the channels of one grouped convolution,
        ``(k, B, C, H, W) -> (B, k*C, H, W)``; stored in memory order (B, H, W, k, C), that folded input is a
        channels-last view, not a copy."""
        if not self.channels_last or x.dim() != (4 if shared_input else 5):
            return x
        if shared_input:
            return x.contiguous(memory_format=torch.channels_last)
        return x.permute(1, 3, 4, 0, 2).contiguous().permute(3, 0, 4, 1, 2)

    def forward(self, params, x, shared_input=False):
        # randomness "different": a dropout layer draws each client's own mask (a model without one draws nothing)
        return vmap(self._one, in_dims=(0, None if shared_input else 0), randomness="different")(
            params, self._layout(x, shared_input))

    def gradient(self, params, x, y):
        return self._autograd_gradient(params, x, y)


class LoopStrategy(Strategy):
    name = "loop"
    batched = False           # a call per client: a client computes alike alone and in company

    def __init__(self, module, names, loss):
        super().__init__(module, names, loss)
        self.channels_last = not any(isinstance(m, nn.GroupNorm) and m.num_groups == m.num_channels
                                     for m in module.modules())

    def _layout(self, x: Tensor) -> Tensor:
        if x.dim() != 4:
            return x
        return x.contiguous(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)

    def _client(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """One client's outputs: its parameters (name -> tensor) on its laid-out input ``(B, ...)``."""
        return functional_call(self.module, (params, self.buffers), (x,))

    def forward(self, params, x, shared_input=False):
        k = next(iter(params.values())).shape[0]
        if shared_input:
            x = self._layout(x)
        return torch.stack([self._client({n: p[c] for n, p in params.items()},
                                         x if shared_input else self._layout(x[c])) for c in range(k)])

    def gradient(self, params, x, y):
        grads = [torch.empty_like(p) for p in params]
        with torch.enable_grad():
            for c in range(len(x)):
                leaves = {n: p[c].detach().requires_grad_(True) for n, p in zip(self.names, params)}
                out = self._client(leaves, self._layout(x[c]))
                for g, gc in zip(grads, torch.autograd.grad(self.loss(out[None], y[c:c + 1]), list(leaves.values()))):
                    g[c].copy_(gc)
        return grads


class LSTMStrategy(Strategy):
    """:class:`afl.models.CharLSTM` for k clients at once: :class:`afl.models.StackedLSTM`'s recurrence with
    ``(k, ...)`` parameters, every matmul a batched one (``baddbmm``), the embedding ``onehot(x) E`` (a matmul,
    so that its gradient is one too, in a fixed order).

    On a GPU the cell's pointwise part runs as one kernel forward and one backward (``fused_cell``: PyTorch's own
    LSTM cell kernel, the one ``nn.LSTMCell`` uses, on the clients' gate pre-activations). By count that is about
    25 kernel launches fewer per cell, some 4,000 per step of the two-layer LSTM on 80 characters, and launches,
    not arithmetic, bound a step at the few hundred clients a round trains (an H100: 647 -> 1,101 client-steps/s
    at 50 clients). Same maths as :func:`afl.models.lstm_cell`, its path on a CPU.

    A CPU trains the LSTM faster client by client (:class:`LSTMLoopStrategy`). A hand-written backward through time
    for this strategy (no autograd, every pointwise op on contiguous ``(k, H, B)`` blocks, the input and recurrent
    matmuls joined), tried as a prototype and not kept, was no faster on one core than its autograd pass (1.43 s
    per step of 10 clients at batch 100 on 80 characters)."""

    name = "lstm"

    def __init__(self, module, names, loss):
        super().__init__(module, names, loss)
        if not isinstance(module, CharLSTM):
            raise ParameterError("strategy", self.name, f"'vmap' or 'loop' for a {type(module).__name__} "
                                 "(the 'lstm' strategy trains afl.models.CharLSTM)")
        self.layers = module.lstm.num_layers
        self.fused_cell = hasattr(torch.ops.aten, "_thnn_fused_lstm_cell")    # used where tensors are on a GPU

    def forward(self, params, x, shared_input=False):
        emb = params["embedding.weight"]                                   # (k, V, E)
        k, V = emb.shape[:2]
        if shared_input:
            x = x.expand(k, *x.shape)
        _, B, T = x.shape
        fused = self.fused_cell and emb.is_cuda
        h_in = torch.bmm(nn.functional.one_hot(x.reshape(k, B * T), V).to(emb.dtype), emb)   # (k, B T, E)
        for layer in range(self.layers):
            w_ih, w_hh = params[f"lstm.weight_ih_l{layer}"], params[f"lstm.weight_hh_l{layer}"]
            bias = params[f"lstm.bias_ih_l{layer}"] + params[f"lstm.bias_hh_l{layer}"]
            xg = torch.baddbmm(bias.unsqueeze(1), h_in, w_ih.transpose(1, 2)).view(k, B, T, -1)
            xg = xg.permute(2, 0, 1, 3).contiguous().unbind(0) if fused else xg.unbind(2)   # T x (k, B, 4H)
            top = layer == self.layers - 1
            h = c = None
            outs = []
            for t in range(T):
                if fused:
                    h, c = _fused_cell(xg[t], None if h is None else torch.bmm(h, w_hh.transpose(1, 2)), c)
                else:
                    h, c = lstm_cell(xg[t] if h is None else torch.baddbmm(xg[t], h, w_hh.transpose(1, 2)), c)
                if not top:
                    outs.append(h)
            if not top:
                h_in = torch.stack(outs, dim=2).reshape(k, B * T, -1)
        return torch.baddbmm(params["fc.bias"].unsqueeze(1), h, params["fc.weight"].transpose(1, 2))

    def gradient(self, params, x, y):
        return self._autograd_gradient(params, x, y)


class LSTMLoopStrategy(LoopStrategy):
    """:class:`afl.models.CharLSTM` one client at a time through PyTorch's own LSTM (``torch.lstm``, the op behind
    ``nn.LSTM``; on a CPU its fused kernel from oneDNN), each client's gradient its own autograd pass. Same maths as
    :class:`afl.models.StackedLSTM`; the embedding is ``onehot(x) E`` as in :class:`LSTMStrategy`.

    The CPU's choice: the fused kernel walks the recurrence in a few large calls where the batched matmul form
    makes thousands of small ones. GHBM's Shakespeare LSTM (two layers of 100, batch 100, 80 characters), 20
    clients on a 2-core AMD EPYC: 21.1 client-steps/s against the ``lstm`` strategy's 12.0 on both threads, 22.6
    against 15.3 as two one-thread processes (``afl bench local-sgd --models char-lstm --clients 20 --processes 2
    --strategy ...``, ``results/measurements/cpu-2-2026-12-07``). A client computes alike alone and in company
    (one call per client)."""

    name = "lstm-loop"

    def __init__(self, module, names, loss):
        super().__init__(module, names, loss)
        if not isinstance(module, CharLSTM):
            raise ParameterError("strategy", self.name, f"'vmap' or 'loop' for a {type(module).__name__} "
                                 "(the 'lstm-loop' strategy trains afl.models.CharLSTM)")
        lstm = module.lstm
        self.layers, self.hidden = lstm.num_layers, lstm.hidden_size
        self.weight_names = [f"lstm.{w}_l{layer}" for layer in range(self.layers)
                             for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def _client(self, params, x):
        emb = params["embedding.weight"]                                    # (V, E)
        B = x.shape[0]
        h = nn.functional.one_hot(x, emb.shape[0]).to(emb.dtype) @ emb      # (B, T, E)
        h0 = h.new_zeros(self.layers, B, self.hidden)
        # (input, (h0, c0), weights, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        out = torch.lstm(h, (h0, h0), [params[n] for n in self.weight_names], True, self.layers, 0.0,
                         torch.is_grad_enabled(), False, True)[0]
        return nn.functional.linear(out[:, -1], params["fc.weight"], params["fc.bias"])


def _fused_cell(input_gates: Tensor, hidden_gates: Tensor | None, c: Tensor | None) -> tuple[Tensor, Tensor]:
    """:func:`afl.models.lstm_cell` of ``input_gates + hidden_gates`` (``(k, B, 4H)``; None: zero) and the cell
    state ``c`` (None: zero) by PyTorch's fused CUDA kernel, which takes rows ``(N, 4H)``."""
    k, B, G = input_gates.shape
    if hidden_gates is None:
        hidden_gates = torch.zeros_like(input_gates)
    if c is None:
        c = input_gates.new_zeros(k, B, G // 4)
    h, c, _ = torch.ops.aten._thnn_fused_lstm_cell(input_gates.reshape(k * B, G), hidden_gates.reshape(k * B, G),
                                                   c.reshape(k * B, G // 4))
    return h.view(k, B, -1), c.view(k, B, -1)


class FusedMLPStrategy(Strategy):
    """:class:`afl.models.MLP` with cross-entropy, forward and backward as batched matmuls (no autograd).

    With ``h_0 = flatten(x)``, ``z_l = h_{l-1} W_l^T + b_l``, ``h_l = relu(z_l)`` and ``p = softmax(z_L)``,
    the per-client gradient of the mean loss is ``g_L = (p - onehot(y)) / B``, ``dW_l = g_l^T h_{l-1}``,
    ``db_l = sum_b g_l``, ``g_{l-1} = (g_l W_l) * [h_{l-1} > 0]`` (the ReLU derivative autograd uses).
    """

    name = "mlp"
    fused_update = True

    def __init__(self, module, names, loss):
        super().__init__(module, names, loss)
        if not isinstance(module, MLP):
            raise ParameterError("strategy", self.name, f"'vmap' or 'loop' for a {type(module).__name__} "
                                 "(the 'mlp' strategy trains afl.models.MLP)")
        self.layers = module.n_layers

    def forward(self, params, x, shared_input=False):
        return self._forward([params[n] for n in self.names], x, shared_input)[-1]

    def _forward(self, params: list[Tensor], x: Tensor, shared_input: bool = False) -> list[Tensor]:
        """``[h_0, h_1, ..., z_L]`` for k clients."""
        k = params[0].shape[0]
        h = x.reshape(x.shape[0], -1).expand(k, -1, -1) if shared_input else x.reshape(k, x.shape[1], -1)
        hs = [h]
        for i in range(self.layers):
            w, b = params[2 * i], params[2 * i + 1]
            z = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            h = z.clamp_min_(0) if i < self.layers - 1 else z
            hs.append(h)
        return hs

    def _output_grad(self, logits: Tensor, y: Tensor) -> Tensor:
        """``(softmax(z) - onehot(y)) / B``. On a CPU the softmax is written out: PyTorch's kernel over 10 classes
        took 3x as long (230 against 75 us for 20 clients x 128 samples, 8 % of an mlp32 step); a GPU keeps its
        one fused kernel."""
        if logits.is_cuda:
            g = torch.softmax(logits, dim=-1)
        else:
            g = (logits - logits.amax(-1, keepdim=True)).exp_()
            g.div_(g.sum(-1, keepdim=True))
        k, B, K = g.shape
        g.view(k * B, K).scatter_add_(1, y.reshape(-1, 1), g.new_full((1, 1), -1.0).expand(k * B, 1))
        return g.div_(B)

    def _backward(self, params, hs, g, at_layer) -> None:
        """Walk the layers backwards; ``at_layer(i, g_i, h_{i-1})`` may update layer i (its weight is read
        before the call, for the next layer's gradient)."""
        for i in reversed(range(self.layers)):
            g_below = torch.bmm(g, params[2 * i]).mul_(hs[i] > 0) if i > 0 else None
            at_layer(i, g, hs[i])
            g = g_below

    def gradient(self, params, x, y):
        hs = self._forward(params, x)
        grads: list[Tensor | None] = [None] * len(params)

        def store(i, g, h):
            grads[2 * i] = torch.bmm(g.transpose(1, 2), h)
            grads[2 * i + 1] = g.sum(1)
        self._backward(params, hs, self._output_grad(hs[-1], y), store)
        return grads

    def sgd_step(self, params, x, y, lr, wd):
        hs = self._forward(params, x)
        g = self._output_grad(hs[-1], y).mul_(lr.view(-1, 1, 1))          # lr_c * dL/dz, per client
        decay = None if wd is None else (1 - lr * wd).view(-1, 1, 1)

        def update(i, g, h):
            w, b = params[2 * i], params[2 * i + 1]
            if decay is not None:
                w.mul_(decay)
                b.mul_(decay.view(-1, 1))
            w.baddbmm_(g.transpose(1, 2), h, alpha=-1.0)
            b.sub_(g.sum(1))
        self._backward(params, hs, g, update)


def choose_strategy(module: nn.Module, device: torch.device, loss) -> str:
    """``mlp`` for afl's MLPs with cross-entropy, for the character LSTM ``lstm-loop`` on a CPU and ``lstm``
    elsewhere, ``loop`` for conv nets on a CPU, ``vmap`` otherwise."""
    if isinstance(module, MLP) and loss is cross_entropy_sum:
        return "mlp"
    if isinstance(module, CharLSTM):
        return "lstm-loop" if device.type == "cpu" else "lstm"
    if device.type == "cpu" and any(isinstance(m, nn.Conv2d) for m in module.modules()):
        return "loop"
    return "vmap"


def make_strategy(name: str, module: nn.Module, names: list[str], loss, device: torch.device,
                  channels_last: bool = False) -> Strategy:
    """The strategy ``name`` (one of :data:`STRATEGIES`; ``"auto"``: :func:`choose_strategy`); ``channels_last``:
    vmap's images channels-last (``loop`` lays them out so on its own; ``mlp`` has no images)."""
    check_choice("strategy", name, STRATEGIES)
    if name == "auto":
        name = choose_strategy(module, device, loss)
    if name == "mlp" and loss is not cross_entropy_sum:
        raise ParameterError("strategy", name, "'vmap' or 'loop' for a loss other than cross-entropy")
    if name == "vmap":
        return VmapStrategy(module, names, loss, channels_last=channels_last)
    return {"loop": LoopStrategy, "mlp": FusedMLPStrategy, "lstm": LSTMStrategy,
            "lstm-loop": LSTMLoopStrategy}[name](module, names, loss)


__all__ = ["STRATEGIES", "Strategy", "VmapStrategy", "LoopStrategy", "LSTMStrategy", "LSTMLoopStrategy",
           "FusedMLPStrategy", "choose_strategy", "make_strategy", "cross_entropy_sum"]
