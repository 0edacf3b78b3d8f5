"""The GHBM paper's methods on synchronous rounds, each against a plain loop written from its update rule.

The loop replays the simulator's rounds (who took part, in which order) and trains every client step by step on
its own copy of the parameters: gradient by autograd on the same mini-batches, the method's correction written
out here from its paper, then ``w <- w - lr d``. Clients hold unequal amounts of data, so the size-weighted
aggregation is exercised; everything runs in float64.
"""
import numpy as np
import pytest
import torch
from torch import nn

from afl.algorithms import get, make_federation, run_algorithm
from afl.algorithms.fedcm import last_tensor_spread
from afl.errors import ParameterError
from afl.sim import RoundSampler
from reference import DATA, SEED, Reference, server_steps

N, S, K, LR, WD, ROUNDS = 6, 2, 3, 0.2, 0.01, 12
TOL = dict(rtol=1e-9, atol=1e-10)
SIZES = [20, 60, 35, 50, 40, 35]


def federation(model="mlp32", hidden=32, device="cpu"):
    order = np.random.default_rng(3).permutation(len(DATA.train_y))
    parts = [torch.as_tensor(p) for p in np.split(order, np.cumsum(SIZES)[:-1])]
    return make_federation(DATA, model, N, batch_size=4, seed=SEED, parts=parts,
                           model_kw={"in_features": 16, "hidden": hidden}, dtype=torch.float64, device=device)


def run(name, fed=None, **kw):
    fed = fed or federation()
    settings = {**dict(K=K, lr=LR, s=S, weight_decay=WD), **({"timing": "rounds"} if name == "fedavg" else {}), **kw}
    return run_algorithm(name, fed, total_time=ROUNDS, eval_every=4, **settings), fed


class Loop:
    """Plain per-client training with a correction ``correct(w, d, batch) -> d'``."""

    def __init__(self, fed):
        self.ref = Reference(fed)
        self.parts = fed.queue.streams.parts
        self.sizes = torch.tensor([len(p) for p in self.parts], dtype=torch.float64)

    def grad(self, w, idx):
        m = self.ref.flat.load_into(w, self.ref.module)
        loss = nn.functional.cross_entropy(m(DATA.train_x[idx]), DATA.train_y[idx])
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(m.parameters()))])

    def train(self, client, start, correct=lambda w, d, idx: d):
        w = start.clone()
        for idx in self.ref.streams.take(client, K):
            d = self.grad(w, idx) + WD * w
            w = w - LR * correct(w, d, idx)
        return w

    def weights(self, clients):
        s = self.sizes[clients]
        return s / s.sum()


def rounds(out):
    groups = server_steps(out["schedule"].contacts)
    assert len(groups) == ROUNDS and all(len(g) == S and g[0].steps == K for g in groups)
    return [[c.client for c in g] for g in groups]


def pseudo(loop, theta, clients, ys):
    return loop.weights(clients) @ (theta - torch.stack(ys))


def check(name, oracle, fed=None, **kw):
    out, fed = run(name, fed, **kw)
    loop = Loop(fed)
    theta = oracle(loop, fed.init.clone(), rounds(out))
    torch.testing.assert_close(out["model"], theta, **TOL)
    return out


# -- the oracles, one per method, from the papers' update rules ----------------------------------------------

def fedavg(loop, theta, rounds_, eta=1.0):
    for clients in rounds_:
        ys = [loop.train(c, theta) for c in clients]
        theta = theta - eta * pseudo(loop, theta, clients, ys)
    return theta


def fedavgm(loop, theta, rounds_, eta=0.5, beta=0.7):
    m = torch.zeros_like(theta)
    for clients in rounds_:
        g = pseudo(loop, theta, clients, [loop.train(c, theta) for c in clients])
        m = beta * m + g
        theta = theta - eta * m
    return theta


def fedprox(loop, theta, rounds_, mu=0.3):
    for clients in rounds_:
        t0 = theta
        ys = [loop.train(c, theta, lambda w, d, idx: d + mu * (w - t0)) for c in clients]
        theta = theta - pseudo(loop, theta, clients, ys)
    return theta


