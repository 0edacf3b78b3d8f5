"""Quantizers for compressed client-server messages, each with the exact size of one message on the wire.

All vectorized torch and device-agnostic. ``encode(x)`` turns ``x`` of shape ``(..., d)`` (one message per
vector along the last axis) into an :class:`Encoded` message; ``decode(msg, key)`` rebuilds the receiver's
estimate; ``roundtrip(x, key)`` does both. ``bits(d)`` is the exact number of bits of one message of
dimension ``d`` -- the codes plus every piece of side information -- and ``nbytes(d) = ceil(bits(d) / 8)``;
``to_bytes`` / ``from_bytes`` are a real wire format of exactly that size (:mod:`afl.compress.base`).
``error_bound(d)`` bounds ``E||Q(x) - x||^2 / ||x||^2`` and ``delta(d)`` is QAFeL's Definition 2.1 parameter
where one exists.

=================================  ============================================================  ============
spec                               quantizer                                                     module
=================================  ============================================================  ============
``identity``                       float32 as is                                                 ``scalar``
``lattice:<bits>:<step>``          QuAFL's modulo lattice, decoded with the receiver's key       ``lattice``
``qsgd:<bits>[:bucket=][:norm=]``  QSGD stochastic rounding (QAFeL Example B.1), unbiased        ``qsgd``
``scalar:<bits>``                  FLSim's per-tensor min-max channel (QAFeL's code), shapes     ``scalar``
``sr:<bits>``                      stochastic rounding to 2^bits levels in [min, max], unbiased  ``scalar``
``topk:<fraction>``                the largest ceil(fraction d) coordinates (QAFeL Table 2)      ``sparse``
``topk-mask:<fraction>``           per-tensor top-k sent with a bitmask (QAFeL's code), shapes   ``sparse``
``randk:<fraction>[:rescale=]``    random coordinates, rescaled by d/k to be unbiased            ``sparse``
``luq:<bits>``                     logarithmic unbiased quantization (FAVAS Remark 6)            ``luq``
=================================  ============================================================  ============

Specs: ``name[:positional...][:key=value...]`` (stochastic ones take ``:seed=<n>``); every quantizer's ``spec``
maps back to an equal quantizer, and :func:`get` builds one from keyword parameters.

QAFeL does not spell out its accounting; its code does (FLSim's ``ScalarQuantizationChannel``): its "n-bit
qsgd" on CelebA is :class:`ScalarChannel`, whose sizes are Table 1's to the byte. :class:`QSGDQuantizer` is
the stochastic QSGD the theory assumes.

Time: the QuAFL notebooks model a quantized exchange as lasting ``bits / 32`` of a full-precision one;
:func:`quantized_interval` does that scaling explicitly (the caller decides whether to use it).

>>> q = make_quantizer("lattice:14:1e-4")
>>> q.bits(25450), q.nbytes(25450), q.bits_per_coordinate
(356300, 44538, 14)
>>> quantized_interval(10.0, q)
4.375
"""
from __future__ import annotations

from ..errors import ParameterError, check_choice, check_int, check_real
from .base import FLOAT_BITS, Encoded, Quantizer, Seeded
from .lattice import LATTICE_BITS, LatticeQuantizer
from .luq import LUQ
from .qsgd import QSGD_BITS, QSGDQuantizer
from .scalar import Identity, ScalarChannel, StochasticRounding
from .sparse import MaskedTopK, RandK, TopK

QUANTIZERS = {"identity": Identity, "lattice": LatticeQuantizer, "qsgd": QSGDQuantizer, "scalar": ScalarChannel,
              "sr": StochasticRounding, "topk": TopK, "topk-mask": MaskedTopK, "randk": RandK, "luq": LUQ}
SPEC_FORMAT = ("'identity', 'lattice:<bits>:<step>', 'qsgd:<bits>[:bucket=<n>][:norm=l2|max]', 'scalar:<bits>', "
               "'sr:<bits>', 'topk:<fraction>', 'topk-mask:<fraction>', 'randk:<fraction>[:rescale=true|false]', 'luq:<bits>' "
               "(stochastic ones also ':seed=<n>'), or a Quantizer")


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


def make_quantizer(spec, *, seed: int | None = None, shapes=None) -> Quantizer:
    """A quantizer from a spec string (format in the module docstring) or a :class:`Quantizer` (returned).

    ``seed``: default seed of a stochastic quantizer when the spec has no ``seed=`` field; ``shapes``: the
    model's parameter shapes, for a per-tensor quantizer (``"scalar:<bits>"``, ``"topk-mask:<fraction>"``).
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
    return get(name.lower(), *args, seed=kwargs.pop("seed", seed), shapes=shapes, _spec=spec, **kwargs)


def get(name: str, *args, seed: int | None = None, shapes=None, _spec=None, **params) -> Quantizer:
    """The quantizer ``name`` (:data:`QUANTIZERS`) with its parameters, e.g. ``get("qsgd", bits=4)``,
    ``get("topk", fraction=0.1)``, ``get("scalar", bits=4, shapes=model_shapes)``. ``seed``: default seed of a
    stochastic quantizer; ``shapes``: the model's parameter shapes, for quantizers that work per tensor."""
    check_choice("quantizer", name, QUANTIZERS)
    cls = QUANTIZERS[name]
    if issubclass(cls, Seeded) and seed is not None:
        params.setdefault("seed", seed)
    if cls in (ScalarChannel, MaskedTopK):
        params.setdefault("shapes", shapes)
    if isinstance(params.get("rescale"), str):
        params["rescale"] = _flag("rescale", params["rescale"])
    try:
        return cls(*args, **params)
    except TypeError:
        raise ParameterError("quantizer", _spec or name, SPEC_FORMAT) from None


def _flag(name: str, text: str) -> bool:
    check_choice(name, text.lower(), ("true", "false"))
    return text.lower() == "true"


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


__all__ = ["Encoded", "Quantizer", "Identity", "LatticeQuantizer", "QSGDQuantizer", "ScalarChannel",
           "StochasticRounding", "TopK", "MaskedTopK", "RandK", "LUQ", "QUANTIZERS", "get", "make_quantizer", "quantized_interval",
           "FLOAT_BITS", "LATTICE_BITS", "QSGD_BITS"]
