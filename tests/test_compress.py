"""Quantizers of afl.compress: lattice round trip and wrap-around, QSGD unbiasedness, exact message sizes, specs."""
import math

import pytest
import torch

from afl.compress import (Identity, LatticeQuantizer, QSGDQuantizer, make_quantizer, quantized_interval)
from afl.errors import ParameterError


def lattice_reference(codes, key, bits, step):
    """The public QuAFL decoder written out: q s round(key / (q s) - c / q) + s c, q = 2^bits (float64)."""
    q, c, key = 2.0 ** bits, codes.double(), key.double()
    return q * step * torch.round(key / (q * step) - c / q) + step * c


# ---------------------------------------------------------------------------------------------------- lattice
@pytest.mark.parametrize("bits, step", [(14, 1e-4), (8, 1e-2), (3, 0.5), (1, 0.25), (32, 1e-9)])
def test_lattice_round_trip_is_exact_within_radius(bits, step):
    g = torch.Generator().manual_seed(bits)
    q = LatticeQuantizer(bits, step)
    assert q.radius == pytest.approx(step * (2 ** (bits - 1) - 0.5))
    key = torch.randn(4, 500, generator=g)
    x = key + (torch.rand(4, 500, generator=g) * 2 - 1) * 0.99 * q.radius
    msg = q.encode(x)
    assert msg.codes.dtype == torch.int64 and msg.d == 500
    assert int(msg.codes.min()) >= 0 and int(msg.codes.max()) < 2 ** bits
    out = q.decode(msg, key)
    assert out.dtype == torch.float32 and out.shape == x.shape
    expected = (torch.round(x.double() / step) * step).float()            # the nearest lattice point
    assert torch.equal(out, expected)
    assert float((out.double() - x.double()).abs().max()) <= step / 2 * (1 + 1e-6) + 1e-7
    assert not q.overflow(x, key).any()
    assert torch.equal(q.encode(x).codes, msg.codes)                        # deterministic
    torch.testing.assert_close(out.double(), lattice_reference(msg.codes, key, bits, step).float().double())


def test_lattice_wraps_around_beyond_radius_and_overflow_flags_exactly_those_coordinates():
    bits, step = 6, 0.01
    q = LatticeQuantizer(bits, step)
    period = step * 2 ** bits                                                # 0.64; radius 0.315
    g = torch.Generator().manual_seed(0)
    key = torch.randn(2000, generator=g)
    far = torch.rand(2000, generator=g) < 0.5
    mag = torch.where(far, 0.55 + 0.3 * torch.rand(2000, generator=g), 0.9 * q.radius * torch.rand(2000, generator=g))
    x = key + torch.where(torch.rand(2000, generator=g) < 0.5, mag, -mag)
    out = q.roundtrip(x, key)
    err = out.double() - torch.round(x.double() / step) * step
    assert torch.equal(q.overflow(x, key), far)
    assert err[~far].abs().max() < 1e-6
    wraps = err[far] / period                                                # off by exactly one period
    assert torch.allclose(wraps.abs(), torch.ones_like(wraps), atol=1e-5)
    assert float((out[far] - key[far]).abs().max()) <= period / 2 + 1e-5     # it lands next to the key


def test_lattice_decoding_needs_a_key_and_keeps_the_key_dtype():
    q = LatticeQuantizer(10, 1e-3)
    with pytest.raises(ParameterError, match="key"):
        q.decode(q.encode(torch.zeros(3)))
    key = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    assert q.roundtrip(key, key).dtype == torch.float64
    assert torch.allclose(q.roundtrip(key, key), key, atol=5e-4)


# ------------------------------------------------------------------------------------------------------- qsgd
@pytest.mark.parametrize("spec", ["qsgd:2", "qsgd:3:norm=max", "qsgd:2:bucket=3"])
def test_qsgd_is_unbiased_monte_carlo(spec):
    q = make_quantizer(spec, seed=7)
    x = torch.tensor([0.3, -1.2, 0.05, 0.0, 2.0, -0.7, 0.9, -0.01])
    n = 40000
    msg = q.encode(x.expand(n, -1))                                          # n messages, independent draws
    out = q.decode(msg)
    # every draw is one of the two levels around x_i: unit = scale / s
    size = x.numel() if q.bucket is None else q.bucket
    scales = msg.scale[0]                                                    # the same vector in each message
    assert torch.equal(msg.scale, scales.expand(n, -1))
    unit = (scales / q.levels).repeat_interleave(size)[: x.numel()]
    assert bool(((out - x).abs() <= unit * (1 + 1e-5)).all())
    assert int(msg.codes.abs().max()) <= q.levels == 2 ** (q.b - 1) - 1    # a signed code fits in b bits
    frac = (x.abs() / unit) - torch.floor(x.abs() / unit)
    sd = unit * torch.sqrt(frac * (1 - frac))                                # Bernoulli rounding
    mean = out.mean(0)
    assert bool(((mean - x).abs() <= 4.5 * sd / math.sqrt(n) + 1e-6).all()), (mean, x)


def test_qsgd_is_seeded_and_zero_vectors_stay_zero():
    x = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    a, b, c = (QSGDQuantizer(4, seed=s) for s in (5, 5, 6))
    assert torch.equal(a.encode(x).codes, b.encode(x).codes)
    assert not torch.equal(a.encode(x).codes, c.encode(x).codes)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert torch.equal(c.encode(x, generator=g1).codes, a.encode(x, generator=g2).codes)
    z = torch.zeros(2, 10)
    assert torch.equal(QSGDQuantizer(3, bucket=4).roundtrip(z), z)
    one = QSGDQuantizer(8).roundtrip(x[0])                                   # a single vector, no batch axis
    assert one.shape == (50,) and float((one - x[0]).abs().max()) <= float(x[0].norm()) / 127 + 1e-6


