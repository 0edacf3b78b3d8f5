"""2-D convolutions whose weight gradient may be one matrix product on a GPU (opt-in, ``AFL_CONV_WEIGHT_GRADIENT``).

Under ``vmap`` over clients (:mod:`afl.strategies`) each convolution becomes one grouped convolution, a group per
client. cuDNN computes its forward pass and input gradient well, but its weight gradient as one kernel per group:
an H100 profile of cnn-cifar, 100 clients x 8 steps in bf16, spent 269 of its 525 ms of kernels in 800 launches of
one CUTLASS weight-gradient kernel (``results/measurements/h100-2026-11-26/``). The weight gradient is a matrix product,

    dW[o, c, i, j] = sum over samples b and output positions (y, x) of  dY[b, o, y, x] * X[b, c, y + i, x + j],

which under ``vmap`` becomes one batched matmul over clients. With ``AFL_CONV_WEIGHT_GRADIENT=matmul``,
:class:`Conv2d` (an ``nn.Conv2d``, same parameters) computes it so where its input is on a GPU; the default,
``cudnn``, is ``nn.Conv2d`` itself. Not the default because it is not yet measured as it stands: the first version
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

#: ``AFL_CONV_WEIGHT_GRADIENT``'s choices: cuDNN's grouped weight gradient, or one matmul on a GPU
WEIGHT_GRADIENTS = ("cudnn", "matmul")


def _matmul_devices() -> set[str]:
    value = os.environ.get("AFL_CONV_WEIGHT_GRADIENT", "cudnn")
    if value not in WEIGHT_GRADIENTS:
        raise ParameterError("AFL_CONV_WEIGHT_GRADIENT", value, "'cudnn' (the default) or 'matmul' (on a GPU)")
    return {"cuda"} if value == "matmul" else set()


#: device types on which :class:`Conv2d` computes its weight gradient as a matmul (tests add "cpu")
MATMUL_WEIGHT_GRADIENT = _matmul_devices()


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
            view = patches(x.to(dtype), w.shape[2:], stride, padding)
            gw = torch.einsum("boyx,bcyxij->ocij", g, view).to(w.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum((0, 2, 3)).to(w.dtype)
        return gx, gw, gb, None, None, None


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` whose weight gradient is one matmul on the devices in :data:`MATMUL_WEIGHT_GRADIENT` (zero
    padding given as numbers, one group, no dilation; otherwise it is ``nn.Conv2d``)."""

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if (input.device.type in MATMUL_WEIGHT_GRADIENT and self.groups == 1 and self.padding_mode == "zeros"
                and isinstance(self.padding, tuple) and self.dilation == (1, 1) and torch.is_grad_enabled()):
            return _MatmulWeightGradient.apply(input, weight, bias, self.stride, self.padding, self.dilation)
        return super()._conv_forward(input, weight, bias)


__all__ = ["Conv2d", "MATMUL_WEIGHT_GRADIENT", "WEIGHT_GRADIENTS", "patches"]