def scaffold(loop, theta, rounds_, code=False):
    c, ci = torch.zeros_like(theta), torch.zeros(N, theta.numel(), dtype=theta.dtype)
    for clients in rounds_:
        ys, new = [], {}
        for i in clients:
            ys.append(loop.train(i, theta, lambda w, d, idx, i=i: d + c - ci[i]))
            new[i] = ci[i] - c + (theta - ys[-1]) / (K * LR)
        change = sum(new[i] - ci[i] for i in clients)
        for i in clients:
            ci[i] = new[i]
        theta = theta - pseudo(loop, theta, clients, ys)
        c = c + (change if code else change / N)
    return theta


def scaffold_m(loop, theta, rounds_, beta=0.8):
    c, ci = torch.zeros_like(theta), torch.zeros(N, theta.numel(), dtype=theta.dtype)
    v = torch.zeros_like(theta)
    for clients in rounds_:
        ys, new = [], {}
        for i in clients:
            seen = []

            def correct(w, d, idx, i=i, seen=seen):
                seen.append(d)
                return beta * (d + c - ci[i]) + (1 - beta) * v
            ys.append(loop.train(i, theta, correct))
            new[i] = torch.stack(seen).mean(0)
        change = sum(new[i] - ci[i] for i in clients)
        for i in clients:
            ci[i] = new[i]
        g = pseudo(loop, theta, clients, ys)
        theta, v, c = theta - g, g / (K * LR), c + change / N
    return theta


def feddyn(loop, theta, rounds_, alpha=0.05, code=False):
    h, hi = torch.zeros_like(theta), torch.zeros(N, theta.numel(), dtype=theta.dtype)
    for clients in rounds_:
        t0 = theta
        ys = [loop.train(i, theta, lambda w, d, idx, i=i: d - hi[i] + alpha * (w - t0)) for i in clients]
        for i, y in zip(clients, ys):
            hi[i] = hi[i] - alpha * (y - theta)
        g = pseudo(loop, theta, clients, ys)
        h = h - alpha / N * (g if code else sum(y - theta for y in ys))      # the code: h -= (alpha/N) g
        theta = theta - g - h / alpha
    return theta


def adabest(loop, theta, rounds_, mu=0.05, beta=0.6, code=False):
    """``code``: the GHBM code's k_i, the round number (it never records a client's last round)."""
    hi, last = torch.zeros(N, theta.numel(), dtype=theta.dtype), [0] * N
    average = theta
    for t, clients in enumerate(rounds_, start=1):
        ys = [loop.train(i, theta, lambda w, d, idx, i=i: d - hi[i]) for i in clients]
        for i, y in zip(clients, ys):
            hi[i] = hi[i] / (t if code else t - last[i]) + mu * (theta - y)
            last[i] = t
        new_average = theta - pseudo(loop, theta, clients, ys)
        theta = new_average - beta * (average - new_average)
        average = new_average
    return theta


def mime(loop, theta, rounds_, eta=1.0, beta=0.0, lite=False, dampened=False):
    """PyTorch's SGDm (the GHBM code's): m <- beta m + c; ``dampened`` (Karimireddy et al.'s): the fresh direction
    weighted 1 - beta and m <- (1 - beta) c + beta m."""
    m, fresh = torch.zeros_like(theta), 1 - beta if dampened else 1.0
    for clients in rounds_:
        full = [loop.grad(theta, torch.as_tensor(loop.parts[i])) for i in clients]
        c = torch.stack(full).mean(0)
        x = theta
        if lite:
            correct = lambda w, d, idx: fresh * d + beta * m                                  # noqa: E731
        else:
            correct = lambda w, d, idx: fresh * (d - loop.grad(x, idx) + c) + beta * m       # noqa: E731
        ys = [loop.train(i, theta, correct) for i in clients]
        theta = theta - eta * pseudo(loop, theta, clients, ys)
        m = beta * m + fresh * c
    return theta


def fedcm(loop, theta, rounds_, alpha=0.3, eta=1.0):
    g = torch.zeros_like(theta)
    for clients in rounds_:
        ys = [loop.train(i, theta, lambda w, d, idx: alpha * d + (1 - alpha) * g / (K * LR)) for i in clients]
        g = pseudo(loop, theta, clients, ys)
        theta = theta - eta * g
    return theta


