"""Replayed engine calls (afl.graphs): on a CPU the bookkeeping is emulated (a replay calls the recorded function on
the static buffers), so that what a call passes through them -- inputs, the hooks' state updated in place, the
keys that say two calls are the same computation -- is checked here; the CUDA tests replay real graphs."""
import pytest
import torch

from afl.algorithms import make_federation, run_algorithm
from afl.algorithms.rounds import Drift
from afl.data import Dataset
from afl.engine import FlatModel, HookGroup, LocalSGD
from afl.errors import ParameterError
from afl.graphs import CallGraphs, graphs_enabled

from test_engine import F64, Tiny, afl_mlp, char_lstm, cnn, TinyTokens

CUDA = torch.cuda.is_available()


class Counting:
    """A hook that is not ``graph_safe`` (it keeps Python state): its calls must stay eager."""

    def __init__(self):
        self.calls = 0

    def __call__(self, t, w, d, w0, state):
        self.calls += 1
        return d


def engine_pair(make, data, device="cpu", **kw):
    """The same engine twice: one replaying recorded calls (emulated on a CPU), one eager; each step call holds the
    clients of every hook group, as on a GPU (whose chunk is kept small: these tiny models would plan chunks of
    hundreds of thousands of clients)."""
    graphs = CallGraphs(torch.device(device), emulate=device == "cpu", **kw)
    engines = (LocalSGD(make(), data, batch_size=8, cuda_graphs=graphs, max_bytes=256 << 20),
               LocalSGD(make(), data, batch_size=8, cuda_graphs=False, max_bytes=256 << 20))
    for e in engines:
        e.mix_groups = True
    return (*engines, graphs)


def call_inputs(seed, C, P, n, S=4, B=8, steps=(4, 4, 2, 2, 1), device="cpu"):
    g = torch.Generator().manual_seed(seed)
    start = 0.05 * torch.randn(C, P, generator=g, dtype=F64)
    batches = torch.randint(0, n, (C, S, B), generator=g)
    lr = 0.05 + 0.2 * torch.rand(C, generator=g, dtype=F64)
    wd = torch.tensor([0.0, 1e-3, 1e-2, 0.0, 5e-4], dtype=F64)[:C]
    groups = [HookGroup([0, 3], None),
              HookGroup([1, 4], Drift(scale=0.5, pull=0.1), {"shift": 0.01 * torch.randn(2, P, generator=g, dtype=F64),
                                                             "direction_sum": torch.zeros(2, P, dtype=F64)}),
              HookGroup([2], Drift(), {"shift": 0.01 * torch.randn(1, P, generator=g, dtype=F64)})]
    move = dict(device=device)
    for grp in groups:
        grp.state = {k: v.to(**move) for k, v in grp.state.items()}
    return start.to(**move), batches.to(**move), list(steps), lr.to(**move), wd.to(**move), groups


MODELS = [(afl_mlp, lambda: Tiny((3, 2, 2))), (cnn, lambda: Tiny((3, 8, 8))), (char_lstm, TinyTokens)]


@pytest.mark.parametrize("make, data", MODELS, ids=[m.__name__ for m, _ in MODELS])
def test_replayed_calls_equal_eager_calls_and_write_their_hooks_state_back(make, data):
    """The same call structure four times with new values each time (start models, batches, learning rates,
    state): recorded at the second sighting, replayed after; every result and state equals the eager engine's."""
    data = data()
    replayed, eager, graphs = engine_pair(make, data)
    P = replayed.model.size
    for seed in range(4):
        a = call_inputs(seed, 5, P, len(data.train_y))
        b = call_inputs(seed, 5, P, len(data.train_y))
        got = replayed.run(*a[:5], groups=a[5])
        want = eager.run(*b[:5], groups=b[5])
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        for ga, gb in zip(a[5], b[5]):
            for name in gb.state:
                torch.testing.assert_close(ga.state[name], gb.state[name], rtol=1e-12, atol=1e-12)
    assert a[5][1].state["direction_sum"].abs().sum() > 0            # the hook wrote its state
    assert (graphs.recorded, graphs.replays) == (1, 2)               # seen, recorded, replayed twice


