"""The model zoo: every network the four papers train, written to be vmap-safe.

``build_model(name, num_classes=None, **kw)`` returns a plain ``nn.Module``. Every model here

* has no BatchNorm and no buffers at all (GroupNorm replaces BatchNorm, as in GHBM, FedDyn, FedAST,
  FedBuff/QAFeL), so a forward pass never writes state;
* has no data-dependent control flow (loops run over static shapes only);
* registers its parameters in forward order, so ``named_parameters()`` gives the same order on every
  build (the engine flattens them into one vector of length P in that order);
* therefore works under ``torch.func.functional_call`` + ``torch.func.vmap(torch.func.grad(loss))``
  over a leading client axis of stacked parameters, with a batching rule for every op (no per-sample
  fallback loop; ``tests/test_models.py`` checks this).

The Shakespeare LSTM is written with plain matmuls: ``nn.LSTM`` has no vmap batching rule on CPU
(``mkldnn_rnn_layer``) and falls back to a slow per-client loop. Its parameters carry the names and
shapes of ``nn.LSTM`` (``weight_ih_l0``, ``bias_hh_l1``, ...) so weights load across both ways.

Models and where they come from (see ``describe_models()`` for the parameter counts):

========== =====================================================================================
name       architecture (source)
========== =====================================================================================
mlp32      784-32-10, ReLU; ``MnistNet`` of the public QuAFL code (github ShayanTalaei/QuAFL),
           used by QuAFL and FAVAS on MNIST ("shallow neural network").
mlp200     784-200-200-10, ReLU; FedDyn's MNIST MLP (Acar et al. 2021), used by FedAST.
lenet5     LeNet-5 (LeCun et al. 1998): conv5x5(6)-pool-conv5x5(16)-pool-120-84-classes, ReLU and
           max-pool; the FedAST code's Fashion-MNIST LeNet (1x28x28, no padding, 16*4*4 features).
cnn-cifar  The CIFAR CNN of Hsu et al. (2019, 2020) / FedDyn: conv5x5(64)-pool-conv5x5(64)-pool-
           384-192-classes, ReLU. This is the network GHBM calls "LeNet" / "CNN" (the ``LeNet``
           class of its first author's earlier FedSeq code, RickZack/FedSeq, is exactly this)
           and FedAST's CIFAR-10 model.
resnet20   CIFAR ResNet-20 (He et al. 2016, 3x3 basic blocks, 16/32/64 channels), GroupNorm with
           2 groups as in GHBM (Idelbayev's implementation, option-A zero-padding shortcuts);
           ``shortcut="B"`` gives the 1x1-conv projection shortcuts of QuAFL/FAVAS's code.
resnet18   ResNet-18 (He et al. 2016) with GroupNorm(2): ``stem="cifar"`` (3x3 conv, no max-pool;
           FedAST's CIFAR-100 model) or ``stem="imagenet"`` (7x7/2 conv + 3x3/2 max-pool, the
           torchvision layout FedDyn uses; suited to TinyImageNet 64x64 as in FAVAS).
char-lstm  LEAF Shakespeare: embedding 8, 2 LSTM layers of 100, linear to 80 symbols from the
           last position (Caldas et al. 2019; FedDyn, GHBM; FedAST uses ``num_layers=1``).
celeba-cnn LEAF CelebA CNN: 4 x [conv3x3(32, same), norm, max-pool 2 (same), ReLU], linear to
           2 classes, input 3x84x84, GroupNorm instead of BatchNorm. ``variant="fedbuff"`` is
           the FLSim ``SimpleConvNet`` used by FedBuff and QAFeL (3x32x32 input, padding 2, one
           GroupNorm(32, 32) shared by all four layers, ReLU before the pool).
========== =====================================================================================
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from afl.conv import Conv2d
from afl.errors import ParameterError, check, check_choice, check_int, check_real

__all__ = [
    "MODEL_NAMES",
    "build_model",
    "count_parameters",
    "describe_models",
    "input_shape",
    "CharLSTM",
    "StackedLSTM",
]


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------

def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of ``model`` (a parameter shared by layers counts once)."""
    return sum(p.numel() for p in model.parameters())


