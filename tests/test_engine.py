"""The vectorized engine against the oracle: a plain per-client loop with torch.optim.SGD.

Oracle comparisons run in float64: through ReLU and max-pooling a gradient is discontinuous, and float32
rounding that differs between two correct computations (a grouped and a single convolution, AVX2 and
AVX-512 kernels) can send it to another branch at a near-tie (see ``tests/test_models.py``).
"""
import copy
import re

import pytest
import torch
from torch import nn

from afl.engine import FlatModel, HookGroup, LocalSGD
from afl.errors import ParameterError
from afl.jobs import JobQueue
from afl.models import build_model
from afl.strategies import choose_strategy, cross_entropy_sum
from afl.streams import ClientStreams

F64 = torch.float64


class Tiny:
    """Minimal in-memory dataset with the interface the engine needs."""

    def __init__(self, shape, n=96, classes=4, seed=0, dtype=F64):
        g = torch.Generator().manual_seed(seed)
        self.train_x = torch.randn(n, *shape, generator=g, dtype=dtype)
        self.train_y = torch.randint(0, classes, (n,), generator=g)
        self.test_x, self.test_y = self.train_x[:32], self.train_y[:32]
        self.augment = None

    def inputs(self, x):
        return x


class TinyTokens(Tiny):
    """Symbol windows ``(n, T)`` with next-symbol labels, as the Shakespeare data."""

    def __init__(self, n=64, T=7, vocab=6, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.train_x = torch.randint(0, vocab, (n, T), generator=g)
        self.train_y = torch.randint(0, vocab, (n,), generator=g)
        self.test_x, self.test_y = self.train_x[:32], self.train_y[:32]
        self.augment = None


def char_lstm(num_layers=2):
    """afl's character LSTM, small: 6 symbols, embedding 3, hidden 5."""
    return build_model("char-lstm", num_classes=6, seed=1, embed_dim=3, hidden_size=5, num_layers=num_layers).double()


def mlp():
    torch.manual_seed(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4)).double()


def afl_mlp():
    """afl's MLP (12-16-8-4): the hand-written ``mlp`` strategy applies to it."""
    return build_model("mlp32", num_classes=4, seed=1, in_features=12, hidden=16).double()


def cnn():
    torch.manual_seed(2)
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.GroupNorm(2, 6), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(6 * 4 * 4, 4)).double()


def oracle(module, data, start, batches, steps, lr, wd, momentum=0.0):
    """Per-client loop exactly as the papers' codes train: a copy of the model and torch.optim.SGD."""
    flat, out = FlatModel(module), []
    for c in range(start.shape[0]):
        m = copy.deepcopy(module)
        flat.load_into(start[c], m)
        opt = torch.optim.SGD(m.parameters(), lr=float(lr[c]), weight_decay=float(wd[c]), momentum=momentum)
        for t in range(int(steps[c])):
            idx = batches[c, t]
            opt.zero_grad()
            nn.functional.cross_entropy(m(data.train_x[idx]), data.train_y[idx]).backward()
            opt.step()
        out.append(flat.flatten(m))
    return torch.stack(out)


def heavy_ball(beta):
    def hook(t, w, d, w0, state):
        return state["m"].mul_(beta).add_(d)
    return hook


CASES = [(mlp, (3, 2, 2), "vmap"), (mlp, (3, 2, 2), "loop"), (afl_mlp, (3, 2, 2), "mlp"),
         (afl_mlp, (3, 2, 2), "vmap"), (cnn, (3, 8, 8), "vmap"), (cnn, (3, 8, 8), "loop")]


@pytest.mark.parametrize("make, shape, strategy", CASES, ids=[f"{m.__name__}-{s}" for m, _, s in CASES])
@pytest.mark.parametrize("use_hook", [False, True])
def test_engine_matches_per_client_sgd(make, shape, strategy, use_hook):
    check_against_oracle(Tiny(shape), make(), strategy, use_hook)