def fedcm_code(loop, theta, rounds_, alpha=0.3, eta=1.0):
    """The authors' FedCM, transcribed: the server sends ``{"momentum": clone(p) for p in momentum}``, i.e. only
    the last tensor (fedcm_center_server.py); the client zips its gradients with it, ``g_i <- alpha g_i +
    (1 - alpha) / (lr K) * last[i]`` (fedcm_client.py), and the optimizer then adds weight decay."""
    grads, g = loop.ref.flat, torch.zeros_like(theta)
    for clients in rounds_:
        last = list(grads.views(g[None]).values())[-1][0]
        scale, shift = [], []
        for i, (shape, n) in enumerate(zip(grads.shapes, grads.numels)):
            zipped = i < len(last)
            scale.append(torch.full((n,), alpha if zipped else 1.0, dtype=theta.dtype))
            shift.append(last[i].expand(shape).reshape(-1) * (1 - alpha) / (LR * K) if zipped else 0 * scale[-1])
        scale, shift = torch.cat(scale), torch.cat(shift)
        ys = [loop.train(i, theta, lambda w, d, idx: scale * (d - WD * w) + shift + WD * w) for i in clients]
        g = pseudo(loop, theta, clients, ys)
        theta = theta - eta * g
    return theta


def ghbm(loop, theta, rounds_, tau=3, beta=0.9):
    models = [theta]                                    # theta^0, theta^1, ...
    for t, clients in enumerate(rounds_, start=1):
        push = (models[t - 1] - models[t - tau - 1]) / (tau * K) * beta if t - tau - 1 >= 0 else 0 * theta
        ys = [loop.train(i, theta, lambda w, d, idx: d - push / LR) for i in clients]
        theta = theta - pseudo(loop, theta, clients, ys)
        models.append(theta)
    return theta


def ghbm_server(loop, theta, rounds_, tau=3, beta=0.6, eta=0.8):
    models = [theta]
    for t, clients in enumerate(rounds_, start=1):
        g = pseudo(loop, theta, clients, [loop.train(i, theta) for i in clients])
        m = (models[t - 1] - models[t - tau - 1]) / tau if t - tau - 1 >= 0 else 0 * theta
        theta = theta - eta * g + beta * m
        models.append(theta)
    return theta


def local_ghbm(loop, theta, rounds_, beta=0.9, own=False, scale=None):
    anchor, last = {}, {}
    for t, clients in enumerate(rounds_, start=1):
        ys = []
        for i in clients:
            if i in anchor:
                k = beta * (1 / (t - last[i]) if scale is None else scale) / (K * LR)
                a = anchor[i]
                if own:          # FedHBM: from the current local model to the client's last final model
                    correct = lambda w, d, idx, k=k, a=a: d - k * (w - a)                    # noqa: E731
                else:            # LocalGHBM: from the model received now to the one received last time
                    correct = lambda w, d, idx, k=k, a=a, t0=theta: d - k * (t0 - a)          # noqa: E731
            else:
                correct = lambda w, d, idx: d                                              # noqa: E731
            ys.append(loop.train(i, theta, correct))
            anchor[i], last[i] = (ys[-1] if own else theta), t
        theta = theta - pseudo(loop, theta, clients, ys)
    return theta


CASES = {
    "fedavg": (dict(timing="rounds", weighting="size"), fedavg),
    "fedavgm": (dict(server_lr=0.5, beta=0.7), fedavgm),
    "fedprox": (dict(mu=0.3), fedprox),
    "fedprox-code": (dict(mu=0.6, proximal="code"), fedprox),           # the code's mu/2: 0.6 pulls as 0.3 does
    "scaffold": (dict(server_lr=1.0), scaffold),
    "scaffold-code": (dict(controls="code"), lambda *a: scaffold(*a, code=True)),
    "scaffold-m": (dict(beta=0.8), scaffold_m),
    "feddyn": (dict(alpha=0.05), feddyn),
    "feddyn-code": (dict(alpha=0.05, h_update="code"), lambda *a: feddyn(*a, code=True)),
    "adabest": (dict(mu=0.05, beta=0.6), adabest),
    "adabest-code": (dict(mu=0.05, beta=0.6, elapsed="code"), lambda *a: adabest(*a, code=True)),
    "mime": (dict(), mime),
    "mimemom": (dict(server_lr=0.5, beta=0.7), lambda *a: mime(*a, eta=0.5, beta=0.7)),
    "mimelitemom": (dict(server_lr=0.5, beta=0.7), lambda *a: mime(*a, eta=0.5, beta=0.7, lite=True)),
    "mimemom-dampened": (dict(server_lr=0.5, beta=0.7, momentum="dampened"),
                         lambda *a: mime(*a, eta=0.5, beta=0.7, dampened=True)),
    "mimelitemom-dampened": (dict(server_lr=0.5, beta=0.7, momentum="dampened"),
                             lambda *a: mime(*a, eta=0.5, beta=0.7, lite=True, dampened=True)),
    "fedcm": (dict(alpha=0.3, server_lr=1.0), fedcm),
    "fedcm-code": (dict(alpha=0.3, server_lr=1.0, momentum="code"), fedcm_code),
    "ghbm": (dict(tau=3, beta=0.9), ghbm),
    "fedadc": (dict(beta=0.9), lambda *a: ghbm(*a, tau=1)),
    "ghbm-server": (dict(tau=3, beta=0.6, server_lr=0.8), ghbm_server),
    "localghbm": (dict(beta=0.9), local_ghbm),
    "localghbm-code": (dict(beta=0.9, momentum_scale="C"), lambda *a: local_ghbm(*a, scale=S / N)),
    "fedhbm": (dict(beta=1.0), lambda *a: local_ghbm(*a, beta=1.0, own=True)),
}


