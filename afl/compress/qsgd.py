"""QSGD stochastic rounding (Alistarh et al. 2017) as QAFeL defines it (Ortega & Jafarkhani 2023, Example B.1).

With ``s = 2^(bits-1) - 1`` levels and a scale ``||x||`` (``norm="l2"``, QSGD/QAFeL) or ``max |x_i|``
(``norm="max"``), each coordinate is sent as the signed integer ``sign(x_i) xi_i``, ``xi_i`` = ``|x_i| s / ||x||``
rounded up with probability equal to its fractional part and down otherwise; the receiver rebuilds
``||x|| / s sign(x) xi``, an unbiased estimate of ``x``. A signed code in ``[-s, s]`` takes ``bits`` bits (sign
included), and the scale is one float32 per vector, or per ``bucket`` consecutive coordinates (QSGD's
bucketing): ``bits(d) = bits d + 32 ceil(d / bucket)``. Randomness comes from a ``torch.Generator`` seeded with
``seed`` (one per device), or from the ``generator`` given to :meth:`QSGDQuantizer.encode`.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..errors import check_choice, check_int
from .base import FLOAT_BITS, Encoded, Quantizer, Seeded, dim, finite

QSGD_BITS = (2, 24)         # allowed range of QSGDQuantizer.bits (sign included; 2 bits = ternary)
NORMS = ("l2", "max")


class QSGDQuantizer(Seeded, Quantizer):
    """Unbiased stochastic uniform quantizer (QSGD; QAFeL's ``b``-bit qsgd): ``bits`` bits per coordinate
    (signed levels ``-s..s``, ``s = 2^(bits-1) - 1``) plus one float32 scale per vector or per ``bucket``.

    ``norm="l2"`` scales by ``||x||_2`` (QSGD, QAFeL Example B.1), ``"max"`` by ``max |x_i|`` (finer for
    long vectors). ``bits(d) = bits d + 32 ceil(d / bucket)`` (``bucket=None``: one scale, ``+ 32``).
    ``E[decode(encode(x))] = x`` exactly in real arithmetic; a zero vector (bucket) is sent as zero.
    """

    name = "qsgd"
    unbiased = True

    def __init__(self, bits: int, bucket: int | None = None, norm: str = "l2", seed: int = 0):
        self.b = check_int("bits", bits, *QSGD_BITS, hint="sign included")
        self.bucket = None if bucket is None else check_int("bucket", bucket, 1, hint="or None: one scale per vector")
        check_choice("norm", norm, NORMS)
        self.norm = norm
        self.seed = check_int("seed", seed, 0)
        self.levels = 2 ** (self.b - 1) - 1

    def bits(self, d: int) -> int:
        d = dim(d)
        return self.b * d + FLOAT_BITS * self._n_scales(d)

    @property
    def bits_per_coordinate(self) -> float:
        return self.b

    def error_bound(self, d: int) -> float:
        """QAFeL Example B.1 (after Alistarh et al. 2017, Lemma 3.1) for the L2 scale:
        ``min(2 d' / s^2, sqrt(2 d') / s)``, d' the bucket's length; for the max scale ``d' / (4 s^2)`` (each
        coordinate's rounding variance is at most ``(max|x_i| / s)^2 / 4``)."""
        n = dim(d) if self.bucket is None else min(dim(d), self.bucket)
        s = self.levels
        if self.norm == "max":
            return n / (4 * s ** 2)
        return min(2 * n / s ** 2, (2 * n) ** 0.5 / s)

    def _buckets(self, x: Tensor) -> Tensor:
        d = x.shape[-1]
        size = d if self.bucket is None else self.bucket
        n = max(1, -(-d // size))
        pad = n * size - d
        if pad:
            x = torch.nn.functional.pad(x, (0, pad))
        return x.reshape(*x.shape[:-1], n, size)

    def encode(self, x: Tensor, generator: torch.Generator | None = None) -> Encoded:
        x = finite(x, self.name)
        d = x.shape[-1]
        xb = self._buckets(x.to(torch.float32))
        scale = (xb.norm(dim=-1) if self.norm == "l2" else xb.abs().amax(dim=-1)).to(torch.float32)
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))[..., None]
        r = (xb.abs() / safe * self.levels).clamp_(0, self.levels)
        low = torch.floor(r)
        u = torch.rand(r.shape, generator=generator or self.generator(x.device), device=x.device)
        xi = low + (u < r - low).to(r.dtype)
        codes = (torch.sign(xb) * xi).to(torch.int32)
        codes = codes.reshape(*codes.shape[:-2], -1)[..., :d]
        return Encoded(codes, d, scale)

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        levels = self._buckets(msg.codes.to(torch.float32))
        out = levels * (msg.scale[..., None] / self.levels)
        return out.reshape(*out.shape[:-2], -1)[..., :msg.d]

    def _n_scales(self, d: int) -> int:
        return 1 if self.bucket is None else -(-d // self.bucket)

    def _write(self, msg, w):                # scales, then each code + s as an unsigned b-bit integer
        w.float(msg.scale)
        w.uint(msg.codes.to(torch.int64) + self.levels, self.b)

    def _read(self, r, d):
        scale = torch.from_numpy(r.float(self._n_scales(d)).copy())
        codes = torch.from_numpy(r.uint(d, self.b).astype(np.int64) - self.levels).to(torch.int32)
        return Encoded(codes, d, scale)

    def _params(self) -> tuple:
        return (self.b, self.bucket, self.norm, self.seed)

    @property
    def spec(self) -> str:
        extra = "".join(f":{k}={v}" for k, v, default in
                        (("bucket", self.bucket, None), ("norm", self.norm, "l2"), ("seed", self.seed, 0))
                        if v != default)
        return f"qsgd:{self.b}{extra}"