@pytest.mark.parametrize("strategy", ["lstm", "lstm-loop", "vmap", "loop"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("use_hook", [False, True])
def test_lstm_engine_matches_per_client_sgd(strategy, layers, use_hook):
    check_against_oracle(TinyTokens(), char_lstm(layers), strategy, use_hook)


def check_against_oracle(data, module, strategy, use_hook):
    """Five clients, unequal steps (one idle), per-client lr and weight decay, optionally heavy-ball state."""
    C, S, B = 5, 6, 8
    g = torch.Generator().manual_seed(3)
    P = FlatModel(module).size
    start = FlatModel(module).flatten() + 0.05 * torch.randn(C, P, generator=g, dtype=F64)
    batches = torch.randint(0, len(data.train_y), (C, S, B), generator=g)
    steps = torch.tensor([6, 0, 3, 6, 1])            # unequal, one client idle
    lr = torch.tensor([0.1, 0.2, 0.05, 0.3, 0.1])
    wd = torch.tensor([0.0, 1e-3, 1e-2, 0.0, 5e-4])
    engine = LocalSGD(module, data, batch_size=B, strategy=strategy)
    assert engine.strategy.name == strategy
    kwargs = {}
    if use_hook:
        kwargs = dict(hook=heavy_ball(0.9), state={"m": torch.zeros(C, P, dtype=F64)})
    got = engine.run(start, batches, steps, lr, wd, **kwargs)
    want = oracle(module, data, start, batches, steps, lr, wd, momentum=0.9 if use_hook else 0.0)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    assert torch.equal(got[1], start[1])              # zero steps: untouched
    assert not torch.allclose(got[0], start[0])       # the test can fail: training moved the client


class PullToReference:
    """A MIME-like hook: ``d + shift - grad f(reference)`` (the engine passes that gradient as ``gradient_at``)."""

    gradient_at = "reference"

    def __call__(self, t, w, d, w0, state):
        state["sum"] += d
        return d + state["shift"] - state["gradient_at"]


GROUPED = [(afl_mlp, "mlp"), (afl_mlp, "vmap"), (afl_mlp, "loop"), (char_lstm, "lstm"), (char_lstm, "lstm-loop")]


@pytest.mark.parametrize("mix_groups", [True, False], ids=["mixed-steps", "step-per-group"])
@pytest.mark.parametrize("make, strategy", GROUPED, ids=[s for _, s in GROUPED])
def test_clients_of_different_hooks_train_in_one_call_as_apart(make, strategy, mix_groups):
    """Groups of clients with different hooks (none, heavy ball, a gradient at a reference model), interleaved in
    the call and with unequal steps, give each client and each state what a call per group gives: whether each
    batched step holds several groups' clients (as on a GPU) or one group's (as on a CPU)."""
    module = make()
    data = TinyTokens() if make is char_lstm else Tiny((3, 2, 2))
    C, S, B = 8, 5, 8
    g = torch.Generator().manual_seed(5)
    P = FlatModel(module).size
    start = FlatModel(module).flatten() + 0.05 * torch.randn(C, P, generator=g, dtype=F64)
    batches = torch.randint(0, len(data.train_y), (C, S, B), generator=g)
    steps = torch.tensor([5, 3, 0, 5, 2, 5, 1, 4])
    lr = torch.linspace(0.05, 0.3, C, dtype=F64)
    wd = torch.tensor([0.0, 1e-3] * 4, dtype=F64)
    rows = [[0, 4], [6, 1, 3], [7, 2, 5]]
    hooks = [None, heavy_ball(0.9), PullToReference()]

    def states(group, rows):
        return [{}, {"m": 0.1 * torch.randn(len(rows), P, generator=torch.Generator().manual_seed(1), dtype=F64)},
                {"shift": torch.full((len(rows), P), 0.01, dtype=F64), "sum": torch.zeros(len(rows), P, dtype=F64),
                 "reference": start[rows].flip(0)}][group]

    engine = LocalSGD(module, data, batch_size=B, strategy=strategy)
    engine.mix_groups = mix_groups
    groups = [HookGroup(r, h, states(i, r)) for i, (r, h) in enumerate(zip(rows, hooks))]
    got = engine.run(start, batches, steps, lr, wd, groups=groups)
    for i, (r, hook) in enumerate(zip(rows, hooks)):
        state = states(i, r)
        apart = engine.run(start[r], batches[r], steps[r], lr[r], wd[r], hook=hook, state=state)
        torch.testing.assert_close(got[r], apart, rtol=1e-9, atol=1e-10)
        for name in state:
            torch.testing.assert_close(groups[i].state[name], state[name], rtol=1e-9, atol=1e-10)
    assert groups[2].state["sum"].abs().sum() > 0           # the hooks ran: their state moved
    assert not torch.allclose(got[r], LocalSGD(module, data, B, strategy=strategy).run(
        start[r], batches[r], steps[r], lr[r], wd[r]))       # and changed the result (the test can fail)


def test_a_cpu_step_holds_one_groups_clients_most_steps_first():
    engine = LocalSGD(afl_mlp(), Tiny((3, 2, 2)), batch_size=4)
    engine.call_clients = 2
    group_of = torch.tensor([1, 0, 2, 0, 1, 0, 2])
    steps = torch.tensor([3, 1, 2, 5, 4, 2, 2])
    assert not engine.mix_groups
    assert [c.tolist() for c in engine._calls(group_of, steps)] == [[3, 5], [1], [4, 0], [2, 6]]
    engine.mix_groups = True
    assert [c.tolist() for c in engine._calls(group_of, steps)] == [[3, 4], [0, 5], [2, 6], [1]]


@pytest.mark.parametrize("groups, name", [
    (lambda P: [HookGroup([0, 1]), HookGroup([1, 2])], "groups[1].rows"),
    (lambda P: [HookGroup([0, 1])], "groups"),
    (lambda P: [HookGroup([0, 1, 2], heavy_ball(0.9), {"m": torch.zeros(2, P, dtype=F64)})], "groups[0].state['m']"),
])
def test_bad_hook_groups_name_the_parameter(groups, name):
    module, data = mlp(), Tiny((3, 2, 2))
    engine = LocalSGD(module, data, 8)
    P = engine.model.size
    start = FlatModel(module).flatten().expand(3, -1).clone()
    with pytest.raises(ParameterError, match=re.escape(name)):
        engine.run(start, torch.zeros(3, 1, 8, dtype=torch.long), [1, 1, 1], 0.1, groups=groups(P))


@pytest.mark.parametrize("strategy", ["vmap", "loop"])
def test_strategies_agree_in_float32_on_a_smooth_model(strategy):
    """float32 end to end, on a model without kinks (tanh, average pooling): no near-tie can flip."""
    torch.manual_seed(4)
    module = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.GroupNorm(2, 6), nn.Tanh(), nn.AvgPool2d(2),
                           nn.Flatten(), nn.Linear(6 * 4 * 4, 4))
    data = Tiny((3, 8, 8), dtype=torch.float32)
    C, S, B = 4, 3, 8
    g = torch.Generator().manual_seed(5)
    start = FlatModel(module).flatten() + 0.05 * torch.randn(C, FlatModel(module).size, generator=g)
    batches = torch.randint(0, len(data.train_y), (C, S, B), generator=g)
    steps, lr, wd = torch.tensor([3, 2, 3, 1]), torch.full((C,), 0.1), torch.zeros(C)
    got = LocalSGD(module, data, B, strategy=strategy).run(start, batches, steps, lr)
    torch.testing.assert_close(got, oracle(module, data, start, batches, steps, lr, wd), rtol=1e-4, atol=1e-5)


def test_auto_strategy_per_device_and_model():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert choose_strategy(build_model("mlp200"), cpu, cross_entropy_sum) == "mlp"
    assert choose_strategy(build_model("mlp200"), cpu, lambda o, y: o.sum()) == "vmap"   # custom loss
    assert choose_strategy(build_model("cnn-cifar"), cpu, cross_entropy_sum) == "loop"
    assert choose_strategy(build_model("resnet20"), cpu, cross_entropy_sum) == "loop"
    assert choose_strategy(build_model("cnn-cifar"), cuda, cross_entropy_sum) == "vmap"
    assert choose_strategy(build_model("char-lstm"), cpu, cross_entropy_sum) == "lstm-loop"
    assert choose_strategy(build_model("char-lstm"), cuda, cross_entropy_sum) == "lstm"
    with pytest.raises(ParameterError, match="strategy"):
        LocalSGD(mlp(), Tiny((3, 2, 2)), 4, strategy="mlp")           # not an afl MLP
    for name in ("lstm", "lstm-loop"):
        with pytest.raises(ParameterError, match=f"strategy='{name}'.*CharLSTM"):
            LocalSGD(mlp(), Tiny((3, 2, 2)), 4, strategy=name)
    with pytest.raises(ParameterError, match="strategy"):
        LocalSGD(mlp(), Tiny((3, 2, 2)), 4, strategy="fast")


@pytest.mark.parametrize("strategy", ["vmap", "loop"])
def test_chunking_does_not_change_results(strategy):
    data, module = Tiny((3, 8, 8)), cnn()
    C, S, B = 7, 4, 8
    g = torch.Generator().manual_seed(4)
    start = FlatModel(module).flatten().expand(C, -1).clone()
    batches = torch.randint(0, 96, (C, S, B), generator=g)
    steps = torch.tensor([4, 2, 3, 1, 4, 0, 2])
    whole = LocalSGD(module, data, B, strategy=strategy).run(start, batches, steps, 0.1)
    small = LocalSGD(module, data, B, max_bytes=1, strategy=strategy)   # one client per chunk
    assert small.chunk == 1
    torch.testing.assert_close(small.run(start, batches, steps, 0.1), whole, rtol=1e-9, atol=1e-10)


def lstm100():
    """Shakespeare's character LSTM with one layer (80 symbols, embedding 8, hidden 100)."""
    return build_model("char-lstm", num_layers=1, seed=1)


def mlp200():
    """MNIST's MLP (784-200-200-10), wide enough that float32 kernels round a batch of one otherwise."""
    return build_model("mlp200", num_classes=10, seed=1)


def digits():
    return Tiny((1, 28, 28), classes=10, dtype=torch.float32)


def images():
    return Tiny((3, 8, 8), dtype=torch.float32)


def tokens():
    return TinyTokens(n=96, T=10, vocab=80)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: cuBLAS's batch of one, with recorded graphs"))])
@pytest.mark.parametrize("make, data, strategy, hook", [
    (mlp200, digits, "mlp", False), (mlp200, digits, "mlp", True), (mlp200, digits, "vmap", False),
    (lstm100, tokens, "lstm", False), (lstm100, tokens, "lstm-loop", False), (cnn, images, "vmap", False),
    (cnn, images, "loop", False)])
def test_a_client_trains_to_the_same_bits_alone_and_in_company(make, data, strategy, hook, device):
    """In float32, where a batched kernel rounds a batch of one otherwise: each client trained alone equals it
    trained beside six others in step calls of three (the seventh's call holds it alone; the client with the most
    steps of a call takes its last steps alone), so a run's numbers do not depend on the runs beside it. The models
    have afl's sizes: a far smaller output layer (:func:`char_lstm`'s, 6 x 5) rounds its weight gradient by the
    parity of the client's row in the batch on an AVX-512 CPU, which no pairing removes. On a GPU the same, with
    the engine's defaults there (CUDA graphs recorded per call shape, the fused LSTM cell)."""
    data = data()
    module = make().float()
    if device == "cuda":
        data, module = _on_cuda(data), module.cuda()
    C, S, B = 7, 5, 32
    g = torch.Generator().manual_seed(5)
    start = (FlatModel(module).flatten().cpu() + 0.1 * torch.randn(C, FlatModel(module).size, generator=g)).to(device)
    batches = torch.randint(0, len(data.train_y), (C, S, B), generator=g).to(device)
    steps = torch.tensor([5, 2, 3, 1, 4, 5, 2])

    def momentum(n):
        return dict(hook=heavy_ball(0.5), state={"m": torch.zeros(n, start.shape[1], device=device)}) if hook else {}
    engine = LocalSGD(module, data, B, strategy=strategy)
    engine.call_clients = 3
    together = engine.run(start, batches, steps, 0.1, 0.01, **momentum(C))
    for c in range(C):
        alone = engine.run(start[c:c + 1], batches[c:c + 1], steps[c:c + 1], 0.1, 0.01, **momentum(1))
        assert torch.equal(alone[0], together[c]), (strategy, c)


def test_job_queue_is_lazy_and_equals_direct_run():
    data, module = Tiny((3, 2, 2)), mlp()
    parts = [torch.arange(i * 24, (i + 1) * 24) for i in range(4)]
    engine = LocalSGD(module, data, 8)
    queue = JobQueue(engine, ClientStreams(parts, 8, seed=0))
    w0 = FlatModel(module).flatten()
    jobs = [queue.submit(c, w0, steps=c + 1, lr=0.1) for c in range(4)]
    assert not any(j.done for j in jobs) and queue.client_steps == 0
    first = jobs[2].result()
    assert all(j.done for j in jobs) and queue.client_steps == 1 + 2 + 3 + 4
    streams = ClientStreams(parts, 8, seed=0)
    batches = torch.zeros(4, 4, 8, dtype=torch.long)
    for c in range(4):
        batches[c, :c + 1] = streams.take(c, c + 1)
    direct = engine.run(w0.expand(4, -1), batches, [1, 2, 3, 4], 0.1)
    torch.testing.assert_close(first, direct[2])
    torch.testing.assert_close(torch.stack([j.result() for j in jobs]), direct)


def test_dropout_masks_come_from_the_runs_own_generator():
    """A model with dropout draws its masks from torch's global generator; a queue seeds it from its own, so the
    same seed gives the same models whatever ran before in the process, and another seed other models."""
    data, parts = Tiny((3, 2, 2)), [torch.arange(i * 24, (i + 1) * 24) for i in range(4)]

    def train(seed, disturb):
        torch.manual_seed(1)
        module = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 4)).double()
        engine = LocalSGD(module, data, 8)
        assert engine.model.random and not LocalSGD(mlp(), data, 8).model.random
        queue = JobQueue(engine, ClientStreams(parts, 8, seed=seed))
        torch.manual_seed(disturb)                            # whatever ran before
        w0 = FlatModel(module).flatten()
        return torch.stack([queue.submit(c, w0, steps=3, lr=0.5).result() for c in range(4)])

    torch.testing.assert_close(train(0, disturb=5), train(0, disturb=6))
    assert not torch.allclose(train(0, disturb=5), train(1, disturb=5))