def test_calls_of_other_steps_shapes_or_hooks_are_other_keys():
    data = Tiny((3, 2, 2))
    replayed, eager, graphs = engine_pair(afl_mlp, data)
    P = replayed.model.size
    variants = [dict(), dict(steps=(4, 3, 2, 2, 1)), dict(S=5, steps=(5, 4, 2, 2, 1))]
    for _ in range(2):
        for v in variants:
            a, b = (call_inputs(7, 5, P, len(data.train_y), **v) for _ in range(2))
            torch.testing.assert_close(replayed.run(*a[:5], groups=a[5]), eager.run(*b[:5], groups=b[5]),
                                       rtol=1e-12, atol=1e-12)
    a = call_inputs(7, 5, P, len(data.train_y))
    a[5][2].hook = Drift(scale=0.9)                                  # same rows and shapes, another hook
    b = call_inputs(7, 5, P, len(data.train_y))
    b[5][2].hook = Drift(scale=0.9)
    torch.testing.assert_close(replayed.run(*a[:5], groups=a[5]), eager.run(*b[:5], groups=b[5]),
                               rtol=1e-12, atol=1e-12)
    assert (graphs.recorded, graphs.replays) == (3, 0)


def test_a_hook_that_is_not_graph_safe_runs_eagerly_every_time():
    data = Tiny((3, 2, 2))
    replayed, _, graphs = engine_pair(afl_mlp, data)
    P, hook = replayed.model.size, Counting()
    for seed in range(3):
        start, batches, steps, lr, wd, _ = call_inputs(seed, 5, P, len(data.train_y))
        replayed.run(start, batches, steps, lr, wd, hook=hook, state={})
    assert hook.calls == 3 * 4 and graphs.recorded == 0


def test_least_recently_used_graphs_are_dropped():
    data = Tiny((3, 2, 2))
    replayed, eager, graphs = engine_pair(afl_mlp, data, capacity=2, record_after=1)
    P = replayed.model.size
    for steps in [(4, 4, 2, 2, 1), (4, 3, 2, 2, 1), (4, 4, 2, 2, 1), (3, 3, 2, 2, 1), (4, 4, 2, 2, 1)]:
        a, b = (call_inputs(1, 5, P, len(data.train_y), steps=steps) for _ in range(2))
        torch.testing.assert_close(replayed.run(*a[:5], groups=a[5]), eager.run(*b[:5], groups=b[5]),
                                   rtol=1e-12, atol=1e-12)
    assert len(graphs.entries) == 2 and (graphs.recorded, graphs.replays) == (3, 2)


