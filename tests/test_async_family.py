"""FedAsync, CA2FL and FADAS against their update rules written out, on the tiny seeded federation.

Each reference replays the simulator's contacts (who delivered when, having started when), trains every client
with ``torch.optim.SGD`` from the server model of its start time, and applies the paper's server rule by hand
in float64; the fast path must end at the same server model.
"""
import math

import pytest
import torch

from afl.algorithms import run_algorithm
from afl.algorithms.fedbuff import staleness_weight
from afl.errors import ParameterError
from afl.fleet import run_fleet
from reference import K, LR, RUN, TIME, Reference, federation, server_steps

TOL = dict(rtol=1e-9, atol=1e-10)


def run(name, fed, **kw):
    out = run_algorithm(name, fed, **TIME, **{**RUN[name], **kw})
    assert len(server_steps(out["schedule"].contacts)) >= 3
    return out


class Replay:
    """The server models by time and every start's batches, replayed from a run's schedule."""

    def __init__(self, fed, out, rho=0.0):
        self.ref, self.rho = Reference(fed), rho
        self.models = {0.0: fed.init.clone()}
        self.batches = {}
        for started, client in sorted({(c.started, c.client) for c in out["schedule"].contacts}):
            self.batches[(client, started)] = self.ref.streams.take(client, K)
        self.groups = server_steps(out["schedule"].contacts)

    def start(self, c):
        return self.models[max(u for u in self.models if u <= c.started)]

    def update(self, c):
        """Delta = w_start - w_end of contact ``c``."""
        start = self.start(c)
        return start - self.ref.train(start, self.batches[(c.client, c.started)], K, LR, rho=self.rho)

    def stepped(self, group, w):
        self.models[group[0].time] = w.clone()


@pytest.mark.parametrize("mixing, concurrency, rho", [
    ("constant", None, 0.0), ("poly", 3, 0.0), ("hinge:2:0", None, 0.3), ("hinge", 4, 0.0)])
def test_fedasync_matches_its_mixing_rule(mixing, concurrency, rho):
    """x <- (1 - alpha s(tau)) x + alpha s(tau) x_new per arrival, x_new trained on f + rho/2 ||z - x_tau||^2."""
    fed = federation()
    out = run("fedasync", fed, alpha=0.7, mixing=mixing, concurrency=concurrency, rho=rho)
    replay = Replay(fed, out, rho)
    s = {"constant": lambda t: 1.0, "poly": lambda t: (t + 1) ** -0.5,
         "hinge:2:0": lambda t: 1.0 if t == 0 else 1 / (2 * t + 1),
         "hinge": lambda t: 1.0 if t <= 4 else 1 / (10 * (t - 4) + 1)}[mixing]
    w, weights = fed.init.clone(), []
    for group in replay.groups:
        (c,) = group
        x_new = replay.start(c) - replay.update(c)
        a = 0.7 * s(c.staleness)
        w = (1 - a) * w + a * x_new
        weights.append(a)
        replay.stepped(group, w)
    torch.testing.assert_close(out["model"], w, **TOL)
    if mixing != "constant":
        assert min(weights) < 0.7                      # a stale arrival was damped
    assert out["uploads"] == len(replay.groups)


def test_fedasync_staleness_functions_are_the_papers():
    assert [staleness_weight("poly:0.5")(t) for t in (0, 3, 8)] == pytest.approx([1, 0.5, 1 / 3])
    hinge = staleness_weight("hinge:10:4")
    assert [hinge(t) for t in (0, 4, 5, 7)] == pytest.approx([1, 1, 1 / 11, 1 / 31])
    assert staleness_weight("constant")(100) == 1.0
    # one parser for every buffered method: FedBuff's 1/sqrt(1 + tau) is FedAsync's poly:0.5, and FedBuff takes the
    # families too; a bad spec names the parameter it came from
    assert [staleness_weight("sqrt")(t) for t in range(9)] == pytest.approx(
        [staleness_weight("poly")(t) for t in range(9)], rel=1e-15)
    fed = federation()
    paper, family = (run_algorithm("fedbuff", fed, **TIME, **{**RUN["fedbuff"], "staleness": w})["model"]
                     for w in ("sqrt", "poly:0.5"))
    torch.testing.assert_close(paper, family, **TOL)
    for parameter, algorithm in (("staleness", "fedbuff"), ("mixing", "fedasync")):
        with pytest.raises(ParameterError, match=parameter):
            run_algorithm(algorithm, fed, **TIME, **{**RUN[algorithm], parameter: "hinge:10"})


@pytest.mark.parametrize("concurrency", [None, 3])
def test_ca2fl_calibrates_with_cached_updates(concurrency):
    """v = mean of all N cached h + mean over the buffer of (Delta_i - h_i); x <- x - eta v; h_i <- Delta_i.
    Caches start at zero: a client's first update enters whole."""
    fed = federation()
    out = run("ca2fl", fed, server_lr=0.8, concurrency=concurrency)
    replay = Replay(fed, out)
    cache = torch.zeros(fed.n, fed.init.numel(), dtype=fed.init.dtype)
    w, repeat = fed.init.clone(), 0
    for group in replay.groups:
        deltas = {c.client: replay.update(c) for c in group}
        v = cache.mean(0) + sum(deltas[i] - cache[i] for i in deltas) / len(deltas)
        w = w - 0.8 * v
        repeat += sum(bool(cache[i].any()) for i in deltas)
        for i, d in deltas.items():
            cache[i] = d
        replay.stepped(group, w)
    torch.testing.assert_close(out["model"], w, **TOL)
    assert repeat > 0                                  # some clients came back: their cache was used