def test_a_flush_trains_its_jobs_chunk_by_chunk_and_a_failure_stays_with_its_queue():
    """Jobs beyond one engine chunk are stacked a chunk at a time (bounded memory) with the numbers of one call;
    a queue whose job fails in a later chunk fails alone: the jobs trained before keep their results."""
    from afl.jobs import run_pending
    data, module = Tiny((3, 2, 2)), mlp()
    parts = [torch.arange(i * 24, (i + 1) * 24) for i in range(4)]
    small = LocalSGD(module, data, 8, max_bytes=1)                         # one client per chunk
    assert small.chunk == 1
    sizes, run = [], small.run
    small.run = lambda start, *args, **kw: sizes.append(len(start)) or run(start, *args, **kw)
    good, bad = (JobQueue(small, ClientStreams(parts, 8, seed=k)) for k in (0, 1))
    w0 = FlatModel(module).flatten()
    jobs = [good.submit(c, w0, steps=c + 1, lr=0.1) for c in range(4)]
    failing = bad.submit(0, w0, steps=1, lr=float("nan"))               # fewest steps: trained last
    streams = ClientStreams(parts, 8, seed=0)
    batches = torch.zeros(4, 4, 8, dtype=torch.long)
    for c in range(4):
        batches[c, :c + 1] = streams.take(c, c + 1)
    run_pending([good, bad])
    assert sizes[:5] == [1] * 5                                           # then bad's job alone, again
    whole = LocalSGD(module, data, 8).run(w0.expand(4, -1), batches, [1, 2, 3, 4], 0.1)
    torch.testing.assert_close(torch.stack([j.result() for j in jobs]), whole, rtol=1e-12, atol=1e-12)
    assert all(j.result().untyped_storage().nbytes() == w0.numel() * 8 for j in jobs)   # its own memory, not a
    #                                                                   view pinning the chunk until every job is read
    with pytest.raises(ParameterError, match="lr"):
        failing.result()


