"""What every quantizer shares: the encoded message, the interface, and a bit-exact wire format.

A quantizer's ``bits(d)`` is the exact size of one message of dimension ``d``: codes plus every piece of side
information. :meth:`Quantizer.to_bytes` writes one message as that many bits, packed MSB first with no
padding between fields and zero bits up to the next whole byte at the end, so ``len(to_bytes(encode(x))) ==
nbytes(d) = ceil(bits(d) / 8)``; :meth:`Quantizer.from_bytes` reads it back, exactly. What the receiver
already knows (``d``, the model's parameter shapes, its own key vector) is not sent.
"""
from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..errors import ParameterError, check, check_int

FLOAT_BITS = 32
_FLOATS = {32: (np.float32, np.uint32), 64: (np.float64, np.uint64)}     # IEEE width -> (float, same-size uint)


@dataclass
class Encoded:
    """One or more messages (one per vector along the last axis of the input, dimension ``d``): ``codes`` and
    the side information a quantizer needs (``scale``, ``zero_point``, ``index`` of the sent coordinates,
    ``values`` sent in full precision)."""

    codes: Tensor
    d: int
    scale: Tensor | None = None
    index: Tensor | None = None
    zero_point: Tensor | None = None
    values: Tensor | None = None


class BitWriter:
    """Fields of unsigned integers of a fixed width, or float32 / float64 values, appended as bits."""

    def __init__(self):
        self._chunks: list[np.ndarray] = []
        self.bits = 0

    def uint(self, values, width: int) -> None:
        """Unsigned integers in ``[0, 2^width)``, ``width`` bits each, most significant first."""
        v = np.asarray(torch.as_tensor(values).cpu() if isinstance(values, Tensor) else values,
                       dtype=np.uint64).reshape(-1)
        if v.size and width < 64 and int(v.max()) >> width:
            raise ParameterError("codes", int(v.max()), f"unsigned integers below 2^{width}")
        shifts = np.arange(width - 1, -1, -1, dtype=np.uint64)
        self._chunks.append(((v[:, None] >> shifts) & np.uint64(1)).astype(np.uint8).reshape(-1))
        self.bits += v.size * width

    def float(self, values, width: int = 32) -> None:
        """IEEE floats of ``width`` 32 or 64 bits (the values are cast to that width)."""
        dt = _FLOATS[width]
        v = np.asarray(values.detach().cpu() if isinstance(values, Tensor) else values, dtype=dt[0]).reshape(-1)
        self.uint(v.view(dt[1]).astype(np.uint64), width)

    def to_bytes(self) -> bytes:
        return np.packbits(np.concatenate(self._chunks or [np.zeros(0, np.uint8)])).tobytes()


class BitReader:
    """Reads back what a :class:`BitWriter` wrote, field by field."""

    def __init__(self, data: bytes):
        self._bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
        self._at = 0

    def uint(self, n: int, width: int) -> np.ndarray:
        take = self._bits[self._at:self._at + n * width]
        check(take.size == n * width, "data", f"{len(self._bits) // 8} bytes", "a complete message")
        self._at += n * width
        weights = np.uint64(1) << np.arange(width - 1, -1, -1, dtype=np.uint64)
        return (take.reshape(n, width).astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)

    def float(self, n: int, width: int = 32) -> np.ndarray:
        dt = _FLOATS[width]
        return self.uint(n, width).astype(dt[1]).view(dt[0])


def index_bits(d: int) -> int:
    """Bits of one coordinate index in ``[0, d)``: ``ceil(log2 d)`` (at least 1)."""
    return max(1, (int(d) - 1).bit_length())


class PerTensor:
    """A quantizer that works tensor by tensor: it needs the model's parameter ``shapes`` (in the order of the
    flat vector) and messages of exactly their total size."""

    def _set_shapes(self, shapes, why: str) -> None:
        if shapes is None:
            raise ParameterError("shapes", None, f"the model's parameter shapes ({why}): make_quantizer(spec, "
                                 "shapes=model shapes)")
        try:
            self.shapes = tuple(tuple(check_int("shapes", n, 1) for n in s) for s in shapes)
        except (TypeError, ParameterError):
            raise ParameterError("shapes", shapes, "the model's parameter shapes, tuples of positive integers (e.g. "
                                 "[tuple(p.shape) for p in model.parameters()])") from None
        self.numels = [math.prod(s) for s in self.shapes]

    def _check_d(self, d: int) -> int:
        d = dim(d)
        check(d == sum(self.numels), "d", d, f"{sum(self.numels)}, the size of the shapes given")
        return d


