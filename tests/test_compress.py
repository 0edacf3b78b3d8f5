"""Quantizers of afl.compress: lattice round trip and wrap-around, QSGD unbiasedness, exact message sizes, specs."""
import math

import pytest
import torch

from afl.compress import (Identity, LatticeQuantizer, QSGDQuantizer, get, make_quantizer, quantized_interval)
from afl.errors import ParameterError
from afl.models import build_model


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


@pytest.mark.parametrize("bits, step, key_dtype", [(6, 0.01, torch.float32), (14, 1e-4, torch.float64),
                                                   (1, 0.25, torch.float32)])
def test_lattice_one_pass_round_trip_equals_encode_then_decode(bits, step, key_dtype):
    """The simulation's one float64 pass gives bit for bit what the int64 codes on the wire decode to, and counts
    the coordinates that wrapped around, also when one vector is sent to many receivers (QuAFL's broadcast)."""
    q = LatticeQuantizer(bits, step)
    g = torch.Generator().manual_seed(bits)
    key = torch.randn(3, 700, generator=g, dtype=torch.float64).to(key_dtype)
    x = key + 1.5 * q.radius * torch.randn(3, 700, generator=g, dtype=torch.float64).to(key_dtype)
    for sent, receiver in ((x, key), (x[0], key), (x, key[0])):
        want = q.decode(q.encode(sent), receiver)
        got, overflows = q.roundtrip_counting_overflows(sent, receiver)
        assert got.dtype == want.dtype == key_dtype and torch.equal(got, want)
        assert torch.equal(q.roundtrip(sent, receiver), want)
        assert 0 < overflows == int(q.overflow(sent, receiver).sum()) < want.numel()   # some wrapped, not all
        z = torch.round(sent.double() / step).long()                         # int64, as on the wire
        codes = q.encode(sent).codes
        decoded = codes + 2 ** bits * torch.round((receiver.double() / step - codes.double()) / 2 ** bits).long()
        assert overflows == int((decoded != z).sum())


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
    for q in (LatticeQuantizer(14, 1e-4), QSGDQuantizer(4)):              # a message has at least one coordinate
        with pytest.raises(ParameterError, match="d=0"):
            q.bits(0)
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
    (lambda: QSGDQuantizer(4).bits(-1), "d", ">= 1"),
    (lambda: make_quantizer("lattice:40:1e-4"), "bits", r"\[1, 32\]"),
    (lambda: make_quantizer("lattice:14:0"), "step", "> 0"),
    (lambda: make_quantizer("qsgd:4:bucket=-2"), "bucket", ">= 1"),
    (lambda: make_quantizer("qsgd:x"), "bits", r"\[2, 24\]"),
    (lambda: make_quantizer("zip:10"), "quantizer", "'lattice'"),
    (lambda: make_quantizer("topk:10"), "fraction", r"\(0, 1\]"),
    (lambda: make_quantizer("topk:0"), "fraction", r"\(0, 1\]"),
    (lambda: make_quantizer("randk:0.1:rescale=maybe"), "rescale", "'true'"),
    (lambda: make_quantizer("scalar:4"), "shapes", "parameter shapes"),
    (lambda: make_quantizer("scalar:9", shapes=[(2, 2)]), "bits", r"\[1, 8\]"),
    (lambda: make_quantizer("scalar:4", shapes=[(2, 2)]).bits(5), "d", "4, the size"),
    (lambda: make_quantizer("topk-mask:0.1"), "shapes", "parameter shapes"),
    (lambda: make_quantizer("topk-mask:1.5", shapes=[(2, 2)]), "fraction", r"\(0, 1\]"),
    (lambda: make_quantizer("luq:1"), "bits", r"\[2, 8\]"),
    (lambda: make_quantizer("sr:0"), "bits", r"\[1, 24\]"),
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


# ------------------------------------------------------------------------------- wire format, new quantizers
QAFEL_SHAPES = [tuple(p.shape) for p in build_model("celeba-cnn", num_classes=2, variant="fedbuff").parameters()]
WIRE_SPECS = ["identity", "lattice:14:1e-4", "lattice:3:0.5", "qsgd:4", "qsgd:2:bucket=7", "qsgd:8:norm=max",
              "sr:1", "sr:5", "topk:0.1", "topk:1.0", "randk:0.3", "randk:0.05:rescale=false", "luq:2", "luq:4",
              "luq:8"]