def test_streams_cover_each_epoch_and_are_seeded():
    parts = [torch.arange(10), torch.arange(10, 13)]
    a, b = ClientStreams(parts, 5, seed=7), ClientStreams(parts, 5, seed=7)
    first = a.take(0, 2)
    assert sorted(first.reshape(-1).tolist()) == list(range(10))   # one full epoch, no repeats
    assert torch.equal(first, b.take(0, 2))
    small = a.take(1, 1)                                            # 3 samples, batch 5: repeats
    assert set(small.reshape(-1).tolist()) <= {10, 11, 12}
    assert not torch.equal(ClientStreams(parts, 5, seed=8).take(0, 2), first)


@pytest.mark.parametrize("make, strategy", [(cnn, "vmap"), (cnn, "loop"), (afl_mlp, "mlp"), (char_lstm, "lstm"),
                                            (char_lstm, "lstm-loop")])
def test_evaluate_matches_module(make, strategy):
    data = {cnn: Tiny((3, 8, 8)), afl_mlp: Tiny((3, 2, 2)), char_lstm: TinyTokens()}[make]
    module = make()
    engine = LocalSGD(module, data, 8, strategy=strategy)
    w = FlatModel(module).flatten()
    res = engine.evaluate(torch.stack([w, w * 0]))
    with torch.no_grad():
        logits = module(data.test_x)
    acc = (logits.argmax(1) == data.test_y).float().mean()
    torch.testing.assert_close(res["accuracy"][0], acc.to(res["accuracy"].dtype))
    torch.testing.assert_close(res["loss"][0], nn.functional.cross_entropy(logits, data.test_y).to(res["loss"].dtype))
    assert res["accuracy"][1] == (data.test_y == 0).float().mean()        # the zero model predicts class 0