class Quantizer:
    """Base class. Subclasses set ``name``, ``unbiased``, ``needs_key`` and implement ``bits``, ``encode``,
    ``decode``, ``spec`` and the wire format (``_write``, ``_read``); ``error_bound`` where one is known."""

    name = "quantizer"
    unbiased = False     # E[decode(encode(x))] == x
    needs_key = False    # decode needs the receiver's own vector

    def state_dict(self) -> dict:
        """What a checkpoint keeps of it (:mod:`afl.checkpoint`): nothing for a deterministic quantizer; a stochastic
        one's generators (:class:`Seeded`)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Go on from :meth:`state_dict`'s ``state``."""

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

    def error_bound(self, d: int) -> float | None:
        """A bound ``w`` on ``E||Q(x) - x||^2 <= w ||x||^2`` for every ``x`` of dimension ``d``; None if unknown."""
        return None

    def delta(self, d: int) -> float | None:
        """The compression parameter of QAFeL's Definition 2.1, ``E||Q(x) - x||^2 <= (1 - delta) ||x||^2`` with
        ``delta > 0``: ``1 - error_bound(d)``, or None where the bound is unknown or not below 1."""
        w = self.error_bound(d)
        return None if w is None or w >= 1 else 1.0 - w

    def encode(self, x: Tensor) -> Encoded:
        """The message of ``x`` (each implementation first refuses non-finite values: :func:`finite`)."""
        raise NotImplementedError

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        raise NotImplementedError

    def roundtrip(self, x: Tensor, key: Tensor | None = None) -> Tensor:
        """What the receiver holds after ``x`` was sent: ``decode(encode(x), key)``."""
        return self.decode(self.encode(x), key)

    # -- wire format ------------------------------------------------------------------------------------
    def to_bytes(self, msg: Encoded) -> bytes:
        """One message (from a ``(d,)`` input) as ``nbytes(d)`` bytes."""
        check(msg.codes.dim() <= 1, "msg", tuple(msg.codes.shape), "one message (encode a (d,) vector)")
        w = BitWriter()
        self._write(msg, w)
        assert w.bits == self.bits(msg.d), (w.bits, self.bits(msg.d))
        return w.to_bytes()

    def from_bytes(self, data: bytes, d: int) -> Encoded:
        """The message that :meth:`to_bytes` wrote, for a receiver that knows ``d``."""
        d = check_int("d", d, 0)
        check(len(data) == self.nbytes(d), "data", f"{len(data)} bytes", f"{self.nbytes(d)} bytes (d = {d})")
        return self._read(BitReader(data), d)

    def _write(self, msg: Encoded, w: BitWriter) -> None:
        raise NotImplementedError

    def _read(self, r: BitReader, d: int) -> Encoded:
        raise NotImplementedError

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


def dim(d) -> int:
    """A message's dimension: a positive integer."""
    return check_int("d", d, 1)


def finite(x: Tensor, name: str) -> Tensor:
    """``x``, if every value is finite; a :class:`ParameterError` naming the quantizer otherwise (a NaN or an
    infinity has no code: sent through, it would poison every model it reaches)."""
    bad = int((~torch.isfinite(x)).sum())
    if bad:
        raise ParameterError(f"{name} input", f"{bad} non-finite value(s) of {x.numel()}", "finite values (a diverged "
                             "model? a smaller learning rate)")
    return x


class Seeded:
    """A stochastic quantizer's randomness: one ``torch.Generator`` per device, seeded with ``seed``."""

    seed: int

    def generator(self, device) -> torch.Generator:
        """The seeded generator used on ``device`` (created on first use)."""
        device = torch.device(device)
        gens = self.__dict__.setdefault("_generators", {})
        if device not in gens:
            gens[device] = torch.Generator(device=device).manual_seed(self.seed)
        return gens[device]

    def state_dict(self) -> dict:
        """Where its generators stand, by device, for a checkpoint (:mod:`afl.checkpoint`)."""
        return {str(device): g.get_state() for device, g in self.__dict__.get("_generators", {}).items()}

    def load_state_dict(self, state: dict) -> None:
        for device, value in state.items():
            self.generator(device).set_state(value.cpu())
