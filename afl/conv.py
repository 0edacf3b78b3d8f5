"""2-D convolutions whose weight gradient may be one matrix product on a GPU, or chosen per layer by measurement
(opt-in, ``AFL_CONV_WEIGHT_GRADIENT``).

Under ``vmap`` over clients (:mod:`afl.strategies`) each convolution becomes one grouped convolution, a group per
client. cuDNN computes its forward pass and input gradient well, but its weight gradient as one kernel per group:
an H100 profile of cnn-cifar, 100 clients x 8 steps in bf16, spent 269 of its 525 ms of kernels in 800 launches of
one CUTLASS weight-gradient kernel (``results/measurements/h100-2026-11-26/``). The weight gradient is a matrix product,

    dW[o, c, i, j] = sum over samples b and output positions (y, x) of  dY[b, o, y, x] * X[b, c, y + i, x + j],

which under ``vmap`` becomes one batched matmul over clients. With ``AFL_CONV_WEIGHT_GRADIENT=matmul``,
:class:`Conv2d` (an ``nn.Conv2d``, same parameters) computes it so where its input is on a GPU; with ``auto``, each
layer takes whichever of the matmul and cuDNN's own weight gradient ran faster there, timed once per layer, number of
clients and precision at its first backward pass (:func:`weight_gradient`, :data:`CHOICES`); the default, ``cudnn``,
is ``nn.Conv2d`` itself. Not the default because neither is measured end to end on a GPU yet: the first version
took its patches with ``F.unfold``, whose CUDA kernel PyTorch launches once per sample (a loop over the batch in
``Im2Col.cu``: 25,600 launches for 400 clients of 64 images), and ran at 651 client-steps/s at every width where
cuDNN ran 1,579-3,104. The patches are now a strided view (``Tensor.unfold``) and one copy;
``tools/conv_wgrad_probe.py`` times the ways side by side for the next GPU job. Same gradients to float rounding
(``tests/test_conv.py``).
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .errors import ParameterError

#: ``AFL_CONV_WEIGHT_GRADIENT``'s choices: cuDNN's grouped weight gradient, one matmul on a GPU, or per layer the
#: faster of the two as measured on the device (``auto``)
WEIGHT_GRADIENTS = ("cudnn", "matmul", "auto")


def _setting() -> str:
    value = os.environ.get("AFL_CONV_WEIGHT_GRADIENT", "cudnn")
    if value not in WEIGHT_GRADIENTS:
        raise ParameterError("AFL_CONV_WEIGHT_GRADIENT", value, "'cudnn' (the default), 'matmul' or 'auto' (on a "
                             "GPU: per layer, the faster of the two as measured there)")
    return value


def _matmul_devices() -> set[str]:
    return set() if _setting() == "cudnn" else {"cuda"}


#: device types on which :class:`Conv2d` computes its weight gradient by :class:`_MatmulWeightGradient` (tests add
#: "cpu")
MATMUL_WEIGHT_GRADIENT = _matmul_devices()
#: device types on which that weight gradient is, per layer, whichever of the matmul and the convolution's own
#: weight gradient measured faster there (:func:`weight_gradient`; tests add "cpu")
MEASURED_WEIGHT_GRADIENT = {"cuda"} if _setting() == "auto" else set()
#: the measured choices: (device, dtype, the layer's shapes with clients, stride, padding) -> (way, seconds of each)
CHOICES: dict = {}


def patches(x: Tensor, kernel: tuple[int, int], stride, padding) -> Tensor:
    """``(B, C, Ho, Wo, kh, kw)``: every output position's input patch (no dilation), a view of ``x`` zero-padded."""
    if any(padding):
        x = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    return x.unfold(2, kernel[0], stride[0]).unfold(3, kernel[1], stride[1])