# ----------------------------------------------------------------------------------------------- message sizes
def test_exact_bit_counts_by_hand():
    assert Identity().bits(10) == 320 and Identity().nbytes(10) == 40
    assert LatticeQuantizer(14, 1e-4).bits(25450) == 14 * 25450 == 356300
    assert LatticeQuantizer(14, 1e-4).nbytes(25450) == 44538                 # 44537.5 bytes, padded
    assert LatticeQuantizer(3, 0.1).bits(5) == 15 and LatticeQuantizer(3, 0.1).nbytes(5) == 2
    assert LatticeQuantizer(32, 1e-9).nbytes(676) == Identity().nbytes(676) == 4 * 676
    assert QSGDQuantizer(4).bits(1000) == 4000 + 32                          # codes + one float32 norm
    assert QSGDQuantizer(4, bucket=300).bits(1000) == 4000 + 4 * 32          # ceil(1000 / 300) = 4 scales
    assert QSGDQuantizer(4, bucket=250).bits(1000) == 4000 + 4 * 32
    assert QSGDQuantizer(8).nbytes(29282) == 29282 + 4
    assert QSGDQuantizer(2).nbytes(3) == 5                                   # 6 + 32 bits = 38 -> 5 bytes
    assert LatticeQuantizer(14, 1e-4).bits(0) == 0
    # the encoded message of a d-vector holds exactly d codes and the counted scales
    msg = QSGDQuantizer(4, bucket=300).encode(torch.randn(2, 1000))
    assert msg.codes.shape == (2, 1000) and msg.scale.shape == (2, 4) and msg.scale.dtype == torch.float32


def test_quantized_interval_follows_the_quafl_notebooks():
    assert quantized_interval(10.0, "lattice:14:1e-4") == pytest.approx(4.375)      # Quantized_fl.ipynb
    assert quantized_interval(3.0, LatticeQuantizer(16, 1e-4), waiting_time=5.0) == pytest.approx(6.5)  # Copy1
    assert quantized_interval(10.0, None, waiting_time=2.0) == 12.0
    assert quantized_interval(10.0, Identity()) == 10.0
    assert quantized_interval(10.0, "qsgd:8", d=100) == pytest.approx(10.0 * 832 / 100 / 32)


# ------------------------------------------------------------------------------------------------ specs, errors
@pytest.mark.parametrize("spec, expected", [
    ("identity", Identity()),
    ("lattice:14:1e-4", LatticeQuantizer(14, 1e-4)),
    (" Lattice : 8 : 0.5 ", LatticeQuantizer(8, 0.5)),
    ("qsgd:8", QSGDQuantizer(8)),
    ("qsgd:4:bucket=512:norm=max:seed=3", QSGDQuantizer(4, bucket=512, norm="max", seed=3)),
])
def test_specs_build_equal_quantizers_and_round_trip(spec, expected):
    q = make_quantizer(spec)
    assert q == expected and make_quantizer(q.spec) == q and hash(make_quantizer(q.spec)) == hash(q)
    assert make_quantizer(q) is q and q.name == spec.strip().split(":")[0].strip().lower()


def test_make_quantizer_seed_is_a_default():
    assert make_quantizer("qsgd:4", seed=5).seed == 5
    assert make_quantizer("qsgd:4:seed=2", seed=5).seed == 2


@pytest.mark.parametrize("make, name, allowed", [
    (lambda: LatticeQuantizer(0, 1e-4), "bits", r"\[1, 32\]"),
    (lambda: LatticeQuantizer(33, 1e-4), "bits", r"\[1, 32\]"),
    (lambda: LatticeQuantizer(14.0, 1e-4), "bits", r"\[1, 32\]"),
    (lambda: LatticeQuantizer(14, 0.0), "step", "> 0"),
    (lambda: LatticeQuantizer(14, -1e-4), "step", "> 0"),
    (lambda: LatticeQuantizer(14, float("nan")), "step", "> 0"),
    (lambda: QSGDQuantizer(1), "bits", r"\[2, 24\]"),
    (lambda: QSGDQuantizer(25), "bits", r"\[2, 24\]"),
    (lambda: QSGDQuantizer(4, bucket=0), "bucket", ">= 1"),
    (lambda: QSGDQuantizer(4, norm="l1"), "norm", "'l2'"),
    (lambda: QSGDQuantizer(4).bits(-1), "d", ">= 0"),
    (lambda: make_quantizer("lattice:40:1e-4"), "bits", r"\[1, 32\]"),
    (lambda: make_quantizer("lattice:14:0"), "step", "> 0"),
    (lambda: make_quantizer("qsgd:4:bucket=-2"), "bucket", ">= 1"),
    (lambda: make_quantizer("qsgd:x"), "bits", r"\[2, 24\]"),
    (lambda: make_quantizer("topk:10"), "quantizer", "'lattice'"),
    (lambda: make_quantizer("lattice:14"), "quantizer", "lattice:<bits>:<step>"),
    (lambda: make_quantizer("qsgd:4:color=red"), "quantizer", "qsgd:<bits>"),
    (lambda: make_quantizer("qsgd:bucket=3:4"), "quantizer", "positional"),
    (lambda: make_quantizer(""), "quantizer", "identity"),
    (lambda: make_quantizer(14), "quantizer", "identity"),
    (lambda: quantized_interval(-1.0, "identity"), "interaction_time", ">= 0"),
])
def test_bad_parameters_name_the_parameter_and_the_allowed_range(make, name, allowed):
    with pytest.raises(ParameterError, match=rf"^{name}=.*{allowed}"):
        make()