@pytest.mark.parametrize("kwargs, name", [
    (dict(steps=[1, 9]), "steps"), (dict(lr=-0.1), "lr"), (dict(steps=[1]), "steps"),
    (dict(lr=float("nan")), "lr"), (dict(weight_decay=[0.1, 0.2, 0.3]), "weight_decay"),
])
def test_engine_bad_input_names_parameter(kwargs, name):
    data, module = Tiny((3, 2, 2)), mlp()
    engine = LocalSGD(module, data, 4)
    args = dict(start=FlatModel(module).flatten().expand(2, -1), batches=torch.zeros(2, 3, 4, dtype=torch.long),
                steps=[1, 2], lr=0.1)
    args.update(kwargs)
    with pytest.raises(ParameterError, match=name):
        engine.run(**args)
    with pytest.raises(ParameterError, match="batch_size"):
        LocalSGD(module, data, 0)


def smooth_cnn():
    """float32, without kinks (tanh, average pooling)."""
    torch.manual_seed(4)
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.GroupNorm(2, 6), nn.Tanh(), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(6 * 4 * 4, 4))


def smooth_afl_mlp():
    return build_model("mlp32", num_classes=4, seed=1, in_features=48, hidden=16)


@pytest.mark.parametrize("make, strategy", [(smooth_cnn, "vmap"), (smooth_cnn, "loop"), (smooth_afl_mlp, "mlp")])
@pytest.mark.parametrize("use_hook", [False, True])
def test_bf16_trains_like_float32_and_keeps_float32_parameters(make, strategy, use_hook):
    """precision="bf16": each client's update is the float32 one to within 1 % (bfloat16 keeps 8 significant bits;
    measured 0.3-0.5 %), 5 % through afl's MLP, whose ReLUs can flip; not equal to it (autocast is on);
    parameters, hook state and results stay float32."""
    data, module = Tiny((3, 8, 8) if make is smooth_cnn else (3, 4, 4), dtype=torch.float32), make()
    C, S, B = 4, 4, 8
    g = torch.Generator().manual_seed(6)
    P = FlatModel(module).size
    start = FlatModel(module).flatten() + 0.05 * torch.randn(C, P, generator=g)
    batches = torch.randint(0, len(data.train_y), (C, S, B), generator=g)
    steps, lr, wd = torch.tensor([4, 2, 4, 1]), torch.full((C,), 0.1), torch.full((C,), 1e-3)
    runs = {}
    for precision in ("fp32", "bf16"):
        engine = LocalSGD(module, data, B, strategy=strategy, precision=precision)
        kwargs = dict(hook=heavy_ball(0.9), state={"m": torch.zeros(C, P)}) if use_hook else {}
        runs[precision] = engine.run(start, batches, steps, lr, wd, **kwargs) - start
        if use_hook:
            assert kwargs["state"]["m"].dtype == torch.float32
    assert runs["bf16"].dtype == torch.float32
    error = (runs["bf16"] - runs["fp32"]).norm(dim=1) / runs["fp32"].norm(dim=1)
    assert bool((error < (0.01 if make is smooth_cnn else 0.05)).all()), error
    assert bool((error > 0).all()), "bf16 computed exactly as fp32: autocast was not applied"


