"""Quantizers for compressed client-server messages, each with the exact size of one message on the wire.

Three quantizers, all vectorized torch and device-agnostic. ``encode(x)`` turns ``x`` of shape ``(..., d)``
(one message per vector along the last axis) into an :class:`Encoded` message; ``decode(msg, key)`` rebuilds
the receiver's estimate; ``roundtrip(x, key)`` does both. ``bits(d)`` is the exact number of bits of one
message of dimension ``d`` -- the codes plus every piece of side information (scales) -- and ``nbytes(d)``
is ``ceil(bits(d) / 8)``: a message is padded to whole bytes.

* :class:`Identity` -- float32 as is: ``bits(d) = 32 d``.
* :class:`LatticeQuantizer` ``(bits, step)`` -- QuAFL's modulo-lattice quantizer (Zakerinia et al. 2022; the
  public code ShayanTalaei/QuAFL ``quantizer.py``). ``encode(x) = round(x / step) mod 2^bits``, integer codes in
  ``[0, 2^bits)``; ``decode(codes, key)`` returns the point of the lattice ``step Z`` congruent to the code
  modulo ``2^bits`` that is closest to ``key`` (the receiver's own vector). Decoding is exact -- it returns
  ``step round(x / step)``, within ``step / 2`` of ``x`` -- whenever ``|x - key| < radius = step (2^(bits-1)
  - 1/2)`` coordinate-wise; beyond that the code wraps around and the decoded value is off by a multiple of
  ``step 2^bits``. :meth:`LatticeQuantizer.overflow` tells, coordinate by coordinate, where that happened
  (a simulation diagnostic: it needs the true ``x``). No side information: ``bits(d) = bits d``.
* :class:`QSGDQuantizer` ``(bits, bucket=None, norm="l2", seed=0)`` -- QSGD stochastic rounding (Alistarh et
  al. 2017) as QAFeL defines it (Ortega & Jafarkhani 2023, Example B.1): with ``s = 2^(bits-1) - 1`` levels and
  a scale ``||x||`` (``norm="l2"``, QSGD/QAFeL) or ``max |x_i|`` (``norm="max"``), each coordinate is sent as the
  signed integer ``sign(x_i) xi_i``, ``xi_i`` = ``|x_i| s / ||x||`` rounded up with probability equal to its
  fractional part and down otherwise; the receiver rebuilds ``||x|| / s sign(x) xi``, an unbiased estimate of
  ``x``. A signed code in ``[-s, s]`` takes ``bits`` bits (sign included), and the scale is one float32 per
  vector, or per ``bucket`` consecutive coordinates (QSGD's bucketing): ``bits(d) = bits d + 32 ceil(d /
  bucket)``. Randomness comes from a ``torch.Generator`` seeded with ``seed`` (one per device), or from the
  ``generator`` given to :meth:`QSGDQuantizer.encode`.

  QAFeL does not spell out its accounting, but its sizes (Tables 1-2: 117.128 kB per FedBuff upload, i.e.
  d = 29,282 float32; 29.924 / 15.380 / 8.108 kB per 8/4/2-bit qsgd upload) fit exactly ``bits`` bits per
  quantized coordinate, sign included, with 194 coordinates left in float32 and 60 more bytes (e.g. 15
  float32 norms, one per quantized tensor) -- our inference from the three sizes. The rule here is the same
  (``bits`` per coordinate, float32 scales), with one flat vector and scales per vector or per bucket.

Specs (:func:`make_quantizer`): ``name[:positional...][:key=value...]``, fields separated by ``:``.
``"identity"``; ``"lattice:<bits>:<step>"`` (QuAFL notebooks: ``"lattice:14:1e-4"``);
``"qsgd:<bits>"``, ``"qsgd:<bits>:bucket=<n>"``, ``"qsgd:<bits>:norm=max:seed=3"``. Every quantizer has a
``spec`` that :func:`make_quantizer` maps back to an equal quantizer.

Time: the QuAFL notebooks model a quantized exchange as lasting ``bits / 32`` of a full-precision one;
:func:`quantized_interval` does that scaling explicitly (the caller decides whether to use it).

>>> q = make_quantizer("lattice:14:1e-4")
>>> q.bits(25450), q.nbytes(25450), q.bits_per_coordinate
(356300, 44538, 14)
>>> quantized_interval(10.0, q)
4.375
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .errors import ParameterError, check_choice, check_int, check_real

FLOAT_BITS = 32
LATTICE_BITS = (1, 32)      # allowed range of LatticeQuantizer.bits
QSGD_BITS = (2, 24)         # allowed range of QSGDQuantizer.bits (sign included; 2 bits = ternary)
NORMS = ("l2", "max")
SPEC_FORMAT = ("'identity', 'lattice:<bits>:<step>' or 'qsgd:<bits>[:bucket=<n>][:norm=l2|max][:seed=<n>]' "
               "(or a Quantizer)")


@dataclass
class Encoded:
    """One or more messages: ``codes`` (one row per message along the last axis, dimension ``d``) and, for
    scaled quantizers, ``scale`` (float32, ``(..., n_scales)``)."""

    codes: Tensor
    d: int
    scale: Tensor | None = None


class Quantizer:
    """Base class. Subclasses set ``name``, ``unbiased``, ``needs_key`` and implement the four methods."""

    name = "quantizer"
    unbiased = False     # E[decode(encode(x))] == x
    needs_key = False    # decode needs the receiver's own vector

    def bits(self, d: int) -> int:
        """Exact size in bits of one message of dimension ``d`` (codes and side information)."""
        raise NotImplementedError

    def nbytes(self, d: int) -> int:
        """Size in bytes of one message of dimension ``d``: ``ceil(bits(d) / 8)`` (padded to whole bytes)."""
        return -(-self.bits(d) // 8)

    @property
    def bits_per_coordinate(self) -> float:
        """Nominal bits per coordinate, side information excluded (the QuAFL notebooks' ``bits``)."""
        raise NotImplementedError

    def encode(self, x: Tensor) -> Encoded:
        raise NotImplementedError

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        raise NotImplementedError

    def roundtrip(self, x: Tensor, key: Tensor | None = None) -> Tensor:
        """What the receiver holds after ``x`` was sent: ``decode(encode(x), key)``."""
        return self.decode(self.encode(x), key)

    # -- spec / equality -------------------------------------------------------------------------------
    def _params(self) -> tuple:
        return ()

    @property
    def spec(self) -> str:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self._params() == other._params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._params()))

    def __repr__(self) -> str:
        return f"make_quantizer({self.spec!r})"


