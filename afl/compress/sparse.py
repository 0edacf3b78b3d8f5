"""Sparsifiers (QAFeL Example B.1): send k of the d coordinates, as (index, float32 value) pairs.

* :class:`TopK` ``(fraction)`` -- the ``k = ceil(fraction d)`` coordinates of largest magnitude (ties: the
  lower index first); biased; ``E||Q(x) - x||^2 <= (1 - k/d) ||x||^2``, so ``delta = k/d`` (Stich et al.
  2018, Lemma A.1). QAFeL Table 2's server quantizer is top-k with 10 %.
* :class:`RandK` ``(fraction, rescale, seed)`` -- k coordinates drawn uniformly without replacement;
  ``rescale=False`` sends them as they are (``delta = k/d``), ``rescale=True`` multiplies them by ``d/k``,
  which makes the estimate unbiased with ``E||Q(x) - x||^2 = (d/k - 1) ||x||^2``.

Wire: k indices of ``ceil(log2 d)`` bits each, then k float32 values: ``bits(d) = k (ceil(log2 d) + 32)``.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..errors import check_int, check_real
from .base import FLOAT_BITS, Encoded, Quantizer, Seeded, dim, index_bits


class _Sparse(Quantizer):
    def __init__(self, fraction: float):
        self.fraction = check_real("fraction", fraction, 0, 1, strict_low=True)

    def k(self, d: int) -> int:
        """Coordinates sent of a vector of dimension ``d``: ``ceil(fraction d)``, at least 1 (0 when d = 0)."""
        d = dim(d)
        return min(d, max(1, math.ceil(self.fraction * d - 1e-9))) if d else 0

    def bits(self, d: int) -> int:
        return self.k(d) * (index_bits(d) + FLOAT_BITS)

    @property
    def bits_per_coordinate(self) -> float:
        return self.fraction * FLOAT_BITS

    def _send(self, x: Tensor, index: Tensor, scale: float) -> Encoded:
        index, _ = torch.sort(index, dim=-1)
        return Encoded(torch.gather(x.to(torch.float32), -1, index) * scale, x.shape[-1], index=index)

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        out = msg.codes.new_zeros(*msg.codes.shape[:-1], msg.d)
        return out.scatter_(-1, msg.index, msg.codes)

    def _write(self, msg, w):
        w.uint(msg.index, index_bits(msg.d))
        w.float(msg.codes)

    def _read(self, r, d):
        k = self.k(d)
        index = torch.from_numpy(r.uint(k, index_bits(d)).astype(np.int64))
        return Encoded(torch.from_numpy(r.float(k).copy()), d, index=index)


class TopK(_Sparse):
    """The ``ceil(fraction d)`` largest-magnitude coordinates (biased)."""

    name = "topk"

    def error_bound(self, d: int) -> float:
        return 1.0 - self.k(d) / dim(d) if dim(d) else 0.0

    def encode(self, x: Tensor) -> Encoded:
        k = self.k(x.shape[-1])
        order = torch.argsort(x.abs(), dim=-1, descending=True, stable=True)
        return self._send(x, order[..., :k], 1.0)

    def _params(self) -> tuple:
        return (self.fraction,)

    @property
    def spec(self) -> str:
        return f"topk:{self.fraction!r}"


class RandK(Seeded, _Sparse):
    """``ceil(fraction d)`` uniformly random coordinates, optionally rescaled by ``d/k`` (then unbiased)."""

    name = "randk"

    def __init__(self, fraction: float, rescale: bool = True, seed: int = 0):
        super().__init__(fraction)
        self.rescale = bool(rescale)
        self.seed = check_int("seed", seed, 0)
        self.unbiased = self.rescale

    def error_bound(self, d: int) -> float:
        k, d = self.k(d), dim(d)
        if not d:
            return 0.0
        return d / k - 1.0 if self.rescale else 1.0 - k / d

    def encode(self, x: Tensor, generator: torch.Generator | None = None) -> Encoded:
        d = x.shape[-1]
        k = self.k(d)
        u = torch.rand(x.shape, generator=generator or self.generator(x.device), device=x.device)
        index = torch.argsort(u, dim=-1)[..., :k]
        return self._send(x, index, d / k if self.rescale and k else 1.0)

    def _params(self) -> tuple:
        return (self.fraction, self.rescale, self.seed)

    @property
    def spec(self) -> str:
        return (f"randk:{self.fraction!r}" + ("" if self.rescale else ":rescale=false")
                + (f":seed={self.seed}" if self.seed else ""))