def test_vmap_channels_last_layout_changes_nothing():
    """vmap's channels-last input (memory order B, H, W, client, C) gives the gradients of the default layout."""
    from afl.strategies import VmapStrategy
    data, module = Tiny((3, 8, 8)), cnn()
    names = FlatModel(module).names
    g = torch.Generator().manual_seed(7)
    params = [p.detach().expand(3, *p.shape) + 0.05 * torch.randn(3, *p.shape, generator=g, dtype=F64)
              for p in module.parameters()]
    x, y = data.train_x[:24].view(3, 8, 3, 8, 8), data.train_y[:24].view(3, 8)
    plain = VmapStrategy(module, names, cross_entropy_sum)
    last = VmapStrategy(module, names, cross_entropy_sum, channels_last=True)
    assert last.channels_last and last._layout(x, False).permute(1, 3, 4, 0, 2).is_contiguous()
    for a, b in zip(plain.gradient(params, x, y), last.gradient(params, x, y)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_precision_is_checked():
    with pytest.raises(ParameterError, match="precision.*'fp32', 'bf16'"):
        LocalSGD(smooth_cnn(), Tiny((3, 8, 8), dtype=torch.float32), 4, precision="fp16")
    with pytest.raises(ParameterError, match="precision"):
        LocalSGD(cnn(), Tiny((3, 8, 8)), 4, precision="bf16")               # a float64 model


def test_cpu_memory_estimate_counts_the_lstm_recurrence():
    """The Shakespeare LSTM's step keeps 65 MB a client at batch 100 (tools/engine_memory_probe.py), nearly all of
    it inside the recurrence, which module outputs do not show (they gave 5 MB: chunks 13x too large)."""
    data = TinyTokens(n=256, T=80, vocab=80)
    engine = LocalSGD(build_model("char-lstm"), data, 100)
    assert engine.memory_basis == "estimated"
    assert 65e6 <= engine.bytes_per_client <= 1.5 * 65e6
    assert engine.chunk == (2 << 30) // engine.bytes_per_client


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the chunk is measured only on a GPU")
@pytest.mark.parametrize("name", ["cnn-cifar", "resnet20"])
def test_a_gpu_chunk_fills_the_memory_it_is_given(name):
    """On a GPU the chunk comes from a measured step: a chunk of that many clients peaks within its max_bytes and
    uses at least half of it (the activation estimate ran ResNet-20 in chunks of 25 on an H100, memory unused)."""
    data = Tiny((3, 32, 32), n=256, classes=10, dtype=torch.float32)
    for attr in ("train_x", "train_y", "test_x", "test_y"):
        setattr(data, attr, getattr(data, attr).cuda())
    budget = 2 << 30
    engine = LocalSGD(build_model(name), data, 64, max_bytes=budget)
    assert engine.memory_basis == "measured" and engine.chunk > 1
    k = engine.chunk
    start = engine.model.flatten().expand(k, -1).clone()
    batches = torch.randint(0, 256, (k, 2, 64), device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    engine.run(start, batches, [2] * k, 0.01)
    torch.cuda.synchronize()
    used = torch.cuda.max_memory_allocated() - before
    assert 0.5 * budget <= used <= budget, (k, used / 2 ** 30)


def _on_cuda(data):
    for attr in ("train_x", "train_y", "test_x", "test_y"):
        setattr(data, attr, getattr(data, attr).cuda())
    return data


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the fused LSTM cell runs only on a GPU")
@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_fused_cuda_cell_trains_as_the_composed_cell(layers, monkeypatch):
    """float64 on a GPU: local SGD through PyTorch's fused LSTM cell kernel equals it through afl.models.lstm_cell
    (unequal steps, per-client lr), and the fused kernel is what a GPU engine runs."""
    import afl.strategies as strategies
    engine = LocalSGD(char_lstm(layers).cuda(), _on_cuda(TinyTokens()), 8, strategy="lstm", max_bytes=1 << 28)
    calls = []
    fused = strategies._fused_cell
    monkeypatch.setattr(strategies, "_fused_cell", lambda *a: calls.append(1) or fused(*a))
    g = torch.Generator().manual_seed(3)
    start = engine.model.flatten().expand(3, -1) + 0.1 * torch.randn(3, engine.model.size, generator=g).double().cuda()
    batches = torch.randint(0, 64, (3, 4, 8), generator=g).cuda()
    args = (batches, [4, 2, 3], torch.tensor([0.5, 0.3, 0.8]))
    assert engine.strategy.fused_cell
    through_fused = engine.run(start.clone(), *args)
    assert calls
    engine.strategy.fused_cell = False
    n = len(calls)
    through_composed = engine.run(start.clone(), *args)
    assert len(calls) == n
    assert not torch.equal(through_fused, start)
    torch.testing.assert_close(through_fused, through_composed, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the chunk is measured only on a GPU")
def test_a_gpu_chunk_counts_memory_cached_by_pytorch_as_free():
    """Freed tensors stay reserved by PyTorch's allocator: an engine built after them gets the same chunk."""
    data = _on_cuda(Tiny((3, 32, 32), n=256, classes=10, dtype=torch.float32))
    first = LocalSGD(build_model("cnn-cifar"), data, 64).chunk
    blob = torch.empty(int(torch.cuda.mem_get_info()[0] * 0.6), dtype=torch.uint8, device="cuda")
    del blob
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > 0
    assert LocalSGD(build_model("cnn-cifar"), data, 64).chunk >= 0.9 * first


@pytest.mark.parametrize("strategy", ["vmap", "loop"])
def test_a_dropout_model_evaluates_in_eval_mode(strategy):
    """Evaluations, full-batch gradients and training losses see the network in eval mode (no dropout): the same
    model gives the same numbers twice, those of the module in eval mode; training steps keep dropout on."""
    data = Tiny((3, 32, 32), n=48)
    module = build_model("celeba-cnn", num_classes=4, variant="fedbuff", image_size=32, dropout=0.5, seed=0).double()
    engine = LocalSGD(module, data, 8, strategy=strategy)
    w = FlatModel(module).flatten().unsqueeze(0)
    first, second = engine.evaluate(w), engine.evaluate(w)
    assert torch.equal(first["loss"], second["loss"]) and torch.equal(first["accuracy"], second["accuracy"])
    with torch.no_grad():
        logits = copy.deepcopy(module).eval()(data.test_x)
    torch.testing.assert_close(first["loss"][0], nn.functional.cross_entropy(logits, data.test_y).float())
    parts = [torch.arange(0, 24), torch.arange(24, 48)]
    two = w.expand(2, -1).contiguous()
    assert torch.equal(engine.full_gradient(two, parts), engine.full_gradient(two, parts))
    assert torch.equal(engine.train_loss(two, parts), engine.train_loss(two, parts))
    assert module.training                                         # train mode again for the training steps
    batches = torch.stack([torch.arange(8), torch.arange(8)]).unsqueeze(1)
    trained = [engine.run(two, batches, steps=torch.ones(2, dtype=torch.long), lr=0.1) for _ in range(2)]
    assert not torch.equal(*trained)                               # dropout draws differ from call to call
