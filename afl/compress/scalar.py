"""Scalar quantizers that keep every coordinate: full precision, FLSim's min-max channel, stochastic rounding.

* :class:`Identity` -- float32 as is: ``bits(d) = 32 d``.
* :class:`ScalarChannel` ``(bits, shapes)`` -- the "n-bit qsgd" of QAFeL's CelebA tables, which its code
  (TomasOrtega/FLSim, ``ScalarQuantizationChannel``) implements as *deterministic* affine min-max quantization
  per tensor (PyTorch's ``MinMaxObserver`` + ``quantize_per_tensor``, codes in ``[0, 2^bits - 1]``): only
  tensors with more than one dimension are quantized, biases and norm parameters travel as float32. Per
  quantized tensor: ``numel * bits`` bits of codes, a float64 scale and an int32 zero point (96 bits); per
  other element 32 bits. On the QAFeL model (29,282 parameters) that is 29,924 / 15,380 / 8,108 bytes for
  8 / 4 / 2 bits, QAFeL Table 1's sizes exactly.
* :class:`StochasticRounding` ``(bits, seed)`` -- each coordinate rounded to the grid of ``2^bits`` levels
  between the vector's min and max, up or down with the probabilities that make it unbiased; min and max
  travel as float32: ``bits(d) = bits d + 64``.
"""
from __future__ import annotations


import numpy as np
import torch
from torch import Tensor

from ..errors import check_int
from .base import FLOAT_BITS, Encoded, PerTensor, Quantizer, Seeded, dim, finite

CHANNEL_BITS = (1, 8)       # FLSim's ScalarQuantizationChannel: 1 to 8 bits (quint8 codes)
SR_BITS = (1, 24)


class Identity(Quantizer):
    """Full precision: the sender's values as they are, counted as float32 on the wire, ``bits(d) = 32 d``."""

    name = "identity"
    unbiased = True

    def bits(self, d: int) -> int:
        return FLOAT_BITS * dim(d)

    @property
    def bits_per_coordinate(self) -> float:
        return FLOAT_BITS

    def error_bound(self, d: int) -> float:
        return 0.0

    def encode(self, x: Tensor) -> Encoded:
        x = finite(x, self.name)
        return Encoded(x.clone(), x.shape[-1])

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        return msg.codes.clone()

    def _write(self, msg, w):
        w.float(msg.codes)

    def _read(self, r, d):
        return Encoded(torch.from_numpy(r.float(d).copy()), d)

    @property
    def spec(self) -> str:
        return "identity"


