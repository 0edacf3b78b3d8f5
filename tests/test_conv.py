"""afl.conv.Conv2d: its weight gradient as a matmul gives the gradients of nn.Conv2d, per client under vmap, for
every convolutional model of the zoo (float64: equal to rounding; bf16 autocast: as close to float32 as cuDNN's);
AFL_CONV_WEIGHT_GRADIENT is checked."""
import subprocess
import sys

import pytest
import torch
from torch.func import functional_call, vmap

from afl import conv
from afl.models import build_model

CUDA = torch.cuda.is_available()
MODELS = [("cnn-cifar", {}, (3, 32, 32)), ("lenet5", {"in_channels": 1}, (1, 28, 28)), ("resnet20", {}, (3, 32, 32)),
          ("resnet20", {"shortcut": "B"}, (3, 32, 32)), ("celeba-cnn", {"variant": "fedbuff"}, (3, 32, 32))]


def per_client_gradients(model, x, y, params, matmul: bool, device: str, autocast: bool = False):
    """Each client's gradient of its summed loss, by vmap over clients and one autograd pass."""
    (conv.MATMUL_WEIGHT_GRADIENT.add if matmul else conv.MATMUL_WEIGHT_GRADIENT.discard)(device)
    calls = []
    backward = conv._MatmulWeightGradient.backward

    def counting(ctx, g):
        calls.append(1)
        return backward(ctx, g)
    conv._MatmulWeightGradient.backward = staticmethod(counting)
    try:
        leaves = {n: p.clone().requires_grad_(True) for n, p in params.items()}
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            out = vmap(lambda p, xb: functional_call(model, p, (xb,)))(leaves, x)
            loss = torch.nn.functional.cross_entropy(out.float().flatten(0, 1), y.flatten(), reduction="sum")
        return torch.autograd.grad(loss, list(leaves.values())), len(calls)
    finally:
        conv._MatmulWeightGradient.backward = staticmethod(backward)
        conv.MATMUL_WEIGHT_GRADIENT.discard(device)


def case(name, kw, shape, dtype, device, k=3, B=4):
    g = torch.Generator().manual_seed(0)
    model = build_model(name, seed=0, **kw).to(device, dtype)
    params = {n: (p.detach().unsqueeze(0) + 0.01 * torch.randn(k, *p.shape, generator=g, dtype=dtype).to(device))
              for n, p in model.named_parameters()}
    x = torch.randn(k, B, *shape, generator=g, dtype=dtype).to(device)
    y = torch.randint(0, 2 if name == "celeba-cnn" else 10, (k, B), generator=g).to(device)
    return model, x, y, params


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if CUDA else []))
@pytest.mark.parametrize("name, kw, shape", MODELS, ids=[f"{n}{kw.get('shortcut', '')}" for n, kw, _ in MODELS])
def test_matmul_weight_gradients_equal_the_convolutions_in_float64(name, kw, shape, device):
    model, x, y, params = case(name, kw, shape, torch.float64, device)
    want, none = per_client_gradients(model, x, y, params, matmul=False, device=device)
    got, used = per_client_gradients(model, x, y, params, matmul=True, device=device)
    assert none == 0 and used == sum(isinstance(m, conv.Conv2d) for m in model.modules())   # every conv took it
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if CUDA else []))
def test_matmul_weight_gradients_under_bf16_autocast_are_as_close_to_float32_as_the_convolutions(device):
    model, x, y, params = case("cnn-cifar", {}, (3, 32, 32), torch.float32, device, B=8)
    exact, _ = per_client_gradients(model, x, y, params, matmul=False, device=device)
    want, _ = per_client_gradients(model, x, y, params, matmul=False, device=device, autocast=True)
    got, used = per_client_gradients(model, x, y, params, matmul=True, device=device, autocast=True)
    assert used == 2
    for a, b, e in zip(got, want, exact):
        assert a.dtype == torch.float32
        err_got, err_want = float((a - e).norm() / e.norm()), float((b - e).norm() / e.norm())
        assert err_got < 0.2 and err_got < 1.5 * err_want + 1e-3         # a wrong gradient is off by O(1)


def test_without_gradients_and_on_other_devices_it_is_nn_conv2d():
    model, x, _, _ = case("cnn-cifar", {}, (3, 32, 32), torch.float64, "cpu")
    plain = torch.nn.functional.conv2d(x[0], model.conv1.weight, model.conv1.bias)
    conv.MATMUL_WEIGHT_GRADIENT.add("cpu")
    try:
        with torch.no_grad():
            torch.testing.assert_close(model.conv1(x[0]), plain, rtol=0, atol=0)
        assert "MatmulWeightGradient" in type(model.conv1(x[0]).grad_fn).__name__
    finally:
        conv.MATMUL_WEIGHT_GRADIENT.discard("cpu")
    assert type(model.conv1(x[0]).grad_fn).__name__ == "ConvolutionBackward0"      # a CPU: nn.Conv2d's own


@pytest.mark.parametrize("faster", ["matmul", "convolution"])
def test_measured_weight_gradients_take_the_faster_way_per_layer_and_equal_the_convolutions(faster, monkeypatch):
    """``auto``: each layer is timed once (here a stub clock: ``faster`` wins), its choice kept per layer, clients
    and precision, and either way the gradients are nn.Conv2d's in float64."""
    model, x, y, params = case("cnn-cifar", {}, (3, 32, 32), torch.float64, "cpu")
    want, _ = per_client_gradients(model, x, y, params, matmul=False, device="cpu")
    timed = []

    def clock(fn, device, repeat=3):
        timed.append(fn)
        return len(timed) % 2 if faster == "convolution" else 1 - len(timed) % 2    # WAYS order: matmul first
    monkeypatch.setattr(conv, "_seconds", clock)
    monkeypatch.setattr(conv, "CHOICES", {})
    conv.MEASURED_WEIGHT_GRADIENT.add("cpu")
    try:
        for _ in range(2):
            got, used = per_client_gradients(model, x, y, params, matmul=True, device="cpu")
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    finally:
        conv.MEASURED_WEIGHT_GRADIENT.discard("cpu")
    assert used == 2 and len(timed) == 4                       # two layers, two ways each, measured once
    assert [way for way, _ in conv.CHOICES.values()] == [faster, faster] and conv.choices() == {faster: 2}
    assert all(key[2][0] == 3 for key in conv.CHOICES)         # the key holds the clients vmap hides


def test_the_environment_switch_is_checked_and_off_by_default():
    assert conv.MATMUL_WEIGHT_GRADIENT == set() and conv.MEASURED_WEIGHT_GRADIENT == set()
    code = "import afl.conv as c; print(sorted(c.MATMUL_WEIGHT_GRADIENT), sorted(c.MEASURED_WEIGHT_GRADIENT))"
    for value, want in (("matmul", "['cuda'] []"), ("cudnn", "[] []"), ("auto", "['cuda'] ['cuda']")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"AFL_CONV_WEIGHT_GRADIENT": value, "PATH": ""})
        assert out.stdout.strip() == want
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"AFL_CONV_WEIGHT_GRADIENT": "fast", "PATH": ""})
    assert "AFL_CONV_WEIGHT_GRADIENT='fast'" in bad.stderr
