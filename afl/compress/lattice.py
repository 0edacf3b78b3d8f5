"""QuAFL's modulo-lattice quantizer (Zakerinia et al. 2022; the public code ShayanTalaei/QuAFL ``quantizer.py``).

``encode(x) = round(x / step) mod 2^bits``, integer codes in ``[0, 2^bits)``; ``decode(codes, key)`` returns the
point of the lattice ``step Z`` congruent to the code modulo ``2^bits`` that is closest to ``key`` (the
receiver's own vector). Decoding is exact -- it returns ``step round(x / step)``, within ``step / 2`` of ``x``
-- whenever ``|x - key| < radius = step (2^(bits-1) - 1/2)`` coordinate-wise; beyond that the code wraps
around and the decoded value is off by a multiple of ``step 2^bits``. :meth:`LatticeQuantizer.overflow` tells,
coordinate by coordinate, where that happened (a simulation diagnostic: it needs the true ``x``). No side
information: ``bits(d) = bits d``; on the wire, ``bits`` bits per code.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..errors import ParameterError, check_int, check_real
from .base import Encoded, Quantizer, dim, finite

LATTICE_BITS = (1, 32)      # allowed range of LatticeQuantizer.bits


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
        return self.q * dim(d)

    @property
    def bits_per_coordinate(self) -> float:
        return self.q

    def _ints(self, x: Tensor) -> Tensor:
        return torch.round(x.to(torch.float64) / self.step).to(torch.int64)

    def encode(self, x: Tensor) -> Encoded:
        x = finite(x, self.name)
        return Encoded(torch.remainder(self._ints(x), self.modulus), x.shape[-1])

    def _write(self, msg, w):
        w.uint(msg.codes, self.q)

    def _read(self, r, d):
        return Encoded(torch.from_numpy(r.uint(d, self.q).astype(np.int64)), d)

    def _decoded(self, codes: Tensor, key: Tensor) -> Tensor:
        """The integer congruent to each code mod ``2^bits`` nearest to ``key / step``, in float64 (exact for
        integers below 2^53, the modulus being a power of two)."""
        codes = codes.to(torch.float64)
        return codes + self.modulus * torch.round((key.to(torch.float64) / self.step - codes) / self.modulus)

    def decode(self, msg: Encoded, key: Tensor | None = None) -> Tensor:
        return self._points(self._decoded(msg.codes, self._key(key)), key)

    def _key(self, key: Tensor | None) -> Tensor:
        if key is None:
            raise ParameterError("key", None, "the receiver's own vector (the lattice decoder needs a key)")
        return key

    def _points(self, z: Tensor, key: Tensor) -> Tensor:
        """Lattice integers ``z`` as points ``step z``, in the key's float dtype."""
        return (z * self.step).to(key.dtype if key.is_floating_point() else torch.float32)

    def _sent_and_decoded(self, x: Tensor, key: Tensor) -> tuple[Tensor, Tensor]:
        """``round(x / step)`` and the integer the receiver decodes from its code with ``key``, in one float64 pass
        without the int64 codes of the wire (equal to them while ``|x| / step < 2^53``)."""
        z = torch.round(x.to(torch.float64) / self.step)
        return z, self._decoded(torch.remainder(z, self.modulus), key)

    def roundtrip(self, x: Tensor, key: Tensor | None = None) -> Tensor:
        """``decode(encode(x), key)`` in one pass."""
        return self._points(self._sent_and_decoded(x, self._key(key))[1], key)

    def roundtrip_counting_overflows(self, x: Tensor, key: Tensor) -> tuple[Tensor, int]:
        """``roundtrip(x, key)`` and the number of coordinates that wrapped around (``overflow(x, key).sum()``),
        from one pass: a simulation's diagnostic at no extra cost."""
        z, decoded = self._sent_and_decoded(x, self._key(key))
        return self._points(decoded, key), int((decoded != z).sum())

    def overflow(self, x: Tensor, key: Tensor) -> Tensor:
        """Boolean mask (broadcast shape of ``x`` and ``key``): where ``decode(encode(x), key)`` is not
        ``step round(x / step)`` because ``x`` lies too far from ``key`` (the code wrapped around)."""
        z, decoded = self._sent_and_decoded(x, self._key(key))
        return decoded != z

    def _params(self) -> tuple:
        return (self.q, self.step)

    @property
    def spec(self) -> str:
        return f"lattice:{self.q}:{self.step!r}"
