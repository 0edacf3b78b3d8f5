"""Sparsifiers (QAFeL Example B.1): send k of the d coordinates, as (index, float32 value) pairs.

* :class:`TopK` ``(fraction)`` -- the ``k = ceil(fraction d)`` coordinates of largest magnitude (ties: the
  lower index first); biased; ``E||Q(x) - x||^2 <= (1 - k/d) ||x||^2``, so ``delta = k/d`` (Stich et al.
  2018, Lemma A.1). QAFeL Table 2's server quantizer is top-k with 10 %.
* :class:`RandK` ``(fraction, rescale, seed)`` -- k coordinates drawn uniformly without replacement;
  ``rescale=False`` sends them as they are (``delta = k/d``), ``rescale=True`` multiplies them by ``d/k``,
  which makes the estimate unbiased with ``E||Q(x) - x||^2 = (d/k - 1) ||x||^2``.

Wire: k indices of ``ceil(log2 d)`` bits each, then k float32 values: ``bits(d) = k (ceil(log2 d) + 32)``.

* :class:`MaskedTopK` ``(fraction, shapes)`` -- QAFeL's code (FLSim's ``SparseMaskChannel``, top-k with a
  bitmask): in every tensor of the model, the ``numel - floor((1 - fraction) numel)`` largest-magnitude
  coordinates; wire: a d-bit mask, then the kept values in float32. Its 10 % size on the QAFeL model is Table 2's
  15.404 kB per download (123,234 bits).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..errors import check_int, check_real
from .base import FLOAT_BITS, Encoded, PerTensor, Quantizer, Seeded, dim, finite, index_bits


class _Sparse(Quantizer):
    def __init__(self, fraction: float):
        self.fraction = check_real("fraction", fraction, 0, 1, strict_low=True)

    def k(self, d: int) -> int:
        """Coordinates sent of a vector of dimension ``d``: ``ceil(fraction d)``, at least 1."""
        d = dim(d)
        return min(d, max(1, math.ceil(self.fraction * d - 1e-9)))

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
        return 1.0 - self.k(d) / dim(d)

    def encode(self, x: Tensor) -> Encoded:
        x = finite(x, self.name)
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
        x = finite(x, self.name)
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


class MaskedTopK(PerTensor, _Sparse):
    """Per-tensor top-k with a bitmask (FLSim's sparse mask channel, QAFeL's code): biased; within each tensor
    the error is at most ``1 - k_t / numel_t`` of its squared norm."""

    name = "topk-mask"

    def __init__(self, fraction: float, shapes=None):
        super().__init__(fraction)
        self._set_shapes(shapes, "the mask keeps the top coordinates of each tensor")
        # FLSim: the int(p numel) smallest of every tensor are zeroed, p = 1 - fraction the proportion of zeros
        self.kept = [n - int((1.0 - self.fraction) * n + 1e-9) for n in self.numels]

    def k(self, d: int) -> int:
        self._check_d(d)
        return sum(self.kept)

    def bits(self, d: int) -> int:
        return self._check_d(d) + FLOAT_BITS * sum(self.kept)

    def error_bound(self, d: int) -> float:
        self._check_d(d)
        return max((1.0 - k / n for k, n in zip(self.kept, self.numels) if n), default=0.0)

    def encode(self, x: Tensor) -> Encoded:
        x = finite(x, self.name)
        self._check_d(x.shape[-1])
        index, at = [], 0
        for t, k in zip(torch.split(x, self.numels, dim=-1), self.kept):
            order = torch.argsort(t.abs(), dim=-1, descending=True, stable=True)
            index.append(order[..., :k] + at)
            at += t.shape[-1]
        return self._send(x, torch.cat(index, -1), 1.0)

    def _write(self, msg, w):
        mask = np.zeros(msg.d, dtype=np.uint8)
        mask[msg.index.cpu().numpy()] = 1
        w.uint(mask, 1)
        w.float(msg.codes)

    def _read(self, r, d):
        index = torch.from_numpy(np.flatnonzero(r.uint(d, 1)).astype(np.int64))
        return Encoded(torch.from_numpy(r.float(len(index)).copy()), d, index=index)

    def _params(self) -> tuple:
        return (self.fraction, self.shapes)

    @property
    def spec(self) -> str:
        return f"topk-mask:{self.fraction!r}"
