"""Probe: how close is the engine's CPU memory estimate per client (``LocalSGD.bytes_per_client``) to what one
step allocates (``vmap`` for the CIFAR nets at batch 64, ``lstm`` for the Shakespeare LSTM at batch 100)? Measured
as the slope of the peak between 2 and 4 clients in ``torch.profiler``'s memory timeline (a private but
long-standing PyTorch API; on a GPU the engine measures with the CUDA allocator instead). Random inputs of the
datasets' shapes; the figures do not depend on the data.

    .venv/bin/python tools/engine_memory_probe.py
"""
import json
import tempfile
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from afl.engine import LocalSGD
from afl.models import build_model



class Random:
    """The dataset interface the engine needs, with 256 random samples: 3x32x32 images, or 80-symbol windows."""

    def __init__(self, tokens: bool = False):
        g = torch.Generator().manual_seed(0)
        self.train_x = torch.randint(0, 80, (256, 80), generator=g) if tokens else torch.randn(256, 3, 32, 32,
                                                                                              generator=g)
        self.train_y = torch.randint(0, 80 if tokens else 10, (256,), generator=g)
        self.test_x, self.test_y, self.augment = self.train_x[:32], self.train_y[:32], None

    def inputs(self, x):
        return x


def step_peak_bytes(engine: LocalSGD, k: int) -> int:
    batch = engine.batch_size
    """Peak bytes allocated above the start during one local step of k clients (after a warm-up step)."""
    start = engine.model.flatten().expand(k, -1).clone()
    batches = torch.randint(0, 256, (k, 1, batch), generator=torch.Generator().manual_seed(k))
    engine.run(start, batches, [1] * k, 0.01)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        engine.run(start, batches, [1] * k, 0.01)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        path = Path(tmp) / "timeline.json"
        prof.export_memory_timeline(str(path), device="cpu")
        _, sizes = json.loads(path.read_text())
    totals = [sum(row) for row in sizes]
    return max(totals) - totals[0]


for name, batch, strategy in (("cnn-cifar", 64, "vmap"), ("resnet20", 64, "vmap"), ("char-lstm", 100, "lstm")):
    engine = LocalSGD(build_model(name), Random(tokens=name == "char-lstm"), batch, strategy=strategy)
    two, four = step_peak_bytes(engine, 2), step_peak_bytes(engine, 4)
    print(f"{name}: estimated {engine.bytes_per_client / 1e6:.0f} MB per client, measured {(four - two) / 2e6:.0f} MB "
          f"(peaks {two / 1e6:.0f} MB with 2 clients, {four / 1e6:.0f} MB with 4)")
