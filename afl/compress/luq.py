"""Logarithmic unbiased quantization (LUQ; Chmiel et al. 2021, used by FAVAS Remark 6).

With ``bits`` bits per coordinate -- one sign bit and ``bits - 1`` bits of exponent code -- and ``L = 2^(bits-1)
- 1`` non-zero levels, the magnitudes that can be sent are ``0`` and ``alpha 2^j`` for ``j = 0 .. L - 1``, where
``alpha = max|x_i| / 2^(L-1)`` puts the top level at the vector's largest magnitude (sent as one float32).
A coordinate below ``alpha`` underflows stochastically: it is sent as ``alpha`` with probability
``|x_i| / alpha`` and as 0 otherwise; one between two levels ``a < |x_i| <= 2a`` is rounded up with probability
``(|x_i| - a) / a`` and down otherwise. Both rules keep every coordinate unbiased; the error of a coordinate
is at most ``max(alpha, |x_i|)^2 / 4``. Wire: ``bits(d) = bits d + 32``.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..errors import check_int
from .base import FLOAT_BITS, Encoded, Quantizer, Seeded, dim, finite

LUQ_BITS = (2, 8)


class LUQ(Seeded, Quantizer):
    """Unbiased logarithmic quantizer: signed powers of two below the vector's largest magnitude."""

    name = "luq"
    unbiased = True

    def __init__(self, bits: int, seed: int = 0):
        self.b = check_int("bits", bits, *LUQ_BITS, hint="sign included")
        self.seed = check_int("seed", seed, 0)
        self.levels = 2 ** (self.b - 1) - 1

    def bits(self, d: int) -> int:
        return self.b * dim(d) + FLOAT_BITS

    @property
    def bits_per_coordinate(self) -> float:
        return self.b

    def error_bound(self, d: int) -> float:
        """``sum_i max(alpha, |x_i|)^2 / 4 <= (||x||^2 + d alpha^2) / 4`` with ``alpha <= ||x|| / 2^(L-1)``."""
        return (1 + dim(d) / 4.0 ** (self.levels - 1)) / 4

    def _alpha(self, top: Tensor) -> Tensor:
        return top / 2.0 ** (self.levels - 1)

    def encode(self, x: Tensor, generator: torch.Generator | None = None) -> Encoded:
        x = finite(x, self.name)
        x = x.to(torch.float32)
        top = x.abs().amax(-1, keepdim=True)
        alpha = torch.where(top > 0, self._alpha(top), torch.ones_like(top))
        m = x.abs() / alpha                                   # in units of alpha: levels are 2^j, j < L
        u = torch.rand(x.shape, generator=generator or self.generator(x.device), device=x.device)
        low = torch.where(m >= 1, torch.exp2(torch.floor(torch.log2(m.clamp_min(1)))), torch.zeros_like(m))
        low = low.clamp_max(2.0 ** (self.levels - 1))
        step = torch.where(m >= 1, low, torch.ones_like(m))   # distance to the next level up
        up = (u < (m - low) / step) & (low < 2.0 ** (self.levels - 1))
        level = torch.where(up, torch.where(low > 0, 2 * low, torch.ones_like(low)), low)
        code = torch.where(level > 0, torch.log2(level.clamp_min(1)).round() + 1, torch.zeros_like(level))
        codes = (code * torch.where(x < 0, -1.0, 1.0)).to(torch.int64)        # sign(x) * (j + 1), 0 for zero
        return Encoded(codes, x.shape[-1], scale=top.squeeze(-1))

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        top = msg.scale[..., None]
        alpha = self._alpha(top)
        mag = torch.where(msg.codes != 0, torch.exp2(msg.codes.abs().to(torch.float32) - 1), torch.zeros(()))
        return torch.sign(msg.codes).to(torch.float32) * mag * alpha

    def _write(self, msg, w):                 # the scale, then per coordinate: sign bit, exponent code
        w.float(msg.scale.reshape(1))
        w.uint((msg.codes < 0).to(torch.int64) << (self.b - 1) | msg.codes.abs(), self.b)

    def _read(self, r, d):
        top = torch.from_numpy(r.float(1).copy())[0]
        raw = torch.from_numpy(r.uint(d, self.b).astype(np.int64))
        sign = 1 - 2 * (raw >> (self.b - 1))
        return Encoded(sign * (raw & ((1 << (self.b - 1)) - 1)), d, scale=top)

    def _params(self) -> tuple:
        return (self.b, self.seed)

    @property
    def spec(self) -> str:
        return f"luq:{self.b}" + (f":seed={self.seed}" if self.seed else "")