def _dim(d) -> int:
    return check_int("d", d, 0)


class Identity(Quantizer):
    """Full precision: the sender's values as they are, counted as float32 on the wire, ``bits(d) = 32 d``."""

    name = "identity"
    unbiased = True

    def bits(self, d: int) -> int:
        return FLOAT_BITS * _dim(d)

    @property
    def bits_per_coordinate(self) -> float:
        return FLOAT_BITS

    def encode(self, x: Tensor) -> Encoded:
        return Encoded(x.clone(), x.shape[-1])

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        return msg.codes.clone()

    @property
    def spec(self) -> str:
        return "identity"


class LatticeQuantizer(Quantizer):
    """QuAFL's modulo-lattice quantizer: ``bits`` bits per coordinate, lattice ``step Z``, decoded with a key.

    ``encode(x) = round(x / step) mod 2^bits`` (int64 codes in ``[0, 2^bits)``, round half to even).
    ``decode(msg, key)`` returns ``step z``, ``z`` the integer congruent to the code mod ``2^bits`` nearest to
    ``key / step`` (computed as ``z = c + 2^bits round((key / step - c) / 2^bits)``, in float64/int64, so it is
    deterministic and exact). Guarantee: if ``|x - key| < radius = step (2^(bits-1) - 1/2)`` then
    ``decode(encode(x), key) == step round(x / step)`` (cast to the key's float dtype), so
    ``|decoded - x| <= step / 2``. Otherwise the coordinate may wrap around: :meth:`overflow` flags it.
    Exactness also needs ``|x| / step < 2^53`` (float64 integers).
    """

    name = "lattice"
    needs_key = True

    def __init__(self, bits: int, step: float):
        self.q = check_int("bits", bits, *LATTICE_BITS)
        self.step = check_real("step", step, 0, strict_low=True)
        self.modulus = 2 ** self.q

    @property
    def radius(self) -> float:
        """Coordinate-wise distance ``|x - key|`` below which decoding is exact (up to rounding)."""
        return self.step * (2 ** (self.q - 1) - 0.5)

    def bits(self, d: int) -> int:
        return self.q * _dim(d)

    @property
    def bits_per_coordinate(self) -> float:
        return self.q

    def _ints(self, x: Tensor) -> Tensor:
        return torch.round(x.to(torch.float64) / self.step).to(torch.int64)

    def encode(self, x: Tensor) -> Encoded:
        return Encoded(torch.remainder(self._ints(x), self.modulus), x.shape[-1])

    def _decode_ints(self, codes: Tensor, key: Tensor) -> Tensor:
        k = key.to(torch.float64) / self.step
        wraps = torch.round((k - codes.to(torch.float64)) / self.modulus).to(torch.int64)
        return codes + self.modulus * wraps

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        if key is None:
            raise ParameterError("key", None, "the receiver's own vector (the lattice decoder needs a key)")
        dtype = key.dtype if key.is_floating_point() else torch.float32
        return (self._decode_ints(msg.codes, key).to(torch.float64) * self.step).to(dtype)

    def overflow(self, x: Tensor, key: Tensor) -> Tensor:
        """Boolean mask (broadcast shape of ``x`` and ``key``): where ``decode(encode(x), key)`` is not
        ``step round(x / step)`` because ``x`` lies too far from ``key`` (the code wrapped around)."""
        z = self._ints(x)
        return self._decode_ints(torch.remainder(z, self.modulus), key) != z

    def _params(self) -> tuple:
        return (self.q, self.step)

    @property
    def spec(self) -> str:
        return f"lattice:{self.q}:{self.step!r}"