@pytest.mark.parametrize("spec", WIRE_SPECS)
@pytest.mark.parametrize("d", [1, 9, 1000])
def test_wire_format_has_the_stated_size_and_round_trips_exactly(spec, d):
    q = make_quantizer(spec)
    x = torch.randn(d, generator=torch.Generator().manual_seed(d)) * 3
    msg = q.encode(x)
    data = q.to_bytes(msg)
    assert isinstance(data, bytes) and len(data) == q.nbytes(d) == -(-q.bits(d) // 8)
    key = x + 1e-6
    assert torch.equal(q.decode(q.from_bytes(data, d), key), q.decode(msg, key))
    with pytest.raises(ParameterError, match="data"):
        q.from_bytes(data + b"\0", d)
    with pytest.raises(ParameterError, match="msg"):
        q.to_bytes(q.encode(x.expand(2, d)))


@pytest.mark.parametrize("bits, nbytes", [(8, 29924), (4, 15380), (2, 8108)])
def test_flsim_channel_sizes_are_qafel_table1_to_the_byte(bits, nbytes):
    d = sum(math.prod(s) for s in QAFEL_SHAPES)
    assert d == 29282 and Identity().nbytes(d) == 117128                 # FedBuff's float32 upload
    q = make_quantizer(f"scalar:{bits}", shapes=QAFEL_SHAPES)
    assert q.nbytes(d) == nbytes and len(q.to_bytes(q.encode(torch.randn(d)))) == nbytes


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
@pytest.mark.parametrize("bits", [8, 4, 2, 1])
def test_flsim_channel_equals_torch_quantize_per_tensor(bits):
    from torch.ao.quantization.observer import MinMaxObserver
    q = make_quantizer(f"scalar:{bits}", shapes=QAFEL_SHAPES)
    model = build_model("celeba-cnn", num_classes=2, variant="fedbuff", seed=1)
    x = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) + 0.01
    want = []
    for p in model.parameters():
        t = p.detach() + 0.01
        if t.dim() > 1:
            obs = MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine, quant_min=0,
                                 quant_max=2 ** bits - 1)
            obs(t)
            scale, zero = obs.calculate_qparams()
            t = torch.quantize_per_tensor(t, float(scale), int(zero), torch.quint8).dequantize()
        want.append(t.reshape(-1))
    torch.testing.assert_close(q.roundtrip(x), torch.cat(want), rtol=0, atol=1e-7)


def test_masked_topk_is_flsims_sparse_mask_channel_and_qafel_table2():
    """Per tensor, FLSim zeroes the int(0.9 numel) smallest and counts numel / 8 mask bytes + 4 per kept value:
    15,404.25 bytes on the QAFeL model, Table 2's 15.404 kB/download."""
    d = sum(math.prod(s) for s in QAFEL_SHAPES)
    q = make_quantizer("topk-mask:0.1", shapes=QAFEL_SHAPES)
    flsim = sum(math.prod(s) / 8 + 4 * (math.prod(s) - int(0.9 * math.prod(s))) for s in QAFEL_SHAPES)
    assert q.bits(d) / 8 == flsim == 15404.25 and q.nbytes(d) == 15405
    x = torch.randn(d, generator=torch.Generator().manual_seed(0))
    msg = q.encode(x)
    assert torch.equal(q.decode(q.from_bytes(q.to_bytes(msg), d)), q.decode(msg))
    y, at = q.roundtrip(x), 0
    for shape in QAFEL_SHAPES:                                   # each tensor keeps its own largest entries
        n = math.prod(shape)
        t, kept = x[at:at + n], y[at:at + n] != 0
        assert int(kept.sum()) == n - int(0.9 * n)
        assert float(t[kept].abs().min()) >= float(torch.cat([t[~kept].abs(), t.new_zeros(1)]).max())
        at += n
    assert float(((y - x) ** 2).sum() / (x ** 2).sum()) <= q.error_bound(d)
    assert make_quantizer(q.spec, shapes=QAFEL_SHAPES) == q


def test_topk_keeps_the_largest_and_meets_its_delta():
    q = make_quantizer("topk:0.25")
    x = torch.tensor([0.1, -5.0, 2.0, 0.3, -0.2, 4.0, 0.0, 1.0])
    assert torch.equal(q.roundtrip(x), torch.tensor([0, -5.0, 0, 0, 0, 4.0, 0, 0]))
    assert q.k(8) == 2 and q.delta(8) == pytest.approx(0.25) and q.bits(8) == 2 * (3 + 32)
    y = torch.randn(50, 300, generator=torch.Generator().manual_seed(0))
    err = ((q.roundtrip(y) - y) ** 2).sum(-1) / (y ** 2).sum(-1)
    assert bool((err <= q.error_bound(300) + 1e-6).all())