def test_a_run_replaying_its_rounds_equals_the_eager_run(monkeypatch):
    """FedHBM (a Drift with per-client state, first participations without it) and FedAvg, whole runs: the
    rounds' calls recur, are replayed, and the histories equal those of eager engines."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(200, 12, generator=g, dtype=F64), torch.randint(0, 4, (200,), generator=g)
    dataset = Dataset("tiny", 4, x, y, x[:50], y[:50])

    def histories(emulate):
        init = LocalSGD.__init__

        def with_graphs(self, *args, **kwargs):
            init(self, *args, **kwargs)
            self.graphs = CallGraphs(self.device, emulate=True) if emulate else None
        monkeypatch.setattr(LocalSGD, "__init__", with_graphs)
        out = {}
        for name in ("fedavg", "fedhbm"):
            fed = make_federation(dataset, "mlp32", 10, seed=3, batch_size=8,
                                  model_kw=dict(in_features=12, hidden=16), dtype=F64)
            res = run_algorithm(name, fed, total_time=12, eval_every=4, s=3, K=3, lr=0.05, timing="rounds")
            out[name] = (res["model"], res["curve"]["loss"], fed.queue.engine.graphs)
        return out
    got, want = histories(True), histories(False)
    for name in got:
        torch.testing.assert_close(got[name][0], want[name][0], rtol=1e-12, atol=1e-12)
        assert got[name][1] == pytest.approx(want[name][1], abs=1e-12)
        assert got[name][2].replays > 0 and want[name][2] is None, name


def test_the_environment_switch_is_checked(monkeypatch):
    monkeypatch.setenv("AFL_CUDA_GRAPHS", "0")
    assert not graphs_enabled()
    monkeypatch.setenv("AFL_CUDA_GRAPHS", "yes")
    with pytest.raises(ParameterError, match="AFL_CUDA_GRAPHS='yes'"):
        graphs_enabled()


def test_graphs_on_a_cpu_are_refused_by_name():
    with pytest.raises(ParameterError, match="cuda_graphs=True"):
        LocalSGD(afl_mlp(), Tiny((3, 2, 2)), batch_size=8, cuda_graphs=True)


def test_a_datasets_normalisation_constants_are_made_once_per_device():
    x = torch.randint(0, 256, (4, 3, 2, 2), dtype=torch.uint8)
    ds = Dataset("t", 2, x, torch.zeros(4, dtype=torch.long), x, torch.zeros(4, dtype=torch.long),
                 mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))
    mean, std = torch.tensor(ds.mean).view(1, 3, 1, 1), torch.tensor(ds.std).view(1, 3, 1, 1)
    torch.testing.assert_close(ds.inputs(x), (x.float() / 255 - mean) / std, rtol=0, atol=0)
    assert ds._constant("mean", x.device) is ds._constant("mean", x.device)
    torch.testing.assert_close(ds.pad_value(ds.inputs(x)), -torch.tensor(ds.mean) / torch.tensor(ds.std))


# -- on a GPU: real graphs ------------------------------------------------------------------------------------------
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("make, data", MODELS, ids=[m.__name__ for m, _ in MODELS])
def test_cuda_graph_replays_equal_eager_calls(make, data):
    """Recorded CUDA graphs replayed with new values (nothing of a recorded call's numbers stays baked in): equal
    to the eager engine's results and states in float64."""
    data = data()
    data.train_x, data.train_y = data.train_x.cuda(), data.train_y.cuda()
    replayed, eager, graphs = engine_pair(make, data, device="cuda")
    assert replayed.graphs is graphs and eager.graphs is None
    P = replayed.model.size
    for seed in range(4):
        a = call_inputs(seed, 5, P, len(data.train_y), device="cuda")
        b = call_inputs(seed, 5, P, len(data.train_y), device="cuda")
        torch.testing.assert_close(replayed.run(*a[:5], groups=a[5]), eager.run(*b[:5], groups=b[5]),
                                   rtol=1e-9, atol=1e-10)
        for ga, gb in zip(a[5], b[5]):
            for name in gb.state:
                torch.testing.assert_close(ga.state[name], gb.state[name], rtol=1e-9, atol=1e-10)
    assert graphs.failed is None, graphs.failed
    assert (graphs.recorded, graphs.replays) == (1, 2)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cuda_graphs_record_the_cifar_cnn_with_augmentation(precision, monkeypatch):
    """cnn-cifar on CIFAR-shaped data with crop-and-flip augmentation, in both precisions: the replayed call's update
    equals the eager one's to rounding (relative to the update's size: under a recorded graph cuDNN may pick other
    kernels, and a max-pool near-tie routes a gradient elsewhere; float32 without TF32 convolutions here). Values
    baked into the graph would put it off by the whole update."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    from afl.models import build_model
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 3, 32, 32, generator=g)
    ds = Dataset("cifar-like", 10, x, torch.randint(0, 10, (256,), generator=g), x[:64],
                 torch.zeros(64, dtype=torch.long), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25),
                 augment="crop_flip").to("cuda")
    graphs = CallGraphs(torch.device("cuda"))
    engines = [LocalSGD(build_model("cnn-cifar", seed=0), ds, 16, precision=precision, cuda_graphs=c)
               for c in (graphs, False)]
    P = engines[0].model.size
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        start = (FlatModel(build_model("cnn-cifar", seed=0)).flatten()
                 + 0.01 * torch.randn(6, P, generator=gen)).cuda()
        idx = torch.randint(0, 256, (6, 3, 16), generator=gen)
        batches = torch.stack([idx, torch.randint(0, 1 << 31, idx.shape, generator=gen)], -1).cuda()
        outs = [e.run(start, batches, [3] * 6, 0.05 + 0.01 * seed, 1e-3) for e in engines]
        gap = float((outs[0] - outs[1]).norm() / (outs[1] - start).norm())
        assert gap < (5e-2 if precision == "bf16" else 1e-3), (seed, gap)
    assert graphs.failed is None, graphs.failed
    assert graphs.replays == 1
