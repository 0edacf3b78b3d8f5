"""FedAvg, QuAFL, FedBuff and FAVAS against plain-loop references on a tiny seeded federation.

Each reference replays the simulator's contacts (who was taken when, with how many steps) and trains every
client with a fresh model copy and ``torch.optim.SGD``, aggregating with the update rules written out here
from the papers; the fast path (vectorized engine, lazy jobs) must end at the same server model.
"""
import dataclasses
import math

import numpy as np
import pytest
import torch

from afl.algorithms import REGISTRY, get, run_algorithm
from afl.algorithms.base import History
from afl.compress import make_quantizer
from afl.errors import ParameterError
from reference import K, LR, N, RUN, S, SEED, TIME, Reference, federation, server_steps

TOL = dict(rtol=1e-9, atol=1e-10)      # float64 on both sides


def expected_steps(mean, period, p, K, terms=4000):
    """E[E ^ K] under the server clock, written out: sum_g p(1-p)^(g-1) E[min(Poisson(g period / mean), K)]."""
    total = 0.0
    for g in range(1, terms):
        lam = g * period / mean
        pmf = [math.exp(-lam) * lam ** e / math.factorial(e) for e in range(K)]
        total += p * (1 - p) ** (g - 1) * (sum(e * q for e, q in enumerate(pmf)) + K * (1 - sum(pmf)))
    return total


def run(name, fed, **kw):
    out = run_algorithm(name, fed, **TIME, **{**RUN[name], **kw})
    assert out["server_steps"] >= 3                      # the schedule really ran several server steps
    return out


@pytest.mark.parametrize("name, reweighting, mixing", [
    ("favas", "literal", False), ("favas", "normalized", False), ("quafl", None, True),
    ("favas", "none", False), ("favas", "literal", True)])          # the last two: FAVAS's ablations
def test_server_clock_methods_match_reference(name, reweighting, mixing):
    fed = federation()
    out = run(name, fed, **({"reweighting": reweighting, "client_mixing": mixing} if name == "favas" else {}))
    ref = Reference(fed)
    w0 = fed.init.clone()
    starts = {c: w0.clone() for c in range(N)}
    batches = {c: ref.streams.take(c, K) for c in range(N)}
    alpha = {c: expected_steps(fed.profile.step_time(c).mean, RUN[name]["server_interval"], S / N, K) for c in range(N)}
    alpha_bar = sum(alpha.values()) / N if reweighting == "normalized" else 1.0
    lr = LR * (S + 1) / S if name == "quafl" else LR
    w = w0.clone()
    for group in server_steps(out["schedule"].contacts):
        sent, new_start = [], {}
        for c in group:
            local = ref.train(starts[c.client], batches[c.client], c.steps, lr)
            if name == "favas" and reweighting != "none":                 # Alg. 1, l. 24
                sent.append(starts[c.client] + (local - starts[c.client]) * alpha_bar / alpha[c.client])
            else:
                sent.append(local)
            new_start[c.client] = (w + S * local) / (S + 1)              # QuAFL client-side mixing
        w_new = (w + sum(sent)) / (S + 1)
        for c in group:
            starts[c.client] = new_start[c.client] if mixing else w_new.clone()
            batches[c.client] = ref.streams.take(c.client, K)
        w = w_new
    torch.testing.assert_close(out["model"], w, **TOL)
    assert not torch.allclose(w, w0)