def _conv_out(size: int, kernel: int, stride: int = 1, padding: int = 0) -> int:
    return (size + 2 * padding - kernel) // stride + 1


# --------------------------------------------------------------------------------------------
# Multilayer perceptrons
# --------------------------------------------------------------------------------------------

class MLP(nn.Module):
    """Flatten, then Linear-ReLU-...-Linear. ``sizes`` = (in, hidden..., out)."""

    def __init__(self, sizes: tuple[int, ...]):
        super().__init__()
        self.sizes = tuple(sizes)
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            self.add_module(f"fc{i}", nn.Linear(a, b))
        self.n_layers = len(sizes) - 1

    def forward(self, x: Tensor) -> Tensor:
        x = torch.flatten(x, 1)
        for i in range(1, self.n_layers + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.n_layers:
                x = F.relu(x)
        return x


# --------------------------------------------------------------------------------------------
# Small CNNs
# --------------------------------------------------------------------------------------------

class TwoConvNet(nn.Module):
    """conv5x5(c1)-ReLU-maxpool2 -> conv5x5(c2)-ReLU-maxpool2 -> FC-ReLU -> FC-ReLU -> FC.

    With (c1, c2, f1, f2) = (6, 16, 120, 84) this is LeNet-5; with (64, 64, 384, 192) it is the
    CIFAR CNN of Hsu et al. / FedDyn / GHBM. ReLU is applied after the pooling: ``relu(maxpool(x))``
    equals ``maxpool(relu(x))`` (ReLU is monotone) and so do their gradients, at a quarter of the cost.
    """

    def __init__(self, in_channels: int, image_size: int, channels: tuple[int, int],
                 hidden: tuple[int, int], num_classes: int):
        super().__init__()
        c1, c2 = channels
        s = _conv_out(image_size, 5) // 2
        s = _conv_out(s, 5) // 2
        check(s >= 1, "image_size", image_size, "at least 16 pixels for two conv5x5 + pool stages")
        self.flat_features = c2 * s * s
        self.conv1 = Conv2d(in_channels, c1, kernel_size=5)
        self.conv2 = Conv2d(c1, c2, kernel_size=5)
        self.fc1 = nn.Linear(self.flat_features, hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.fc3 = nn.Linear(hidden[1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class CelebaCNN(nn.Module):
    """Four conv3x3(32) layers with GroupNorm and 2x2 max-pooling, then one linear layer.

    ``variant="leaf"`` (LEAF, Caldas et al. 2019): conv 'same' -> GroupNorm -> maxpool 2 with
    TF-style 'same' (ceil) rounding -> ReLU, for 84x84 inputs (84-42-21-11-6: 32*6*6 features).

    ``variant="fedbuff"`` (FLSim ``SimpleConvNet``, FedBuff / QAFeL): conv padding 2 -> GroupNorm
    -> ReLU -> maxpool 2, where one GroupNorm module is shared by the four layers; for 32x32
    inputs (32-17-9-5-3: 32*3*3 features). Optional dropout before the classifier (QAFeL: 0.1);
    dropout is random, so under vmap it needs ``randomness="different"``; the default 0 adds no op.
    """

    def __init__(self, variant: str, in_channels: int, image_size: int, num_classes: int,
                 norm_groups: int, dropout: float, channels: int = 32):
        super().__init__()
        self.variant = variant
        s = image_size
        if variant == "leaf":
            for _ in range(4):
                s = math.ceil(s / 2)
        else:
            for _ in range(4):
                s = _conv_out(s, 3, 1, 2) // 2
        check(s >= 1, "image_size", image_size, "large enough for four conv + pool stages")
        self.flat_features = channels * s * s
        pad = 1 if variant == "leaf" else 2
        self.convs = nn.ModuleList(
            Conv2d(in_channels if i == 0 else channels, channels, 3, 1, pad) for i in range(4))
        if variant == "leaf":
            self.norms = nn.ModuleList(nn.GroupNorm(norm_groups, channels) for _ in range(4))
        else:
            self.norm = nn.GroupNorm(norm_groups, channels)  # shared by all layers, as in FLSim
        self.dropout = float(dropout)
        self.fc = nn.Linear(self.flat_features, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if self.variant == "leaf":
                x = F.relu(F.max_pool2d(self.norms[i](x), 2, ceil_mode=True))
            else:
                x = F.relu(F.max_pool2d(self.norm(x), 2))   # = maxpool(relu(.)), cheaper
        x = torch.flatten(x, 1)
        if self.dropout > 0:
            x = F.dropout(x, self.dropout, self.training)
        return self.fc(x)


# --------------------------------------------------------------------------------------------
# ResNets with GroupNorm
# --------------------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    """3x3 conv - GN - ReLU - 3x3 conv - GN, plus shortcut, then ReLU (He et al. 2016).

    Shortcut when the shape changes: ``"A"`` subsample by 2 and zero-pad the new channels (no
    parameters; the CIFAR ResNets of He et al.), ``"B"`` 1x1 conv with stride + GN.
    """

    def __init__(self, cin: int, cout: int, stride: int, shortcut: str, groups: int):
        super().__init__()
        self.conv1 = Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.reshape = stride != 1 or cin != cout
        self.option = shortcut
        self.stride = stride
        self.pad = cout - cin
        if self.reshape and shortcut == "B":
            self.down_conv = Conv2d(cin, cout, 1, stride, bias=False)
            self.down_norm = nn.GroupNorm(groups, cout)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        if not self.reshape:
            short = x
        elif self.option == "B":
            short = self.down_norm(self.down_conv(x))
        else:
            short = x[:, :, ::self.stride, ::self.stride]
            short = F.pad(short, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(out + short)


class ResNet(nn.Module):
    """Stem, stages of basic blocks, global average pooling, linear classifier.

    ``stem``: ``"cifar"`` 3x3/1 conv (+GN+ReLU); ``"imagenet"`` 7x7/2 conv (+GN+ReLU) then 3x3/2
    max-pool (torchvision layout).
    """

    def __init__(self, blocks: tuple[int, ...], widths: tuple[int, ...], num_classes: int,
                 in_channels: int, stem: str, shortcut: str, groups: int):
        super().__init__()
        self.stem = stem
        w0 = widths[0]
        if stem == "cifar":
            self.conv1 = Conv2d(in_channels, w0, 3, 1, 1, bias=False)
        else:
            self.conv1 = Conv2d(in_channels, w0, 7, 2, 3, bias=False)
        self.norm1 = nn.GroupNorm(groups, w0)
        cin = w0
        for i, (n, w) in enumerate(zip(blocks, widths), start=1):
            stride = 1 if i == 1 else 2
            layer = nn.Sequential(*[
                BasicBlock(cin if j == 0 else w, w, stride if j == 0 else 1, shortcut, groups)
                for j in range(n)])
            self.add_module(f"layer{i}", layer)
            cin = w
        self.n_stages = len(blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.norm1(self.conv1(x)))
        if self.stem == "imagenet":
            x = F.max_pool2d(x, 3, 2, 1)
        for i in range(1, self.n_stages + 1):
            x = getattr(self, f"layer{i}")(x)
        x = x.mean(dim=(2, 3))
        return self.fc(x)


def _init_resnet(model: nn.Module, mode: str) -> None:
    """Kaiming-normal conv (and, for "fan_in", linear) weights; GroupNorm weight 1, bias 0."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d) or (mode == "fan_in" and isinstance(m, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode=mode, nonlinearity="relu")
        elif isinstance(m, nn.GroupNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


# --------------------------------------------------------------------------------------------
# LSTM written with matmuls
# --------------------------------------------------------------------------------------------

def lstm_cell(gates: Tensor, c: Tensor | None) -> tuple[Tensor, Tensor]:
    """One LSTM step from its gate pre-activations ``(..., 4H)`` in ``nn.LSTM``'s order (input, forget, cell,
    output) and the cell state (None: zero): the new hidden and cell states."""
    i, f, gg, o = gates.chunk(4, dim=-1)
    i, f, o = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)
    gg = torch.tanh(gg)
    c = i * gg if c is None else f * c + i * gg
    return o * torch.tanh(c), c


class StackedLSTM(nn.Module):
    """Multi-layer LSTM, ``batch_first``, zero initial state, same maths, parameter names, shapes
    and gate order (input, forget, cell, output) as ``nn.LSTM``; written with plain matmuls so that
    ``torch.func.vmap`` batches it over clients.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        H = hidden_size
        for layer in range(num_layers):
            fan_in = input_size if layer == 0 else H
            self.register_parameter(f"weight_ih_l{layer}", nn.Parameter(torch.empty(4 * H, fan_in)))
            self.register_parameter(f"weight_hh_l{layer}", nn.Parameter(torch.empty(4 * H, H)))
            self.register_parameter(f"bias_ih_l{layer}", nn.Parameter(torch.empty(4 * H)))
            self.register_parameter(f"bias_hh_l{layer}", nn.Parameter(torch.empty(4 * H)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """U(-1/sqrt(H), 1/sqrt(H)) for every weight and bias, as ``nn.LSTM``."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def saved_bytes(self, x: Tensor) -> int:
        """Bytes autograd keeps inside the recurrence per sample of ``x`` (B, T, input_size), beyond the output:
        per layer and step the input projection (4H), the gate activations (4H), the cell state, its tanh and the
        hidden state (3H). The engine's memory estimate (:func:`afl.engine.activation_bytes`)."""
        return self.num_layers * x.shape[1] * 11 * self.hidden_size * x.element_size()

    def forward(self, x: Tensor, last_only: bool = False) -> Tensor:
        """x: (B, T, input_size) -> (B, T, H), or (B, H) for the last step if ``last_only``."""
        T = x.shape[1]
        for layer in range(self.num_layers):
            w_ih = getattr(self, f"weight_ih_l{layer}")
            w_hh = getattr(self, f"weight_hh_l{layer}")
            bias = getattr(self, f"bias_ih_l{layer}") + getattr(self, f"bias_hh_l{layer}")
            # (B, T, 4H): one matmul for all steps, then split once. unbind's backward is a single
            # stack, whereas indexing xg[:, t] per step would build a zero (B, T, 4H) gradient per
            # step in backward (quadratic in T: 25x slower at T = 80).
            xg = (torch.matmul(x, w_ih.t()) + bias).unbind(1)
            top = layer == self.num_layers - 1
            h = c = None
            outs = []
            for t in range(T):
                h, c = lstm_cell(xg[t] if h is None else xg[t] + torch.matmul(h, w_hh.t()), c)
                if not (top and last_only):
                    outs.append(h)
            if top and last_only:
                return h
            x = torch.stack(outs, dim=1)
        return x


class CharLSTM(nn.Module):
    """Next-character model: embedding -> stacked LSTM -> linear on the last position's output."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = StackedLSTM(embed_dim, hidden_size, num_layers)
        self.fc = nn.Linear(hidden_size, vocab_size)

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, T) int64 symbol ids -> (B, vocab_size) logits for the next symbol."""
        return self.fc(self.lstm(self.embedding(x), last_only=True))


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

class _Spec:
    def __init__(self, build: Callable, defaults: dict, num_classes: int, shape: Callable,
                 summary: str, source: str, choices: dict | None = None):
        self.build, self.defaults, self.num_classes = build, defaults, num_classes
        self.shape, self.summary, self.source = shape, summary, source
        self.choices = choices or {}


def _img_shape(kw):
    return (kw["in_channels"], kw["image_size"], kw["image_size"])


def _build_mlp(nc, in_features, hidden):
    return MLP((in_features, *hidden, nc))


def _build_lenet5(nc, in_channels, image_size):
    return TwoConvNet(in_channels, image_size, (6, 16), (120, 84), nc)


def _build_cnn_cifar(nc, in_channels, image_size):
    return TwoConvNet(in_channels, image_size, (64, 64), (384, 192), nc)


def _build_resnet20(nc, in_channels, shortcut, norm_groups, image_size):
    m = ResNet((3, 3, 3), (16, 32, 64), nc, in_channels, "cifar", shortcut, norm_groups)
    _init_resnet(m, "fan_in")
    return m


def _build_resnet18(nc, in_channels, stem, norm_groups, image_size):
    m = ResNet((2, 2, 2, 2), (64, 128, 256, 512), nc, in_channels, stem, "B", norm_groups)
    _init_resnet(m, "fan_out")
    return m


def _build_char_lstm(nc, embed_dim, hidden_size, num_layers, seq_len):
    return CharLSTM(nc, embed_dim, hidden_size, num_layers)


def _build_celeba(nc, variant, in_channels, image_size, norm_groups, dropout):
    return CelebaCNN(variant, in_channels, image_size, nc, norm_groups, dropout)


_SPECS: dict[str, _Spec] = {
    "mlp32": _Spec(
        lambda nc, in_features, hidden: _build_mlp(nc, in_features, (hidden,)),
        {"in_features": 784, "hidden": 32}, 10,
        lambda kw: (kw["in_features"],) if kw["in_features"] != 784 else (1, 28, 28),
        "MLP 784-32-10, ReLU (flattens its input)",
        "QuAFL code MnistNet (github ShayanTalaei/QuAFL, model_manager.py); QuAFL (Zakerinia et "
        "al. 2023) and FAVAS (Leconte et al.) MNIST"),
    "mlp200": _Spec(
        lambda nc, in_features, hidden: _build_mlp(nc, in_features, (hidden, hidden)),
        {"in_features": 784, "hidden": 200}, 10,
        lambda kw: (kw["in_features"],) if kw["in_features"] != 784 else (1, 28, 28),
        "MLP 784-200-200-10, ReLU (flattens its input)",
        "FedDyn (Acar et al. 2021) MNIST MLP; FedAST (Askin et al.) MNIST"),
    "lenet5": _Spec(
        _build_lenet5, {"in_channels": 3, "image_size": None}, 10, _img_shape,
        "LeNet-5: conv5x5(6)-pool-conv5x5(16)-pool-FC120-FC84-FC, ReLU, max-pool",
        "LeCun et al. 1998; FedAST code's Fashion-MNIST LeNet (in_channels=1, 28x28). "
        "GHBM's 'LeNet' is cnn-cifar, not this"),
    "cnn-cifar": _Spec(
        _build_cnn_cifar, {"in_channels": 3, "image_size": None}, 10, _img_shape,
        "CNN: conv5x5(64)-pool-conv5x5(64)-pool-FC384-FC192-FC, ReLU, max-pool",
        "Hsu et al. 2019/2020 (FedAvgM) CIFAR CNN, 'similar to LeNet-5'; GHBM (Zaccone et al.) "
        "'LeNet'/'CNN' for CIFAR-10/100; FedDyn and FedAST CIFAR-10"),
    "resnet20": _Spec(
        _build_resnet20, {"in_channels": 3, "shortcut": "A", "norm_groups": 2, "image_size": 32},
        10, _img_shape,
        "ResNet-20 (3 stages x 3 basic blocks, 16/32/64 ch), GroupNorm(2), global avg pool",
        "He et al. 2016 CIFAR ResNet (Idelbayev 2021 implementation); GHBM CIFAR-10/100 with "
        "GroupNorm(2); shortcut='B' is the QuAFL/FAVAS code's projection-shortcut ResNet-20",
        {"shortcut": ("A", "B")}),
    "resnet18": _Spec(
        _build_resnet18, {"in_channels": 3, "stem": "cifar", "norm_groups": 2, "image_size": None},
        10, _img_shape,
        "ResNet-18 (4 stages x 2 basic blocks, 64-512 ch), GroupNorm(2), projection shortcuts",
        "He et al. 2016; stem='cifar' FedAST CIFAR-100; stem='imagenet' (torchvision layout, "
        "FedDyn) for TinyImageNet 64x64 in FAVAS",
        {"stem": ("cifar", "imagenet")}),
    "char-lstm": _Spec(
        _build_char_lstm, {"embed_dim": 8, "hidden_size": 100, "num_layers": 2, "seq_len": 80},
        80, lambda kw: (kw["seq_len"],),
        "Embedding(80, 8) - 2-layer LSTM(100) - linear on last step; num_classes = vocabulary",
        "LEAF Shakespeare (Caldas et al. 2019); FedDyn, GHBM; FedAST with num_layers=1"),
    "celeba-cnn": _Spec(
        _build_celeba, {"variant": "leaf", "in_channels": 3, "image_size": None,
                        "norm_groups": None, "dropout": 0.0},
        2, _img_shape,
        "4 x [conv3x3(32), GroupNorm, max-pool 2, ReLU] - linear",
        "LEAF CelebA CNN (Caldas et al. 2019) with GroupNorm; variant='fedbuff': FLSim "
        "SimpleConvNet of FedBuff (Nguyen et al. 2022) and QAFeL (32x32, dropout 0.1)",
        {"variant": ("leaf", "fedbuff")}),
}

MODEL_NAMES: tuple[str, ...] = tuple(_SPECS)


def _resolve(name: str, num_classes, kw: dict) -> tuple[_Spec, int, dict]:
    if name not in _SPECS:
        raise ParameterError("model", name, "one of " + ", ".join(map(repr, MODEL_NAMES)))
    spec = _SPECS[name]
    for key in kw:
        if key not in spec.defaults:
            allowed = ", ".join(["num_classes", "seed", *spec.defaults])
            raise ParameterError(f"{name} keyword", key, f"one of {allowed}")
    args = {**spec.defaults, **kw}
    nc = spec.num_classes if num_classes is None else num_classes
    nc = check_int("num_classes", nc, 1 if name == "char-lstm" else 2)
    for key, choices in spec.choices.items():
        check_choice(key, args[key], choices)
    for key in ("in_channels", "in_features", "hidden", "embed_dim", "hidden_size", "num_layers",
                "seq_len", "norm_groups", "image_size"):
        if key in args and args[key] is not None:
            args[key] = check_int(key, args[key], 1)
    # Defaults that depend on other arguments.
    if "image_size" in args and args["image_size"] is None:
        if name in ("lenet5", "cnn-cifar"):
            args["image_size"] = 32 if args["in_channels"] == 3 else 28
        elif name == "resnet18":
            args["image_size"] = 64 if args["stem"] == "imagenet" else 32
        elif name == "celeba-cnn":
            args["image_size"] = 84 if args["variant"] == "leaf" else 32
    if name == "celeba-cnn":
        if args["norm_groups"] is None:
            args["norm_groups"] = 2 if args["variant"] == "leaf" else 32
        check(32 % args["norm_groups"] == 0, "norm_groups", args["norm_groups"], "a divisor of 32")
        d = args["dropout"]
        check_real("dropout", d, 0, 1, strict_high=True)
    if name in ("resnet20", "resnet18"):
        check(16 % args["norm_groups"] == 0, "norm_groups", args["norm_groups"],
              "a divisor of 16 (the narrowest layer)")
    return spec, nc, args


def build_model(name: str, num_classes: int | None = None, seed: int | None = None,
                **kw) -> nn.Module:
    """Build model ``name`` (one of :data:`MODEL_NAMES`) for ``num_classes`` outputs.

    ``seed``: if given, the initial weights are drawn from ``torch.manual_seed(seed)`` inside a
    forked RNG (the global torch RNG is left untouched), so the same seed gives the same weights.
    Other keywords are model-specific (``describe_models()`` lists them); an unknown name or
    keyword raises :class:`afl.errors.ParameterError`.

    Per-model keywords (defaults): mlp32/mlp200 ``in_features`` (784), ``hidden`` (32/200);
    lenet5/cnn-cifar ``in_channels`` (3), ``image_size`` (32 for 3 channels, else 28);
    resnet20 ``in_channels`` (3), ``shortcut`` ("A"), ``norm_groups`` (2);
    resnet18 ``in_channels`` (3), ``stem`` ("cifar"), ``norm_groups`` (2);
    char-lstm ``embed_dim`` (8), ``hidden_size`` (100), ``num_layers`` (2) (num_classes is the
    vocabulary size, 80); celeba-cnn ``variant`` ("leaf"), ``in_channels`` (3), ``image_size``
    (84 leaf / 32 fedbuff), ``norm_groups`` (2 leaf / 32 fedbuff), ``dropout`` (0).
    """
    spec, nc, args = _resolve(name, num_classes, kw)
    if seed is None:
        return spec.build(nc, **args)
    seed = check_int("seed", seed, 0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build(nc, **args)


def input_shape(name: str, **kw) -> tuple[int, ...]:
    """Shape of one input example (no batch axis) that model ``name`` built with ``kw`` expects."""
    kw.pop("num_classes", None)
    kw.pop("seed", None)
    spec, _, args = _resolve(name, None, kw)
    return tuple(spec.shape(args))


# Paper configurations worth listing beside the defaults (name, kwargs, used by).
_VARIANTS: list[tuple[str, dict, str]] = [
    ("mlp32", {}, "QuAFL / FAVAS MNIST"),
    ("mlp200", {}, "FedAST MNIST"),
    ("lenet5", {"in_channels": 1}, "FedAST Fashion-MNIST"),
    ("cnn-cifar", {}, "GHBM CIFAR-10 (CNN/'LeNet'), FedAST CIFAR-10"),
    ("cnn-cifar", {"num_classes": 100}, "GHBM CIFAR-100 (CNN/'LeNet')"),
    ("resnet20", {}, "GHBM CIFAR-10"),
    ("resnet20", {"num_classes": 100}, "GHBM CIFAR-100"),
    ("resnet20", {"shortcut": "B"}, "FAVAS CIFAR-10 (QuAFL code's ResNet-20)"),
    ("resnet18", {"num_classes": 100}, "FedAST CIFAR-100"),
    ("resnet18", {"num_classes": 200, "stem": "imagenet"}, "FAVAS TinyImageNet 64x64"),
    ("char-lstm", {}, "GHBM Shakespeare"),
    ("char-lstm", {"num_layers": 1}, "FedAST Shakespeare"),
    ("celeba-cnn", {}, "LEAF CelebA"),
    ("celeba-cnn", {"variant": "fedbuff", "dropout": 0.1}, "QAFeL / FedBuff CelebA"),
]


def _describe(name: str, kwargs: dict, used_by: str | None) -> dict:
    kwargs = dict(kwargs)
    nc = kwargs.pop("num_classes", None)
    spec, nc, args = _resolve(name, nc, kwargs)
    with torch.device("meta"):  # shapes only: no memory, no RNG use
        model = spec.build(nc, **args)
    row = {
        "name": name,
        "kwargs": {"num_classes": nc, **kwargs},
        "parameters": count_parameters(model),
        "input_shape": tuple(spec.shape(args)),
        "num_classes": nc,
        "architecture": spec.summary,
        "source": spec.source,
    }
    if used_by is not None:
        row["used_by"] = used_by
    return row


def describe_models(variants: bool = False) -> list[dict]:
    """One row per model with its default settings: name, kwargs, parameters, input_shape,
    num_classes, architecture, source. With ``variants=True``, one row per paper configuration
    instead (each with a ``used_by`` field)."""
    if variants:
        return [_describe(n, kw, used) for n, kw, used in _VARIANTS]
    return [_describe(n, {}, None) for n in MODEL_NAMES]