def algorithm_of(case: str) -> str:
    """The algorithm a case runs: its name without the variant's suffix (not split at '-': scaffold-m, ghbm-server)."""
    return case.replace("-code", "").replace("-dampened", "")


@pytest.mark.parametrize("case", list(CASES))
def test_method_matches_its_update_rule(case):
    settings, oracle = CASES[case]
    check(algorithm_of(case), oracle, **settings)


def test_fedcm_code_leaves_the_tensors_past_the_last_ones_length_alone():
    """Two hidden layers: 6 tensors, an output bias of 4 entries, so the zip stops before the last two."""
    check("fedcm", fedcm_code, fed=federation("mlp200", hidden=8), alpha=0.3, server_lr=1.0, momentum="code")


def test_ghbm_with_tau_1_is_fedcm():
    """GHBM (tau = 1, heavy-ball form) equals FedCM (alpha form) with beta = 1 - alpha, eta_l(GHBM) = alpha eta_l."""
    alpha = 0.25
    a, _ = run("fedcm", alpha=alpha)
    b, _ = run("ghbm", tau=1, beta=1 - alpha, lr=alpha * LR)
    torch.testing.assert_close(a["model"], b["model"], **TOL)


def test_fedcm_code_spreads_the_last_tensor_over_the_first_ones():
    """The authors' zip pairs tensor i with entry i of the last tensor, broadcast; tensors past its length get 0."""
    shapes = [(3, 2), (3,), (2, 3), (2,)]
    spread = last_tensor_spread(["w1", "b1", "w2", "b2"], shapes, [6, 3, 6, 2])
    g = torch.arange(17.0)
    assert spread(g).tolist() == [15.0] * 6 + [16.0] * 3 + [0.0] * 8
    with pytest.raises(ParameterError, match=r"momentum='code'.*bias.*w2 \(2, 3\)"):
        last_tensor_spread(["w1", "w2"], [(3, 2), (2, 3)], [6, 6])
    out, fed = run("fedcm", momentum="code")
    P, bias = fed.init.numel(), fed.engine.model.numels[-1]
    assert out["bytes_down"] == ROUNDS * S * (P + bias) * 4        # the model and the output bias, 32 bits each


@pytest.mark.parametrize("name", ["mimemom", "mimelitemom"])
def test_mime_momentum_forms_differ_only_by_the_local_rate(name):
    """Karimireddy et al.'s dampened form at eta_l equals PyTorch's at (1 - beta) eta_l (m scaled by 1 - beta)."""
    beta = 0.7
    a, _ = run(name, server_lr=0.5, beta=beta, momentum="dampened")
    b, _ = run(name, server_lr=0.5, beta=beta, lr=(1 - beta) * LR)
    c, _ = run(name, server_lr=0.5, beta=beta)
    torch.testing.assert_close(a["model"], b["model"], **TOL)
    assert not torch.allclose(a["model"], c["model"], **TOL)


def test_server_ghbm_with_tau_1_is_fedavgm():
    a, _ = run("fedavgm", server_lr=0.5, beta=0.7)
    b, _ = run("ghbm-server", tau=1, server_lr=0.5, beta=0.7)
    torch.testing.assert_close(a["model"], b["model"], **TOL)


@pytest.mark.parametrize("name, ratio", [("fedavg", 1.0), ("fedhbm", 1.0), ("localghbm", 1.0), ("ghbm", 1.5),
                                         ("fedcm", 1.5), ("scaffold", 2.0), ("mime", 2.0), ("mimelitemom", 2.0),
                                         ("mimemom", 2.5), ("scaffold-m", 2.5)])