class ScalarChannel(PerTensor, Quantizer):
    """FLSim's per-tensor affine min-max channel (QAFeL's code): ``bits`` bits per weight of every tensor with
    ``ndim > 1`` among ``shapes`` (the model's parameter shapes, in the order of the flat vector), the rest in
    float32. Deterministic and biased; ``decode`` returns ``(code - zero_point) * scale`` per tensor."""

    name = "scalar"

    def __init__(self, bits: int, shapes=None):
        self.b = check_int("bits", bits, *CHANNEL_BITS, hint="FLSim's channel sends quint8 codes")
        self._set_shapes(shapes, "the channel quantizes each tensor with ndim > 1 on its own")
        self.quantized = [len(s) > 1 for s in self.shapes]
        self.q_sizes = [n for n, q in zip(self.numels, self.quantized) if q]        # quantized tensors' sizes
        self.f_sizes = [n for n, q in zip(self.numels, self.quantized) if not q]    # float32 tensors' sizes
        self.qmax = 2 ** self.b - 1

    def bits(self, d: int) -> int:
        self._check_d(d)
        return sum(n * self.b + 96 if q else FLOAT_BITS * n for n, q in zip(self.numels, self.quantized))

    @property
    def bits_per_coordinate(self) -> float:
        return self.b

    def error_bound(self, d: int) -> float:
        """Per tensor, every coordinate is within ``scale / 2`` of its value, ``scale = range / (2^b - 1)`` and
        ``range^2 <= 2 ||x_t||^2``: ``E||Q(x) - x||^2 <= max_t numel_t / (2 (2^b - 1)^2) ||x||^2``."""
        self._check_d(d)
        return max(self.q_sizes, default=0) / (2 * self.qmax ** 2)

    def _tensors(self, x: Tensor):
        return torch.split(x, self.numels, dim=-1)

    def encode(self, x: Tensor) -> Encoded:
        x = finite(x, self.name)
        self._check_d(x.shape[-1])
        codes, scales, zeros, values = [], [], [], []
        for t, q in zip(self._tensors(x.to(torch.float32)), self.quantized):
            if not q:
                values.append(t)
                continue
            lo = t.amin(dim=-1, keepdim=True).clamp(max=0).double()      # MinMaxObserver: the range holds 0
            hi = t.amax(dim=-1, keepdim=True).clamp(min=0).double()
            scale = ((hi - lo) / self.qmax).clamp(min=torch.finfo(torch.float32).eps)
            zero = (-torch.round(lo / scale)).clamp(0, self.qmax)
            codes.append((torch.round(t.double() / scale) + zero).clamp(0, self.qmax).to(torch.int64))
            scales.append(scale)
            zeros.append(zero.to(torch.int64))

        def cat(parts, dtype):
            return torch.cat(parts, -1) if parts else x.new_zeros(*x.shape[:-1], 0, dtype=dtype)
        return Encoded(cat(codes, torch.int64), x.shape[-1], scale=cat(scales, torch.float64),
                       zero_point=cat(zeros, torch.int64), values=cat(values, torch.float32))

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        codes = iter(torch.split(msg.codes, self.q_sizes, dim=-1))
        values = iter(torch.split(msg.values, self.f_sizes, dim=-1))
        out, j = [], 0
        for q in self.quantized:
            if q:
                c = next(codes)
                out.append(((c - msg.zero_point[..., j:j + 1]).double() * msg.scale[..., j:j + 1]).float())
                j += 1
            else:
                out.append(next(values))
        return torch.cat(out, -1)

    def _write(self, msg, w):                # per tensor: scale (f64), zero point (i32), codes; or float32 values
        codes = iter(torch.split(msg.codes, self.q_sizes))
        values = iter(torch.split(msg.values, self.f_sizes))
        k = 0
        for q in self.quantized:
            if q:
                w.float(msg.scale[k:k + 1], 64)
                w.uint(msg.zero_point[k:k + 1], 32)
                w.uint(next(codes), self.b)
                k += 1
            else:
                w.float(next(values))

    def _read(self, r, d):
        codes, scales, zeros, values = [], [], [], []
        for n, q in zip(self.numels, self.quantized):
            if q:
                scales.append(float(r.float(1, 64)[0]))
                zeros.append(int(r.uint(1, 32)[0]))
                codes.append(torch.from_numpy(r.uint(n, self.b).astype(np.int64)))
            else:
                values.append(torch.from_numpy(r.float(n).copy()))
        return Encoded(torch.cat(codes) if codes else torch.zeros(0, dtype=torch.int64), d,
                       scale=torch.tensor(scales, dtype=torch.float64), zero_point=torch.tensor(zeros),
                       values=torch.cat(values) if values else torch.zeros(0))

    def _params(self) -> tuple:
        return (self.b, self.shapes)

    @property
    def spec(self) -> str:
        return f"scalar:{self.b}"


class StochasticRounding(Seeded, Quantizer):
    """Unbiased stochastic rounding to ``2^bits`` evenly spaced levels between the vector's min and max."""

    name = "sr"
    unbiased = True

    def __init__(self, bits: int, seed: int = 0):
        self.b = check_int("bits", bits, *SR_BITS)
        self.seed = check_int("seed", seed, 0)
        self.top = 2 ** self.b - 1

    def bits(self, d: int) -> int:
        return self.b * dim(d) + 2 * FLOAT_BITS

    @property
    def bits_per_coordinate(self) -> float:
        return self.b

    def error_bound(self, d: int) -> float:
        """Each coordinate's variance is at most ``(step / 2)^2``, ``step = (max - min) / (2^b - 1)`` and
        ``(max - min)^2 <= 2 ||x||^2``: ``d / (2 (2^b - 1)^2)``."""
        return dim(d) / (2 * self.top ** 2)

    def encode(self, x: Tensor, generator: torch.Generator | None = None) -> Encoded:
        x = finite(x, self.name)
        x = x.to(torch.float32)
        lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
        step = torch.where(hi > lo, (hi - lo) / self.top, torch.ones_like(hi))
        r = ((x - lo) / step).clamp_(0, self.top)
        low = torch.floor(r)
        u = torch.rand(r.shape, generator=generator or self.generator(x.device), device=x.device)
        codes = (low + (u < r - low).to(r.dtype)).to(torch.int64)
        return Encoded(codes, x.shape[-1], scale=torch.cat([lo, hi], -1))

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        lo, hi = msg.scale[..., :1], msg.scale[..., 1:]
        step = torch.where(hi > lo, (hi - lo) / self.top, torch.ones_like(hi))
        return lo + msg.codes.to(torch.float32) * step

    def _write(self, msg, w):
        w.float(msg.scale)
        w.uint(msg.codes, self.b)

    def _read(self, r, d):
        scale = torch.from_numpy(r.float(2).copy())
        return Encoded(torch.from_numpy(r.uint(d, self.b).astype(np.int64)), d, scale=scale)

    def _params(self) -> tuple:
        return (self.b, self.seed)

    @property
    def spec(self) -> str:
        return f"sr:{self.b}" + (f":seed={self.seed}" if self.seed else "")