class _MatmulWeightGradient(torch.autograd.Function):
    """``F.conv2d`` (one group) with the weight gradient as patches x output gradient; vmap batches it (generated
    rule)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, w: Tensor, b: Tensor | None, stride, padding, dilation) -> Tensor:
        return F.conv2d(x, w, b, stride, padding, dilation)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, b, stride, padding, dilation = inputs
        ctx.save_for_backward(x, w)
        ctx.geometry = (stride, padding, dilation)
        ctx.has_bias = b is not None

    @staticmethod
    def backward(ctx, g: Tensor):
        x, w = ctx.saved_tensors
        stride, padding, dilation = ctx.geometry
        dtype = g.dtype                                   # the pass's compute type (bf16 under autocast)
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = torch.nn.grad.conv2d_input(x.shape, w.to(dtype), g, stride, padding, dilation).to(x.dtype)
        if ctx.needs_input_grad[1]:
            gw = weight_gradient(x.to(dtype), w, g, stride, padding, dilation).to(w.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum((0, 2, 3)).to(w.dtype)
        return gx, gw, gb, None, None, None


def by_matmul(x: Tensor, w: Tensor, g: Tensor, stride, padding, dilation) -> Tensor:
    """The weight gradient as one product of the output gradient and the input's patches (a batched matmul over
    clients under ``vmap``)."""
    return torch.einsum("boyx,bcyxij->ocij", g, patches(x, w.shape[2:], stride, padding))


def by_convolution(x: Tensor, w: Tensor, g: Tensor, stride, padding, dilation) -> Tensor:
    """The weight gradient as the convolution library computes it (cuDNN, oneDNN; grouped under ``vmap``)."""
    return torch.nn.grad.conv2d_weight(x, w.shape, g, stride, padding, dilation)


WAYS = {"matmul": by_matmul, "convolution": by_convolution}


def _physical(t: Tensor) -> tuple:
    """``t``'s shape with the dimensions ``vmap`` hides (the clients of an engine call)."""
    functorch = torch._C._functorch
    while functorch.is_batchedtensor(t):
        t = functorch.get_unwrapped(t)
    return tuple(t.shape)


def _seconds(fn, device: torch.device, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` after one untimed (its first call's set-up excluded)."""
    import time
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    best = float("inf")
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def weight_gradient(x: Tensor, w: Tensor, g: Tensor, stride, padding, dilation) -> Tensor:
    """``dL/dW`` of a convolution: by matmul, or where the device is in :data:`MEASURED_WEIGHT_GRADIENT`, by the way
    measured faster for this layer, clients and precision (measured once, at its first backward pass outside a CUDA
    graph's capture; :data:`CHOICES`)."""
    if x.device.type not in MEASURED_WEIGHT_GRADIENT:
        return by_matmul(x, w, g, stride, padding, dilation)
    key = (str(x.device), str(g.dtype), _physical(x), _physical(g), tuple(w.shape), tuple(stride), tuple(padding))
    if key not in CHOICES:
        if x.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return by_convolution(x, w, g, stride, padding, dilation)       # no timing inside a capture
        times = {name: _seconds(lambda fn=fn: fn(x, w, g, stride, padding, dilation), x.device)
                 for name, fn in WAYS.items()}
        CHOICES[key] = (min(times, key=times.get), times)
    return WAYS[CHOICES[key][0]](x, w, g, stride, padding, dilation)


def choices() -> dict:
    """How many layers took each way, as measured (for a benchmark's report)."""
    out: dict = {}
    for way, _ in CHOICES.values():
        out[way] = out.get(way, 0) + 1
    return out


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` whose weight gradient is one matmul on the devices in :data:`MATMUL_WEIGHT_GRADIENT` (zero
    padding given as numbers, one group, no dilation; otherwise it is ``nn.Conv2d``)."""

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if (input.device.type in MATMUL_WEIGHT_GRADIENT and self.groups == 1 and self.padding_mode == "zeros"
                and isinstance(self.padding, tuple) and self.dilation == (1, 1) and torch.is_grad_enabled()):
            return _MatmulWeightGradient.apply(input, weight, bias, self.stride, self.padding, self.dilation)
        return super()._conv_forward(input, weight, bias)


__all__ = ["Conv2d", "MATMUL_WEIGHT_GRADIENT", "MEASURED_WEIGHT_GRADIENT", "CHOICES", "WEIGHT_GRADIENTS", "WAYS",
           "patches", "by_matmul", "by_convolution", "weight_gradient", "choices"]