class QSGDQuantizer(Quantizer):
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
        self._generators: dict = {}

    def bits(self, d: int) -> int:
        d = _dim(d)
        scales = 1 if self.bucket is None else -(-d // self.bucket)
        return self.b * d + FLOAT_BITS * scales

    @property
    def bits_per_coordinate(self) -> float:
        return self.b

    def generator(self, device) -> torch.Generator:
        """The seeded generator used on ``device`` (created on first use)."""
        device = torch.device(device)
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[device]

    def _buckets(self, x: Tensor) -> Tensor:
        d = x.shape[-1]
        size = d if self.bucket is None else self.bucket
        n = max(1, -(-d // size))
        pad = n * size - d
        if pad:
            x = torch.nn.functional.pad(x, (0, pad))
        return x.reshape(*x.shape[:-1], n, size)

    def encode(self, x: Tensor, generator: torch.Generator | None = None) -> Encoded:
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

    def _params(self) -> tuple:
        return (self.b, self.bucket, self.norm, self.seed)

    @property
    def spec(self) -> str:
        extra = "".join(f":{k}={v}" for k, v, default in
                        (("bucket", self.bucket, None), ("norm", self.norm, "l2"), ("seed", self.seed, 0))
                        if v != default)
        return f"qsgd:{self.b}{extra}"


QUANTIZERS = {"identity": Identity, "lattice": LatticeQuantizer, "qsgd": QSGDQuantizer}


def _value(text: str, spec: str):
    """``"14"`` -> 14, ``"1e-4"`` -> 1e-4, ``"max"`` -> ``"max"``, ``"none"`` -> None."""
    if text.lower() == "none":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if not text:
        raise ParameterError("quantizer", spec, SPEC_FORMAT)
    return text


def make_quantizer(spec, *, seed: int | None = None) -> Quantizer:
    """A quantizer from a spec string (format in the module docstring) or a :class:`Quantizer` (returned).

    ``seed``: default seed of a stochastic quantizer when the spec has no ``seed=`` field.
    """
    if isinstance(spec, Quantizer):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ParameterError("quantizer", spec, SPEC_FORMAT)
    name, *fields = [f.strip() for f in spec.strip().split(":")]
    check_choice("quantizer", name.lower(), QUANTIZERS)
    args, kwargs = [], {}
    for f in fields:
        if "=" in f:
            k, v = (p.strip() for p in f.split("=", 1))
            kwargs[k] = _value(v, spec)
        elif kwargs:
            raise ParameterError("quantizer", spec, SPEC_FORMAT + "; positional fields come first")
        else:
            args.append(_value(f, spec))
    cls = QUANTIZERS[name.lower()]
    if cls is QSGDQuantizer and seed is not None:
        kwargs.setdefault("seed", seed)
    try:
        return cls(*args, **kwargs)
    except TypeError:
        raise ParameterError("quantizer", spec, SPEC_FORMAT) from None


def quantized_interval(interaction_time: float, quantizer: Quantizer | str | None, waiting_time: float = 0.0,
                       d: int | None = None) -> float:
    """Server step duration when messages are quantized, as the QuAFL notebooks model it.

    The interaction part scales with the message size: ``interaction_time * bits / 32 + waiting_time``
    (``Quantized_fl.ipynb``: sit 10, swt 0, 14-bit lattice -> 4.375; ``Quantized_fl-Copy1.ipynb``: sit 3,
    swt 5, 16 bits -> 1.5 + 5). ``bits`` is the nominal bits per coordinate (the notebooks' rule), or, given
    ``d``, the exact ``quantizer.bits(d) / d`` (side information included). ``None``: no quantization.
    """
    interaction_time = check_real("interaction_time", interaction_time, 0)
    waiting_time = check_real("waiting_time", waiting_time, 0)
    if quantizer is None:
        return interaction_time + waiting_time
    q = make_quantizer(quantizer)
    per_coord = q.bits_per_coordinate if d is None else q.bits(check_int("d", d, 1)) / d
    return interaction_time * per_coord / FLOAT_BITS + waiting_time


__all__ = ["Encoded", "Quantizer", "Identity", "LatticeQuantizer", "QSGDQuantizer", "QUANTIZERS",
           "make_quantizer", "quantized_interval", "FLOAT_BITS", "LATTICE_BITS", "QSGD_BITS"]