def test_favas_stochastic_reweighting_matches_reference():
    fed = federation()
    out = run("favas", fed, mode="stochastic")
    ref = Reference(fed)
    w = fed.init.clone()
    starts = {c: w.clone() for c in range(N)}
    batches = {c: ref.streams.take(c, K) for c in range(N)}
    p_pos = {c: 1 - sum(S / N * (1 - S / N) ** (g - 1) * math.exp(-g * RUN["favas"]["server_interval"] /
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
    torch.testing.assert_close(out["model"], w, **TOL)


@pytest.mark.parametrize("staleness, concurrency, arrivals", [
    ("none", None, {}), ("sqrt", None, {}), ("none", 3, {}), ("sqrt", 4, {}),
    ("sqrt", None, dict(arrival_rate=0.8, server_time=0.0)),
    ("none", 3, dict(arrival_rate=2.0, arrivals="poisson", server_time=0.0))])
def test_fedbuff_matches_reference(staleness, concurrency, arrivals):
    """Every contact trains K steps from the server model of its start time (a client's first start at 0, after a
    server step, or at its arrival; the schedule says when), and the server applies the weighted buffer."""
    fed = federation()
    out = run("fedbuff", fed, staleness=staleness, server_lr=0.7, concurrency=concurrency, **arrivals)
    ref = Reference(fed)
    w = fed.init.clone()
    models = {0.0: w.clone()}                        # the server model after each server step, by time

    def model_at(t):
        return models[max(u for u in models if u <= t)]
    weight = (lambda tau: 1.0) if staleness == "none" else (lambda tau: 1 / math.sqrt(1 + tau))
    groups = server_steps(out["schedule"].contacts)
    starts = sorted({(c.started, c.client) for c in out["schedule"].contacts})
    batches = {}
    for started, client in starts:                   # each client's streams are drawn in start order
        batches[(client, started)] = ref.streams.take(client, K)
    for group in groups:
        assert len(group) == RUN["fedbuff"]["Z"]
        update = sum(weight(c.staleness) * (model_at(c.started) - ref.train(model_at(c.started),
                                                                           batches[(c.client, c.started)], K, LR))
                     for c in group)
        w = w - 0.7 * update / len(group)
        models[group[0].time] = w.clone()
    torch.testing.assert_close(out["model"], w, **TOL)
    if not arrivals:
        in_flight = {c.client for c in out["schedule"].contacts if c.started == 0.0}
        assert len(in_flight) == (N if concurrency is None else concurrency)
    else:
        assert out["schedule"].kind == "arrivals" and len(groups) >= 3


@pytest.mark.parametrize("hidden_state", [True, False])
def test_qafel_matches_reference(hidden_state):
    """QAFeL Algorithms 1-3 written out: clients start from the hidden state, uploads pass Q_c, the server sums
    the staleness-weighted buffer and steps with momentum, then broadcasts Q_s(x - x_hat) into x_hat (or, the
    ablation, Q_s(x) itself)."""
    fed = federation()
    settings = dict(client_quantizer="qsgd:4", server_quantizer="qsgd:3", hidden_state=hidden_state, server_lr=0.7,
                    server_momentum=0.3, reducer="sum", staleness="sqrt", concurrency=4)
    out = run("qafel", fed, **settings)
    ref = Reference(fed)
    q_c, q_s = make_quantizer("qsgd:4", seed=2 * SEED), make_quantizer("qsgd:3", seed=2 * SEED + 1)
    w, velocity = fed.init.clone(), torch.zeros_like(fed.init)
    hidden = {0.0: w.clone()}                       # the hidden state clients start from, by start time
    upload_error = buffer_error = broadcast_error = hidden_gap = hidden_lag = 0.0   # the channels' errors, summed
    batches = {}
    for started, client in sorted({(c.started, c.client) for c in out["schedule"].contacts}):
        batches[(client, started)] = ref.streams.take(client, K)
    for group in server_steps(out["schedule"].contacts):
        deltas = torch.stack([hidden[c.started] - ref.train(hidden[c.started], batches[(c.client, c.started)], K, LR)
                              for c in group])
        received = q_c.roundtrip(deltas).double()
        upload_error += float(sum((r - d).square().sum() / d.square().sum() for r, d in zip(received, deltas)))
        buffer_error += float((received - deltas).sum(0).square().sum() / deltas.sum(0).square().sum())
        g = sum(received[i] / math.sqrt(1 + c.staleness) for i, c in enumerate(group))
        velocity = 0.3 * velocity + g
        previous, w = w, w - 0.7 * velocity
        last = hidden[max(hidden)]
        sent = w - last if hidden_state else w
        decoded = q_s.roundtrip(sent).double()
        hidden[group[0].time] = last + decoded if hidden_state else decoded
        broadcast_error += float((decoded - sent).square().sum() / sent.square().sum())
        gap, step = w - hidden[group[0].time], w - previous
        hidden_gap += float(gap.square().sum() / step.square().sum())
        hidden_lag += float((gap * step).sum() / step.square().sum())
    torch.testing.assert_close(out["model"], w, **TOL)
    steps = len(server_steps(out["schedule"].contacts))
    d = fed.init.numel()
    assert out["broadcasts"] == steps and out["bytes_down"] == steps * q_s.nbytes(d)
    assert out["bytes_up"] == steps * 2 * q_c.nbytes(d)
    assert out["upload_error"] == pytest.approx(upload_error, rel=1e-9) and upload_error > 0
    assert out["buffer_error"] == pytest.approx(buffer_error, rel=1e-9) and buffer_error > 0
    assert out["broadcast_error"] == pytest.approx(broadcast_error, rel=1e-9) and broadcast_error > 0
    assert out["hidden_gap"] == pytest.approx(hidden_gap, rel=1e-9) and hidden_gap > 0
    assert out["hidden_lag"] == pytest.approx(hidden_lag, rel=1e-9, abs=1e-12) and hidden_lag ** 2 <= hidden_gap * steps


def test_qafel_with_exact_quantizers_is_fedbuff():
    fed_a, fed_b = federation(), federation()
    a = run("qafel", fed_a, client_quantizer="identity", server_quantizer="identity", concurrency=4)
    b = run("fedbuff", fed_b, concurrency=4)
    torch.testing.assert_close(a["model"], b["model"], **TOL)
    assert a["upload_error"] == a["buffer_error"] == a["broadcast_error"] == a["hidden_gap"] == a["hidden_lag"] == 0
    assert "upload_error" not in b


def test_fedavg_matches_reference():
    fed = federation("iid")
    out = run("fedavg", fed)
    ref = Reference(fed)
    w = fed.init.clone()
    for group in server_steps(out["schedule"].contacts):
        assert len(group) == S and all(c.steps == K for c in group)
        w = torch.stack([ref.train(w, ref.streams.take(c.client, K), K, LR) for c in group]).mean(0)
    torch.testing.assert_close(out["model"], w, **TOL)


def test_fedavg_round_lasts_slowest_client_plus_server_time():
    out = run("fedavg", federation("iid"))
    times = [g[0].time for g in server_steps(out["schedule"].contacts)]
    timeline = out["schedule"].timeline
    prev = 0.0
    for t, group in zip(times, server_steps(out["schedule"].contacts)):
        ends = [iv.end for c in group for iv in timeline.for_client(c.client)
                if iv.label == "train" and prev <= iv.start and iv.end <= t]
        assert t == pytest.approx(max(ends) + RUN["fedavg"]["server_time"])
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


def test_pending_lists_the_grid_times_a_record_fills_and_moves_nothing():
    h = History(None, eval_every=10.0, total_time=35.0)
    assert h.pending(25.0) == h.pending(25.0) == [0.0, 10.0, 20.0] and h.next_eval == 0.0
    assert h.pending(20.0) == [0.0, 10.0]                     # a grid point at ``now`` waits for the step there
    assert h.pending(20.0, inclusive=True) == [0.0, 10.0, 20.0]
    assert h.pending(100.0) == [0.0, 10.0, 20.0, 30.0]        # past the end: every point within total_time
    assert h.pending(0.0) == [] and h.pending(0.0, inclusive=True) == [0.0]


def test_variance_tracking():
    variance = run("favas", federation(), track_variance=True)["curve"]["variance"]
    assert variance[0] == 0.0 and max(variance) > 0               # all clients start at the server model


@pytest.mark.parametrize("name", sorted(RUN))
def test_same_seed_same_numbers_bit_for_bit(name):
    """On one machine a seed fixes everything: the final model and every point of the curves, bit for bit,
    in float32 as the reproductions run (across CPUs rounding may differ, and chaotic runs amplify it)."""
    a, b = (run_algorithm(name, federation(dtype=torch.float32), **TIME, **RUN[name]) for _ in range(2))
    assert torch.equal(a["model"], b["model"]) and a["curve"] == b["curve"]
    c = run_algorithm(name, federation(dtype=torch.float32, seed=6), **TIME, **RUN[name])
    assert not torch.equal(a["model"], c["model"])


@pytest.mark.parametrize("name, kw, bad", [
    ("favas", dict(s=N + 1), "s"), ("favas", dict(K=0), "K"), ("favas", dict(lr=-1.0), "lr"),
    ("favas", dict(mode="random"), "mode"), ("favas", dict(reweighting="half"), "reweighting"),
    ("fedbuff", dict(Z=N + 1), "Z"), ("fedbuff", dict(concurrency=1), "concurrency"),
    ("fedbuff", dict(concurrency=N + 1), "concurrency"), ("fedbuff", dict(staleness="exp"), "staleness"),
    ("fedbuff", dict(server_momentum=1.0), "server_momentum"), ("fedbuff", dict(reducer="max"), "reducer"),
    ("fedbuff", dict(arrival_rate=1.0), "server_time"), ("fedbuff", dict(arrival_rate=-1.0), "arrival_rate"),
    ("fedbuff", dict(arrivals="burst"), "arrivals"),
    ("qafel", dict(client_quantizer="qsgd:1"), "bits"), ("qafel", dict(server_quantizer="zip"), "quantizer"),
    ("qafel", dict(server_quantizer="scalar:9"), "bits"),
    ("fedavg", dict(s=0), "s"), ("quafl", dict(quantizer="fp8"), "quantizer"),
    ("quafl", dict(scale_interval_by_bits=True), "scale_interval_by_bits"),
])
def test_bad_settings_name_the_parameter(name, kw, bad):
    with pytest.raises(ParameterError, match=bad):
        run_algorithm(name, federation(), **TIME, **{**RUN[name], **kw})


@pytest.mark.parametrize("kw, name", [(dict(total_time=0.0), "total_time"), (dict(eval_every=-1.0), "eval_every")])
def test_bad_run_length_names_the_parameter(kw, name):
    with pytest.raises(ParameterError, match=name):
        run_algorithm("favas", federation(), **{**TIME, **kw}, **RUN["favas"])


def test_registry_and_misplaced_settings():
    assert set(REGISTRY) == {"fedavg", "quafl", "fedbuff", "favas", "qafel", "fedavgm", "fedprox", "scaffold",
                             "scaffold-m", "feddyn", "adabest", "mime", "mimemom", "mimelitemom", "fedcm", "fedadc",
                             "ghbm", "ghbm-server", "localghbm", "fedhbm", "fedasync", "ca2fl", "fadas"}
    with pytest.raises(ParameterError, match="algorithm"):
        run_algorithm("fedasgd", federation(), **TIME)
    with pytest.raises(ParameterError) as err:                   # s belongs to other algorithms, not FedBuff
        run_algorithm("fedbuff", federation(), **TIME, s=2)
    msg = str(err.value)
    assert "a setting of 'fedbuff'" in msg and "concurrency" in msg
    assert all(name in msg.split("'s' is a setting of ")[1] for name in ("fedavg", "favas", "quafl", "ghbm"))
    with pytest.raises(ParameterError, match="no_such_knob"):
        run_algorithm("favas", federation(), **TIME, no_such_knob=1)
    cfg = get("favas").make_settings()                           # the paper's defaults
    assert (cfg.K, cfg.lr, cfg.s, cfg.server_interval, cfg.mode, cfg.reweighting) == (20, 0.5, 20, 10.0,
                                                                                        "deterministic", "literal")
    assert get("fedbuff").make_settings().concurrency is None and get("fedbuff").make_settings().Z == 10


def test_client_state_store():
    from afl.algorithms import ClientState
    w = torch.arange(3.0)
    store = ClientState(4, w)
    table = store.table("start", w)
    assert table.shape == (4, 3) and torch.equal(table[2], w) and "start" in store
    table[1] += 1
    assert torch.equal(store["start"][1], w + 1) and store.table("start", 0.0) is table    # created once
    assert torch.equal(store.table("c"), torch.zeros(4, 3))
    with pytest.raises(ParameterError, match="name"):
        store["missing"]


@pytest.mark.parametrize("name, kw, field", [("favas", dict(total_time=1e300, eval_every=1e299), "total_time"),
                                             ("favas", dict(total_time=100.0, eval_every=1e-9), "eval_every"),
                                             ("fedavg", dict(total_time=1e12, eval_every=1e11), "total_time")])
def test_a_run_above_the_work_limits_is_refused_unless_allowed(name, kw, field, monkeypatch):
    with pytest.raises(ParameterError, match=f"{field}=.*allow_large=True"):
        run_algorithm(name, federation(), **kw, **RUN[name])
    class WouldRun(Exception):
        pass

    def protocol(*args, **kwargs):
        raise WouldRun
    monkeypatch.setitem(REGISTRY, name, dataclasses.replace(get(name), protocol=protocol))
    with pytest.raises(WouldRun):                       # allowed: it starts computing
        run_algorithm(name, federation(), **kw, **RUN[name], allow_large=True)


def test_the_work_estimate_of_a_run():
    from afl.algorithms import run_work
    fed = federation()                                  # N clients, half slow: mean step times 2 and 8
    favas = run_work(get("favas"), get("favas").make_settings(**RUN["favas"]), fed, 100.0, 10.0)
    assert favas.client_steps == pytest.approx(100.0 * N * (0.5 / 2 + 0.5 / 8)) and favas.evaluations == 11
    fedavg = run_work(get("fedavg"), get("fedavg").make_settings(**RUN["fedavg"], timing="rounds"), fed, 7.5, 2.0)
    cfg = get("fedavg").make_settings(**RUN["fedavg"])
    assert fedavg.client_steps == 8 * cfg.s * cfg.K and fedavg.evaluations == 4


def test_staleness_weights_the_paper_and_flsim():
    """FedBuff's 1/sqrt(1 + tau), and FLSim's the same over its value at tau = 1 (QAFeL's code)."""
    from afl.algorithms.fedbuff import STALENESS
    for tau, paper, flsim in ((0, 1.0, math.sqrt(2)), (1, 1 / math.sqrt(2), 1.0), (8, 1 / 3, math.sqrt(2) / 3)):
        assert STALENESS["sqrt"](tau) == pytest.approx(paper) and STALENESS["sqrt-flsim"](tau) == pytest.approx(flsim)
    assert STALENESS["none"](8) == 1.0


@pytest.mark.parametrize("name", ["favas", "fedavg", "fedbuff", "qafel"])
def test_runs_on_one_federation_start_from_its_seed(name):
    """A federation is not used up by a run: a second run on it, alone or after another method, draws the same
    mini-batches as a run on a fresh one (before, it went on with the streams the first run had left)."""
    fed = federation()
    first = run_algorithm(name, fed, **TIME, **RUN[name])["model"]
    run_algorithm("fedasync", fed, **TIME, **RUN["fedasync"])
    again = run_algorithm(name, fed, **TIME, **RUN[name])["model"]
    fresh = run_algorithm(name, federation(), **TIME, **RUN[name])["model"]
    assert torch.equal(first, again) and torch.equal(first, fresh)