@pytest.mark.parametrize("spec", ["qsgd:3", "qsgd:2:bucket=16:norm=max", "sr:2", "randk:0.2", "luq:3", "luq:5"])
def test_unbiased_quantizers_are_unbiased_and_meet_their_error_bound(spec):
    """Monte Carlo with a fixed seed: every coordinate's mean within 5 standard errors of x, and the mean
    squared error within the quantizer's bound."""
    q = make_quantizer(spec, seed=0)
    assert q.unbiased
    x = torch.randn(64, generator=torch.Generator().manual_seed(1)).double().float()
    draws = q.roundtrip(x.expand(20000, -1).contiguous()).double()
    se = draws.std(0) / math.sqrt(len(draws))
    assert bool(((draws.mean(0) - x).abs() <= 5 * se + 1e-6).all())        # 1e-6: float32 grid points
    mse = ((draws - x) ** 2).sum(-1).mean() / (x.double() ** 2).sum()
    assert float(mse) <= 1.02 * q.error_bound(64)              # 2 %: Monte Carlo noise where the bound is tight


def test_randk_without_rescaling_has_error_one_minus_k_over_d():
    q = make_quantizer("randk:0.25:rescale=false", seed=3)
    x = torch.randn(40, generator=torch.Generator().manual_seed(2))
    draws = q.roundtrip(x.expand(20000, -1).contiguous())
    mse = float(((draws - x) ** 2).sum(-1).mean() / (x ** 2).sum())
    assert not q.unbiased and mse == pytest.approx(1 - 10 / 40, rel=0.02) and q.delta(40) == pytest.approx(0.25)


def test_luq_levels_are_signed_powers_of_two_below_the_max():
    q = make_quantizer("luq:3")                  # 3 non-zero levels: max/4, max/2, max
    x = torch.tensor([8.0, -3.0, 0.5, 0.0, -8.0])
    out = q.roundtrip(x.expand(2000, -1).contiguous())
    assert set(out.abs().unique().tolist()) <= {0.0, 2.0, 4.0, 8.0}
    assert bool((out[:, 0] == 8).all() and (out[:, 4] == -8).all() and (out[:, 3] == 0).all())


def test_qsgd_delta_follows_qafel_example_b1():
    q = make_quantizer("qsgd:8")                 # s = 127
    d = 100
    assert q.error_bound(d) == pytest.approx(min(2 * d / 127 ** 2, math.sqrt(2 * d) / 127))
    assert q.delta(d) == pytest.approx(1 - q.error_bound(d))
    assert make_quantizer("qsgd:4").delta(29282) is None                  # no Definition 2.1 delta at this d


def test_get_builds_quantizers_from_keywords():
    assert get("qsgd", bits=4) == make_quantizer("qsgd:4")
    assert get("topk", fraction=0.1) == make_quantizer("topk:0.1")
    assert get("randk", fraction=0.1, rescale=False, seed=2) == make_quantizer("randk:0.1:rescale=false:seed=2")
    assert get("scalar", bits=4, shapes=QAFEL_SHAPES).spec == "scalar:4"
    for spec in ["topk:0.1", "randk:0.1:rescale=false:seed=2", "sr:3:seed=4", "luq:4"]:
        assert make_quantizer(spec).spec == spec
    with pytest.raises(ParameterError, match="quantizer"):
        get("zip")


@pytest.mark.parametrize("spec", ["identity", "lattice:14:0.0001", "qsgd:4", "sr:4", "topk:0.1", "randk:0.1", "luq:4"])
def test_a_non_finite_input_is_refused_by_name(spec):
    """A NaN or an infinity has no code: sent through it would poison every model it reaches."""
    q = make_quantizer(spec)
    x = torch.randn(50)
    q.encode(x)                                                # finite: encoded
    for bad in (float("nan"), float("inf")):
        y = x.clone()
        y[7] = bad
        with pytest.raises(ParameterError, match=rf"{q.name} input='1 non-finite value\(s\) of 50'"):
            q.encode(y)


def test_per_tensor_quantizers_name_bad_shapes():
    for name in ("scalar", "topk-mask"):
        with pytest.raises(ParameterError, match="shapes='bogus'.*tuples of positive integers"):
            get(name, 4 if name == "scalar" else 0.1, shapes="bogus")
        with pytest.raises(ParameterError, match="shapes="):
            get(name, 4 if name == "scalar" else 0.1, shapes=[(3, 0)])
    x = torch.randn(12)
    x[3] = float("nan")
    with pytest.raises(ParameterError, match="input='1 non-finite"):
        get("scalar", 4, shapes=[(3, 4)]).encode(x)
