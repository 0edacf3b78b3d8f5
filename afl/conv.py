"""2-D convolutions whose weight gradient is one matrix product on a GPU.

Under ``vmap`` over clients (:mod:`afl.strategies`) each convolution becomes one grouped convolution, a group per
client. cuDNN computes the forward pass and the input gradient of such a convolution well, but its weight gradient
as one kernel per group: an H100 profile of cnn-cifar, 100 clients x 8 steps in bf16, spent 269 of its 525 ms of
kernels in 800 launches of one CUTLASS weight-gradient kernel (``tools/gpu_visit.py``'s profile). The weight
gradient is a matrix product,

    dW[o, (i, kh, kw)] = sum over samples b and output positions l of  dY[b, o, l] * unfold(X)[b, (i, kh, kw), l],

which under ``vmap`` becomes one batched matmul over clients. :class:`Conv2d` (an ``nn.Conv2d``, same parameters)
computes it so where its input is on a GPU, and is plain ``nn.Conv2d`` elsewhere (on a CPU the engine loops over
clients with oneDNN's kernels, :class:`afl.strategies.LoopStrategy`). Same gradient to float rounding
(``tests/test_models.py``). Under bf16 autocast the product takes the pass's bf16 operands, as cuDNN does.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: device types on which :class:`Conv2d` computes its weight gradient as a matmul (tests add "cpu")
MATMUL_WEIGHT_GRADIENT = {"cuda"}


class _MatmulWeightGradient(torch.autograd.Function):
    """``F.conv2d`` (no groups) with the weight gradient as unfold + matmul; vmap batches it (generated rule)."""

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
            cols = F.unfold(x.to(dtype), w.shape[2:], dilation=dilation, padding=padding, stride=stride)
            gw = torch.einsum("bol,bkl->ok", g.flatten(2), cols).reshape(w.shape).to(w.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum((0, 2, 3)).to(w.dtype)
        return gx, gw, gb, None, None, None


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` whose weight gradient is one matmul on the devices in :data:`MATMUL_WEIGHT_GRADIENT` (zero
    padding, one group; otherwise it is ``nn.Conv2d``)."""

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if (input.device.type in MATMUL_WEIGHT_GRADIENT and self.groups == 1 and self.padding_mode == "zeros"
                and isinstance(self.padding, tuple) and torch.is_grad_enabled()):
            return _MatmulWeightGradient.apply(input, weight, bias, self.stride, self.padding, self.dilation)
        return super()._conv_forward(input, weight, bias)


__all__ = ["Conv2d", "MATMUL_WEIGHT_GRADIENT"]