def test_communication_is_counted_from_what_is_sent(name, ratio):
    out, fed = run(name)
    fedavg_bytes = 2 * ROUNDS * S * fed.model_bytes
    assert (out["bytes_up"] + out["bytes_down"]) / fedavg_bytes == pytest.approx(ratio)
    assert out["uploads"] == ROUNDS * S and out["client_steps"] == ROUNDS * S * K


def test_rounds_take_one_unit_of_time_and_cyclic_sampling_is_periodic():
    out, _ = run("fedavg", timing="rounds", sampling="cyclic")
    groups = rounds(out)
    period = N // S
    assert [c.time for c in out["schedule"].contacts[::S]] == [float(r) for r in range(1, ROUNDS + 1)]
    assert all(groups[r] == groups[r % period] for r in range(ROUNDS))
    assert sorted(c for g in groups[:period] for c in g) == list(range(N))
    assert out["curve"]["time"] == [0.0, 4.0, 8.0, 12.0]


def test_uniform_sampling_is_uniform():
    sampler = RoundSampler(100, 10, "uniform", seed=0)
    counts = np.bincount(np.concatenate([sampler(r) for r in range(2000)]), minlength=100)
    assert counts.sum() == 20000 and abs(counts.mean() - 200) < 1e-9 and counts.std() < 3 * np.sqrt(200 * 0.9)
    assert all(len(set(sampler(r))) == 10 for r in range(50))


@pytest.mark.parametrize("chunk", [1, 3, None])
def test_engine_full_gradient_matches_autograd(chunk):
    """In passes of one batch of 4 (chunk 1), of 6 samples a client (chunk 3), of all samples (the default)."""
    fed = federation()
    if chunk is not None:
        fed.engine.chunk = chunk
    loop = Loop(fed)
    params = torch.stack([fed.init, fed.init * 0.5])
    parts = [loop.parts[1], loop.parts[0]]                    # 60 and 20 samples: chunks of unequal count
    got = fed.engine.full_gradient(params, [torch.as_tensor(p) for p in parts])
    for k in range(2):
        torch.testing.assert_close(got[k], loop.grad(params[k], torch.as_tensor(parts[k])), **TOL)


@pytest.mark.parametrize("name, kw, bad", [
    ("ghbm", dict(tau=0), "tau"), ("fedavg", dict(sampling="random"), "sampling"), ("fedcm", dict(alpha=0), "alpha"),
    ("fedavg", dict(timing="slowest", sampling="cyclic"), "sampling"), ("feddyn", dict(h_update="avg"), "h_update"),
    ("localghbm", dict(momentum_scale="1/C"), "momentum_scale"), ("fedavgm", dict(beta=1.0), "beta"),
    ("fedprox", dict(mu=-1), "mu"), ("scaffold", dict(controls="x"), "controls")])
def test_bad_settings_name_the_parameter(name, kw, bad):
    with pytest.raises(ParameterError, match=bad):
        get(name).make_settings(**kw)


def test_cyclic_sampling_needs_s_to_divide_n():
    with pytest.raises(ParameterError, match="divisor"):
        run("fedavg", timing="rounds", sampling="cyclic", s=4)


def test_a_grid_point_sees_every_server_step_at_or_before_it():
    """Round r ends at time r, where the server steps: the evaluation at t = 4 holds the model after 4 rounds, as the
    papers' loops evaluate after the round, with its 4 server steps counted (before, it saw the model of 3)."""
    settings = dict(K=K, lr=LR, s=S, weight_decay=WD, timing="rounds")
    long = run_algorithm("fedavg", federation(), total_time=ROUNDS, eval_every=4, **settings)
    short = run_algorithm("fedavg", federation(), total_time=4, eval_every=4, **settings)
    three = run_algorithm("fedavg", federation(), total_time=3, eval_every=3, **settings)
    curve = long["curve"]
    assert curve["time"] == [0.0, 4.0, 8.0, 12.0] and curve["server_steps"] == [0, 4, 8, 12]
    assert curve["accuracy"][1] == short["final_accuracy"] and short["server_steps"] == 4
    assert curve["loss"][1] == short["curve"]["loss"][-1] != three["curve"]["loss"][-1]
    assert long["final_accuracy"] == curve["accuracy"][-1]