def test_ca2fl_first_step_is_fedbuffs():
    """With every cache at zero, CA2FL's first step is FedBuff's: the buffer's mean update."""
    a = run_algorithm("ca2fl", federation(), total_time=4.0, eval_every=4.0, **RUN["ca2fl"])
    b = run_algorithm("fedbuff", federation(), total_time=4.0, eval_every=4.0, **RUN["fedbuff"])
    assert a["server_steps"] == b["server_steps"] == 1
    torch.testing.assert_close(a["model"], b["model"], **TOL)


@pytest.mark.parametrize("form, eta, tau_c", [("paper", 0.5, 0), ("code", 0.05, 1), ("paper", 0.05, None)])
def test_fadas_matches_amsgrad_with_its_delay_rule(form, eta, tau_c):
    """AMSGrad on the buffer's mean update; eta_t = min(eta, 1/tau_max) (text) or eta/tau_max (code) once the
    buffer's largest staleness exceeds tau_c; the code also bias-corrects both moments."""
    fed = federation()
    out = run("fadas", fed, server_lr=eta, tau_c=tau_c, form=form, beta1=0.8, beta2=0.95, eps=1e-6)
    replay = Replay(fed, out)
    w = fed.init.clone()
    m, v, v_max = (torch.zeros_like(w) for _ in range(3))
    switched = 0
    for t, group in enumerate(replay.groups, start=1):
        d = sum(replay.update(c) for c in group) / len(group)
        m = 0.8 * m + 0.2 * d
        v = 0.95 * v + 0.05 * d * d
        v_max = torch.maximum(v_max, v)
        tau_max = max(c.staleness for c in group)
        rate = eta
        if tau_c is not None and tau_max > tau_c:
            rate = eta / tau_max if form == "code" else min(eta, 1 / tau_max)
            switched += rate < eta
        if form == "code":
            w = w - rate / (1 - 0.8 ** t) * m / (v_max.sqrt() / math.sqrt(1 - 0.95 ** t) + 1e-6)
        else:
            w = w - rate * m / (v_max.sqrt() + 1e-6)
        replay.stepped(group, w)
    torch.testing.assert_close(out["model"], w, **TOL)
    assert (switched > 0) == (tau_c is not None)       # the delay rule cut the rate where it was on


def test_the_async_family_in_a_fleet_equals_one_by_one():
    runs = [(name, seed) for name in ("fedasync", "ca2fl", "fadas") for seed in (0, 1)]

    def simulate(name, seed):
        out = run_algorithm(name, federation(seed=seed), **TIME, **RUN[name])
        return out["curve"]["accuracy"], out["model"]
    alone = {r: simulate(*r) for r in runs}
    outcomes = run_fleet([(r, lambda r=r: simulate(*r)) for r in runs])
    assert all(o.ok for o in outcomes)
    for o in outcomes:
        assert o.value[0] == pytest.approx(alone[o.key][0], rel=1e-9)
        torch.testing.assert_close(o.value[1], alone[o.key][1], **TOL)


@pytest.mark.parametrize("name, kw, param", [
    ("fedasync", dict(Z=2), "Z"), ("fedasync", dict(alpha=0.0), "alpha"), ("fedasync", dict(alpha=1.5), "alpha"),
    ("fedasync", dict(mixing="poly:-1"), "mixing"), ("fedasync", dict(mixing="linear"), "mixing"),
    ("fedasync", dict(rho=-0.1), "rho"), ("ca2fl", dict(server_lr=0.0), "server_lr"),
    ("fadas", dict(beta1=1.0), "beta1"), ("fadas", dict(eps=0.0), "eps"), ("fadas", dict(tau_c=-1), "tau_c"),
    ("fadas", dict(form="authors"), "form"), ("ca2fl", dict(staleness="sqrt"), "staleness")])
def test_bad_settings_name_the_parameter(name, kw, param):
    with pytest.raises(ParameterError) as e:
        run_algorithm(name, federation(), **TIME, **{**RUN[name], **kw})
    assert param in str(e.value)


def test_the_paired_table_pairs_by_seed_and_holds_partial_results():
    from afl.plots import style
    from afl.repro.favas import paired_markdown
    from afl.stats import t_quantile

    def runs(table):
        return [{"split": "iid", "method": m, "seed": s, "final_accuracy": a} for (m, s), a in table.items()]

    full = {("fedbuff", 0): 0.50, ("fedbuff", 1): 0.60, ("fedbuff", 2): 0.70,
            ("fadas", 0): 0.55, ("fadas", 1): 0.62, ("fadas", 2): 0.80}
    diffs = [5.0, 2.0, 10.0]
    mean, sd = sum(diffs) / 3, math.sqrt(sum((d - sum(diffs) / 3) ** 2 for d in diffs) / 2)
    half = t_quantile(0.975, 2) * sd / math.sqrt(3)
    row = paired_markdown(runs(full)).splitlines()[-1]
    assert row == f"| {style('fadas')['label']} | {mean:+.1f} ({mean - half:+.1f} to {mean + half:+.1f}) |"
    partial = {k: v for k, v in full.items() if k != ("fadas", 2)}      # an interrupted run lacks seed 2 of FADAS
    assert paired_markdown(runs(partial)).splitlines()[-1].endswith(", 2 seeds |")
    alone = {k: v for k, v in full.items() if k[0] == "fadas"} | {("fedasync", 0): 0.4}
    assert paired_markdown(runs(alone) + [{"split": "iid", "method": "fedbuff", "seed": 9,
                                           "final_accuracy": 0.5}]).splitlines()[-1].endswith(" | – |")
