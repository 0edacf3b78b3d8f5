"""FedAvg, QuAFL, FedBuff and FAVAS against plain-loop references on a tiny seeded federation.

Each reference replays the simulator's contacts (who was taken when, with how many steps) and trains every
client with a fresh model copy and ``torch.optim.SGD``, aggregating with the update rules written out here
from the papers; the fast path (vectorized engine, lazy jobs) must end at the same server model.
"""
import math

import numpy as np
import pytest
import torch

from afl.algorithms import run_algorithm
from afl.errors import ParameterError
from reference import K, LR, N, RUN, S, Reference, federation, server_steps


def expected_steps(mean, period, p, K, terms=4000):
    """E[E ^ K] under the server clock, written out: sum_g p(1-p)^(g-1) E[min(Poisson(g period / mean), K)]."""
    total = 0.0
    for g in range(1, terms):
        lam = g * period / mean
        pmf = [math.exp(-lam) * lam ** e / math.factorial(e) for e in range(K)]
        total += p * (1 - p) ** (g - 1) * (sum(e * q for e, q in enumerate(pmf)) + K * (1 - sum(pmf)))
    return total


def run(name, fed, **kw):
    out = run_algorithm(name, fed, **{**RUN, **kw})
    assert out["server_steps"] >= 3                      # the schedule really ran several server steps
    return out


@pytest.mark.parametrize("name", ["favas", "quafl"])
def test_server_clock_methods_match_reference(name):
    fed = federation()
    out = run(name, fed)
    ref = Reference(fed)
    w0 = fed.init.clone()
    starts = {c: w0.clone() for c in range(N)}
    batches = {c: ref.streams.take(c, K) for c in range(N)}
    alpha = {c: expected_steps(fed.profile.step_time(c).mean, RUN["server_interval"], S / N, K) for c in range(N)}
    lr = LR * (S + 1) / S if name == "quafl" else LR
    w = w0.clone()
    for group in server_steps(out["schedule"].contacts):
        sent, new_start = [], {}
        for c in group:
            local = ref.train(starts[c.client], batches[c.client], c.steps, lr)
            if name == "favas":                                            # Alg. 1, l. 24
                sent.append(starts[c.client] + (local - starts[c.client]) / alpha[c.client])
            else:
                sent.append(local)
                new_start[c.client] = (w + S * local) / (S + 1)          # QuAFL client-side mixing
        w_new = (w + sum(sent)) / (S + 1)
        for c in group:
            starts[c.client] = w_new.clone() if name == "favas" else new_start[c.client]
            batches[c.client] = ref.streams.take(c.client, K)
        w = w_new
    torch.testing.assert_close(out["model"], w, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(w, w0)


def test_favas_stochastic_reweighting_matches_reference():
    fed = federation()
    out = run("favas", fed, mode="stochastic")
    ref = Reference(fed)
    w = fed.init.clone()
    starts = {c: w.clone() for c in range(N)}
    batches = {c: ref.streams.take(c, K) for c in range(N)}
    p_pos = {c: 1 - sum(S / N * (1 - S / N) ** (g - 1) * math.exp(-g * RUN["server_interval"] /
                                                              fed.profile.step_time(c).mean) for g in range(1, 4000))
             for c in range(N)}
    for group in server_steps(out["schedule"].contacts):
        sent = []
        for c in group:
            local = ref.train(starts[c.client], batches[c.client], c.steps, LR)
            a = p_pos[c.client] * c.steps
            sent.append(starts[c.client] + (local - starts[c.client]) / a if a > 0 else starts[c.client])
        w = (w + sum(sent)) / (S + 1)
        for c in group:
            starts[c.client], batches[c.client] = w.clone(), ref.streams.take(c.client, K)
    torch.testing.assert_close(out["model"], w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("staleness", ["none", "sqrt"])
def test_fedbuff_matches_reference(staleness):
    fed = federation()
    out = run("fedbuff", fed, staleness=staleness, server_lr=0.7)
    ref = Reference(fed)
    w = fed.init.clone()
    job = {c: (w.clone(), ref.streams.take(c, K)) for c in range(N)}
    weight = (lambda tau: 1.0) if staleness == "none" else (lambda tau: 1 / math.sqrt(1 + tau))
    for group in server_steps(out["schedule"].contacts):
        assert len(group) == RUN["Z"]
        update = sum(weight(c.staleness) * (job[c.client][0] - ref.train(*job[c.client], K, LR)) for c in group)
        w = w - 0.7 * update / len(group)
        for c in group:
            job[c.client] = (w.clone(), ref.streams.take(c.client, K))
    torch.testing.assert_close(out["model"], w, rtol=1e-4, atol=1e-5)


def test_fedavg_matches_reference():
    fed = federation("iid")
    out = run("fedavg", fed)
    ref = Reference(fed)
    w = fed.init.clone()
    for group in server_steps(out["schedule"].contacts):
        assert len(group) == S and all(c.steps == K for c in group)
        w = torch.stack([ref.train(w, ref.streams.take(c.client, K), K, LR) for c in group]).mean(0)
    torch.testing.assert_close(out["model"], w, rtol=1e-4, atol=1e-5)


def test_fedavg_round_lasts_slowest_client_plus_server_time():
    out = run("fedavg", federation("iid"))
    times = [g[0].time for g in server_steps(out["schedule"].contacts)]
    timeline = out["schedule"].timeline
    prev = 0.0
    for t, group in zip(times, server_steps(out["schedule"].contacts)):
        ends = [iv.end for c in group for iv in timeline.for_client(c.client)
                if iv.label == "train" and prev <= iv.start and iv.end <= t]
        assert t == pytest.approx(max(ends) + RUN["server_time"])
        prev = t


def test_history_grid_and_counters_are_consistent():
    out = run("favas", federation())
    curve = out["curve"]
    assert curve["time"] == [0.0, 20.0, 40.0, 60.0]
    assert curve["accuracy"][0] == pytest.approx(float(federation().engine.evaluate(federation().init)["accuracy"]))
    assert np.all(np.diff(curve["client_steps"]) >= 0) and np.all(np.diff(curve["bytes_up"]) >= 0)
    assert out["bytes_up"] == out["bytes_down"] == out["server_steps"] * S * federation().model_bytes
    assert out["computed_client_steps"] >= out["client_steps"] == sum(c.steps for c in out["schedule"].contacts)
    assert out["final_accuracy"] == curve["accuracy"][-1]


def test_same_seed_same_numbers_and_variance_tracking():
    a = run("favas", federation(), track_variance=True)
    b = run("favas", federation(), track_variance=True)
    assert a["curve"]["accuracy"] == b["curve"]["accuracy"] and a["curve"]["variance"] == b["curve"]["variance"]
    variance = a["curve"]["variance"]
    assert variance[0] == 0.0 and max(variance) > 0               # all clients start at the server model


@pytest.mark.parametrize("kw, name", [
    (dict(s=N + 1), "s"), (dict(K=0), "K"), (dict(lr=-1.0), "lr"), (dict(mode="random"), "mode"),
    (dict(total_time=0.0), "total_time"), (dict(eval_every=-1.0), "eval_every"),
])
def test_bad_hyperparameters_name_the_parameter(kw, name):
    with pytest.raises(ParameterError, match=name):
        run_algorithm("favas", federation(), **{**RUN, **kw})


def test_unknown_algorithm_and_fedbuff_bad_buffer():
    with pytest.raises(ParameterError, match="algorithm"):
        run_algorithm("fedasync", federation(), **RUN)
    with pytest.raises(ParameterError, match="Z"):
        run_algorithm("fedbuff", federation(), **{**RUN, "Z": N + 1})
