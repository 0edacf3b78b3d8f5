"""Tests of afl.sim: distributions, step counts, speed profiles, arrivals, clock, timeline, schedules, plots."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from afl.errors import ParameterError  # noqa: E402
from afl.sim import (  # noqa: E402
    ClientClock, Constant, ConstantRate, EventQueue, Exponential, FCFSQueues, HalfNormal, LogNormal, PoissonArrivals,
    ShiftedExponential, SpeedProfile, Timeline, class_counts, contact_steps_pmf, make_arrivals, make_distribution,
    plot_class_shares, plot_steps_histogram, plot_timeline, rate_for_concurrency, simulate_async_schedule,
    simulate_arrival_schedule, simulate_buffered_schedule, simulate_sync_schedule, steps_completed_pmf, three_speed,
    truncated_steps_stats,
    two_speed)
from afl.sim.demo import compute_straggler_demo, plot_straggler_demo  # noqa: E402

DISTS = [Exponential(2.0), ShiftedExponential(0.5, 1.5), HalfNormal(1.3), Constant(0.7), LogNormal(0.2, 0.6)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ---------------------------------------------------------------- distributions

@pytest.mark.parametrize("dist", DISTS, ids=repr)
def test_mean_by_monte_carlo(dist):
    x = dist.sample(np.random.default_rng(0), 200_000)
    assert x.shape == (200_000,) and np.all(x >= 0)
    se = x.std() / math.sqrt(len(x))
    assert abs(x.mean() - dist.mean) <= 5 * se + 1e-12


@pytest.mark.parametrize("dist", DISTS, ids=repr)
def test_cdf_matches_empirical(dist):
    x = dist.sample(np.random.default_rng(1), 100_000)
    t = np.array([0.3, 0.8, 1.5, 3.0, 6.0])
    f = dist.cdf(t)
    assert f.shape == t.shape and np.all(np.diff(f) >= 0)
    emp = (x[:, None] <= t).mean(axis=0)
    assert np.all(np.abs(emp - f) <= 5 * np.sqrt(f * (1 - f) / len(x)) + 1e-12)


def test_cdf_closed_forms():
    assert Exponential(2).cdf(2.0) == pytest.approx(1 - math.exp(-1))
    assert isinstance(Exponential(2).cdf(2.0), float)
    assert HalfNormal(1).cdf(1.0) == pytest.approx(0.6826894921370859)
    assert LogNormal(0.0, 1.0).cdf(1.0) == pytest.approx(0.5)
    fedast = ShiftedExponential.fedast(0.5)  # P(X <= x) = 1 - exp(-(x - b) / (2 b))
    assert (fedast.shift, fedast.exp_mean, fedast.mean) == (0.5, 1.0, 1.5)
    assert fedast.cdf(0.4) == 0.0 and fedast.cdf(1.5) == pytest.approx(1 - math.exp(-1))
    assert Constant(2).cdf(1.999) == 0.0 and Constant(2).cdf(2.0) == 1.0
    for d in DISTS:
        assert d.cdf(-1.0) == 0.0


@pytest.mark.parametrize("dist", DISTS, ids=repr)
def test_scaled_multiplies_the_random_time(dist):
    big = dist.scaled(3.0)
    assert type(big) is type(dist) and big.mean == pytest.approx(3.0 * dist.mean)
    a = big.sample(np.random.default_rng(7), 50)
    b = 3.0 * dist.sample(np.random.default_rng(7), 50)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    with pytest.raises(ParameterError):
        dist.scaled(0.0)


def test_sample_shapes_and_rng_checks():
    rng = np.random.default_rng(0)
    assert isinstance(Exponential(1).sample(rng), float)
    assert Constant(1).sample(rng, (2, 3)).shape == (2, 3)
    with pytest.raises(ParameterError):
        Exponential(1).sample(123)
    assert Exponential(2) == Exponential(2.0) and Exponential(2) != Exponential(3) and Exponential(2) != Constant(2)
    with pytest.raises(AttributeError):
        Exponential(2).scale = 5


def test_make_distribution_and_errors():
    assert make_distribution("exponential", mean=2) == Exponential(2)
    assert make_distribution("shifted_exponential", shift=1, mean=2) == ShiftedExponential(1, 2)
    assert make_distribution("half_normal", scale=1) == HalfNormal(1)
    assert make_distribution("constant", value=3) == Constant(3)
    assert make_distribution("lognormal", mu=0, sigma=1) == LogNormal(0, 1)
    for d in DISTS:
        assert make_distribution(d.kind, **d.params) == d
    bad = [dict(kind="weibull", shape=1), dict(kind="exponential", mean=0), dict(kind="exponential", mean=-2),
           dict(kind="half_normal", scale=-1), dict(kind="exponential", mean=float("nan")),
           dict(kind="exponential", mean=True), dict(kind="exponential", rate=1), dict(kind="lognormal", mu=0),
           dict(kind="shifted_exponential", shift=-1, mean=1), dict(kind="constant", value=0)]
    for kw in bad:
        with pytest.raises(ParameterError):
            make_distribution(**kw)


# ---------------------------------------------------------------- steps completed in a window

def _truncated_poisson(lam, K):
    p = [math.exp(-lam) * lam**k / math.factorial(k) for k in range(K)]
    return np.array(p + [1 - sum(p)])


def test_exponential_pmf_is_truncated_poisson():
    for mean, window, K in [(2.0, 7.0, 5), (8.0, 3.0, 20), (1.0, 0.0, 3)]:
        np.testing.assert_allclose(steps_completed_pmf(Exponential(mean), window, K),
                                   _truncated_poisson(window / mean, K), atol=1e-12)


@pytest.mark.parametrize("dist", [Exponential(2.0), ShiftedExponential(0.5, 1.5), Constant(0.7)], ids=repr)
def test_exact_pmf_agrees_with_monte_carlo(dist):
    exact = steps_completed_pmf(dist, 6.0, 6, method="exact")
    mc = steps_completed_pmf(dist, 6.0, 6, n_mc=100_000, rng=3, method="mc")
    assert exact.sum() == pytest.approx(1.0) and mc.sum() == pytest.approx(1.0)
    assert np.max(np.abs(exact - mc)) < 0.01


def test_constant_pmf_counts_floor():
    pmf = steps_completed_pmf(Constant(0.7), 2.2, 5)
    assert np.argmax(pmf) == 3 and pmf[3] == 1.0
    assert steps_completed_pmf(Constant(0.5), 10.0, 5)[5] == 1.0  # capped at K


@pytest.mark.parametrize("dist", [HalfNormal(1.3), LogNormal(0.2, 0.6)], ids=repr)
def test_monte_carlo_pmf_first_step_is_the_cdf(dist):
    # P(E >= 1) = P(X_1 <= window) for any family: an oracle for the Monte Carlo path
    n_mc = 50_000
    for window in (0.5, 1.5, 3.0):
        pmf = steps_completed_pmf(dist, window, 4, n_mc=n_mc, rng=2)
        f = dist.cdf(window)
        assert abs((1 - pmf[0]) - f) <= 5 * math.sqrt(f * (1 - f) / n_mc) + 1e-12


def test_monte_carlo_pmf_for_other_families():
    a = steps_completed_pmf(HalfNormal(1.0), 3.0, 8, rng=0)
    b = steps_completed_pmf(HalfNormal(1.0), 3.0, 8, rng=0)
    np.testing.assert_array_equal(a, b)
    assert a.sum() == pytest.approx(1.0)
    mean_short, _ = truncated_steps_stats(a)
    mean_long, _ = truncated_steps_stats(steps_completed_pmf(HalfNormal(1.0), 6.0, 8, rng=0))
    assert mean_long > mean_short
    with pytest.raises(ParameterError):
        steps_completed_pmf(HalfNormal(1.0), 3.0, 8, method="exact")
    with pytest.raises(ParameterError):
        steps_completed_pmf(HalfNormal(1.0), -1.0, 8)
    with pytest.raises(ParameterError):
        steps_completed_pmf(HalfNormal(1.0), 1.0, 0)


def test_truncated_steps_stats():
    mean, p_pos = truncated_steps_stats([0.2, 0.3, 0.5])
    assert mean == pytest.approx(1.3) and p_pos == pytest.approx(0.8)


def test_contact_pmf_with_every_client_contacted_is_one_window():
    np.testing.assert_allclose(contact_steps_pmf(Exponential(2), 4, n=5, s=5, server_interval=3.0),
                               steps_completed_pmf(Exponential(2), 3.0, 4), atol=1e-12)


def test_async_schedule_matches_exact_contact_pmf():
    profile = two_speed(20, slow_fraction=1 / 3, seed=0)
    result = simulate_async_schedule(profile, K=5, s=4, server_interval=2.0, t_end=4000.0, seed=1)
    for c, name in enumerate(profile.names):
        emp = result.steps_pmf(name)
        exact = contact_steps_pmf(profile.step_times[c], 5, 20, 4, 2.0)
        n_contacts = len(result.steps(name))
        assert n_contacts > 2000
        assert np.max(np.abs(emp - exact)) < 5 * 0.5 / math.sqrt(n_contacts)


# ---------------------------------------------------------------- speed profiles

def test_class_counts_are_exact():
    assert list(class_counts(30, (2 / 3, 1 / 3))) == [20, 10]
    assert list(class_counts(100, (2 / 3, 1 / 3))) == [67, 33]
    assert list(class_counts(10, (0.25, 0.5, 0.25))) == [3, 5, 2]  # tie on .5: earlier class first
    rng = np.random.default_rng(0)
    for _ in range(50):
        f = rng.dirichlet(np.ones(4))
        n = int(rng.integers(1, 200))
        counts = class_counts(n, f)
        assert counts.sum() == n and np.all(np.abs(counts - n * f) < 1)


def test_fractions_must_sum_to_one():
    with pytest.raises(ParameterError):
        class_counts(10, (0.5, 0.6))
    with pytest.raises(ParameterError):
        three_speed(12, fractions=(0.3, 0.3, 0.3))
    with pytest.raises(ParameterError):
        class_counts(10, (1.5, -0.5))
    with pytest.raises(ParameterError):
        two_speed(10, slow_fraction=1.2)


def test_two_speed_profile():
    p = two_speed(30, seed=4)
    assert p.n == 30 and p.counts() == {"fast": 20, "slow": 10}
    assert p.step_time(int(p.clients_of("slow")[0])) == Exponential(8)
    assert p.step_time(int(p.clients_of("fast")[0])) == Exponential(2)
    np.testing.assert_array_equal(p.class_of, two_speed(30, seed=4).class_of)
    assert not np.array_equal(p.class_of, two_speed(30, seed=5).class_of)
    assert sorted(np.concatenate([p.clients_of("fast"), p.clients_of("slow")])) == list(range(30))
    with pytest.raises(ParameterError):
        p.clients_of("medium")


def test_three_speed_costs_multiply():
    base = ShiftedExponential.fedast(1.0)
    p = three_speed(8, base=base, costs=(0.148, 2.071), seed=0)
    assert p.counts() == {"slow": 2, "normal": 4, "fast": 2}
    for i in range(p.n):
        mult = {"slow": 1.3, "normal": 1.0, "fast": 0.7}[p.class_name(i)]
        assert p.step_time(i, model=1).mean == pytest.approx(2.071 * mult * base.mean)
        assert p.mean_step_times(model=0)[i] == pytest.approx(0.148 * mult * base.mean)
    with pytest.raises(ParameterError):
        p.step_time(0, model=2)
    with pytest.raises(ParameterError):
        p.step_time(8)


def test_request_time_per_step_or_single_draw():
    p = SpeedProfile(("only",), [0, 0], [Exponential(2.0)])
    summed = p.request_time(np.random.default_rng(5), 1, 4)
    assert summed == pytest.approx(Exponential(2.0).sample(np.random.default_rng(5), 4).sum())
    single = p.request_time(np.random.default_rng(5), 1, 4, per_step=False)
    assert single == pytest.approx(4 * Exponential(2.0).sample(np.random.default_rng(5)))
    assert p.request_time(np.random.default_rng(5), 0, 0) == 0.0
    with pytest.raises(ParameterError):
        SpeedProfile(("a", "b"), [0, 2], [Exponential(1), Exponential(2)])


# ---------------------------------------------------------------- arrivals

def test_constant_rate_arrivals():
    times = ConstantRate(4.0).next_times(np.random.default_rng(0), 1.0, 3)
    np.testing.assert_allclose(times, [1.25, 1.5, 1.75])
    assert make_arrivals("constant", 4.0) == ConstantRate(4.0)


def test_poisson_arrivals():
    times = PoissonArrivals(5.0).next_times(np.random.default_rng(0), 2.0, 100_000)
    gaps = np.diff(np.concatenate([[2.0], times]))
    assert np.all(gaps > 0)
    assert abs(gaps.mean() - 0.2) <= 5 * gaps.std() / math.sqrt(len(gaps))
    np.testing.assert_array_equal(times[:10],
                                  PoissonArrivals(5.0).next_times(np.random.default_rng(0), 2.0, 100_000)[:10])


def test_rates_must_be_positive():
    for rate in (0, -1.0, float("inf")):
        with pytest.raises(ParameterError):
            ConstantRate(rate)
        with pytest.raises(ParameterError):
            PoissonArrivals(rate)
    with pytest.raises(ParameterError):
        make_arrivals("bursty", 1.0)


def test_rate_for_concurrency_reproduces_qafel():
    rates = [round(rate_for_concurrency(c, HalfNormal(1.0))) for c in (100, 500, 1000)]
    assert rates == [125, 627, 1253]  # QAFeL App. D


# ---------------------------------------------------------------- event queue

def test_event_queue_orders_by_time():
    q = EventQueue(seed=0)
    for t in [5.0, 1.0, 3.0, 2.0, 4.0]:
        q.push(t, "e", t=t)
    assert len(q) == 5 and q.peek().time == 1.0 and len(q) == 5
    assert [q.pop().time for _ in range(5)] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert q.now == 5.0 and len(q) == 0 and q.peek() is None
    with pytest.raises(IndexError):
        q.pop()


def test_event_queue_ties_and_priority():
    q = EventQueue()
    for name in "abc":
        q.push(1.0, name)
    q.push(1.0, "server", priority=1)
    q.push(1.0, "urgent", priority=-1)
    assert [q.pop().kind for _ in range(5)] == ["urgent", "a", "b", "c", "server"]


def test_event_queue_refuses_the_past_and_cancels():
    q = EventQueue()
    q.push(2.0, "x")
    e = q.push(3.0, "y", client=7)
    assert e["client"] == 7
    q.pop()
    with pytest.raises(ParameterError):
        q.push(1.0, "late")
    q.push(2.0, "now is fine")
    q.cancel(e)
    q.cancel(e)
    assert len(q) == 1 and q.pop().kind == "now is fine" and not q


def test_event_queue_is_deterministic():
    def run(seed):
        q = EventQueue(seed=seed)
        for i in range(20):
            q.push(float(q.rng.exponential(1.0)) + q.now, "e", i=i)
        return [(ev.time, ev["i"]) for ev in (q.pop() for _ in range(20))]

    assert run(3) == run(3) and run(3) != run(4)


def test_fcfs_queues():
    q = FCFSQueues(2)
    assert q.submit(0, 0.0, 3.0) == (0.0, 3.0)
    assert q.submit(0, 1.0, 2.0) == (3.0, 5.0)  # waits for the first request
    assert q.submit(0, 6.0, 1.0) == (6.0, 7.0)
    assert q.submit(1, 1.0, 1.0) == (1.0, 2.0)
    assert q.queue_length(0, 2.0) == 2 and q.queue_length(0, 5.5) == 0


# ---------------------------------------------------------------- timeline

def test_timeline_records():
    tl = Timeline({0: "fast", 1: "slow"})
    tl.add(0, 0.0, 2.0, "train", steps=3)
    tl.add(0, 2.0, 3.0, "idle")
    tl.add(1, 0.0, 3.0, "train", steps=1, task="mnist")
    tl.add(2, 1.0, 1.5, "upload")
    tl.server_step(3.0)
    tl.flush(3.0, [0, 1])
    assert tl.clients() == [0, 1, 2] and tl.class_of(1) == "slow" and tl.class_of(2) is None
    assert tl.total("train") == 5.0 and tl.total("train", client=0) == 2.0 and tl.steps_done() == 4
    assert [i.label for i in tl.for_client(0)] == ["train", "idle"]
    assert tl.server_steps == [3.0] and tl.flushes[0].clients == (0, 1) and tl.t_end == 3.0
    with pytest.raises(ParameterError):
        tl.add(0, 3.0, 2.0)


# ---------------------------------------------------------------- schedules

def _constant_profile(n, step):
    return SpeedProfile(("all",), [0] * n, [Constant(step)])


def test_async_schedule_by_hand():
    # steps end at 1.5, 3.0, (4.5 cut at 4.0): E = 2 and an interrupted step; with K = 2 the client idles instead
    r = simulate_async_schedule(_constant_profile(2, 1.5), K=3, s=2, server_interval=4.0, t_end=4.0)
    assert [c.steps for c in r.contacts] == [2, 2]
    assert [(i.start, i.end, i.label, i.steps) for i in r.timeline.for_client(0)] == [
        (0.0, 3.0, "train", 2), (3.0, 4.0, "interrupted", 0)]
    r = simulate_async_schedule(_constant_profile(2, 1.5), K=2, s=2, server_interval=4.0, t_end=4.0)
    assert [(i.start, i.end, i.label) for i in r.timeline.for_client(1)] == [(0.0, 3.0, "train"), (3.0, 4.0, "idle")]
    # a step ending exactly at the contact counts
    r = simulate_async_schedule(_constant_profile(1, 2.0), K=5, s=1, server_interval=4.0, t_end=8.0)
    assert [c.steps for c in r.contacts] == [2, 2] and [c.time for c in r.contacts] == [4.0, 8.0]


def test_async_schedule_invariants():
    p = two_speed(12, seed=2)
    r = simulate_async_schedule(p, K=6, s=3, server_interval=1.5, t_end=60.0, seed=3)
    assert r.server_steps == 40 and len(r.contacts) == 3 * 40
    np.testing.assert_allclose(r.timeline.server_steps, 1.5 * np.arange(1, 41))
    assert r.steps().max() <= 6 and r.steps().min() >= 0
    for t in r.timeline.server_steps:  # s distinct clients per contact
        assert len({c.client for c in r.contacts if c.time == t}) == 3
    for c in range(p.n):  # every client's time is accounted for, without overlap
        items = r.timeline.for_client(c)
        assert items[0].start == 0.0 and items[-1].end == pytest.approx(60.0)
        assert all(a.end == pytest.approx(b.start) for a, b in zip(items, items[1:]))
    assert r.steps("fast").mean() > r.steps("slow").mean()


def test_schedules_are_deterministic():
    p = two_speed(10, seed=0)
    for sim, kw in [(simulate_async_schedule, dict(s=3, server_interval=2.0)),
                    (simulate_buffered_schedule, dict(Z=3)), (simulate_sync_schedule, dict(s=3))]:
        a, b = sim(p, 4, t_end=100.0, seed=11, **kw), sim(p, 4, t_end=100.0, seed=11, **kw)
        c = sim(p, 4, t_end=100.0, seed=12, **kw)
        assert a.contacts == b.contacts and a.timeline.intervals == b.timeline.intervals
        assert a.contacts != c.contacts


def test_buffered_schedule():
    p = two_speed(15, slow_fraction=1 / 3, seed=1)
    r = simulate_buffered_schedule(p, K=4, Z=3, t_end=1500.0, seed=0)
    assert len(r.timeline.flushes) == r.server_steps > 50
    assert all(len(f.clients) == 3 for f in r.timeline.flushes)
    assert np.all(r.steps() == 4)
    for f in r.timeline.flushes[:20]:  # the flush happens when the Z-th client finishes its K-th step
        ends = [i.end for c in f.clients for i in r.timeline.for_client(c) if i.label == "train" and i.end <= f.time]
        assert max(ends) == f.time
    shares = r.class_shares()
    assert shares["slow"] < p.counts()["slow"] / p.n  # FAVAS Sec. 5: fast clients feed the buffer
    assert r.staleness("slow").mean() > r.staleness("fast").mean()


def test_buffered_schedule_with_concurrency():
    """At most `concurrency` clients in flight; after each step, uniform idle clients refill it; less stale."""
    p = two_speed(30, slow_fraction=1 / 3, seed=1)
    r = simulate_buffered_schedule(p, K=4, Z=3, t_end=800.0, seed=0, concurrency=6)
    assert r.params["concurrency"] == 6 and r.server_steps > 50
    for t in r.timeline.server_steps[:40]:      # in flight at t: started by t, collected after t
        assert sum(1 for c in r.contacts if c.started <= t < c.time) <= 6
    started_at_zero = {c.client for c in r.contacts if c.started == 0.0}
    assert len(started_at_zero) <= 6
    assert len({c.client for c in r.contacts}) > 20            # the draws reach most of the pool over time
    full = simulate_buffered_schedule(p, K=4, Z=3, t_end=800.0, seed=0)
    assert r.staleness().mean() < full.staleness().mean() / 2    # bounded concurrency, fresher updates
    with pytest.raises(ParameterError, match="concurrency"):
        simulate_buffered_schedule(p, K=4, Z=3, t_end=10.0, concurrency=2)   # fewer than Z could never fill
    with pytest.raises(ParameterError, match="concurrency"):
        simulate_buffered_schedule(p, K=4, Z=3, t_end=10.0, concurrency=31)


def test_sync_schedule_waits_for_the_slowest():
    p = two_speed(10, seed=0)
    r = simulate_sync_schedule(p, K=3, s=4, t_end=300.0, seed=0)
    assert len(r.contacts) == 4 * r.server_steps and np.all(r.steps() == 3) and np.all(r.staleness() == 0)
    for t in r.timeline.server_steps[:10]:
        members = [c.client for c in r.contacts if c.time == t]
        ends = [i.end for c in members for i in r.timeline.for_client(c) if i.label == "train" and i.end <= t]
        assert max(ends) == t


def test_schedule_errors():
    p = two_speed(5)
    with pytest.raises(ParameterError):
        simulate_async_schedule(p, K=3, s=6, server_interval=1.0, t_end=10.0)
    with pytest.raises(ParameterError):
        simulate_async_schedule(p, K=0, s=2, server_interval=1.0, t_end=10.0)
    with pytest.raises(ParameterError):
        simulate_async_schedule(p, K=3, s=2, server_interval=0.0, t_end=10.0)
    with pytest.raises(ParameterError):
        simulate_buffered_schedule(p, K=3, Z=0, t_end=10.0)
    with pytest.raises(ParameterError):
        simulate_async_schedule("fast", K=3, s=2, server_interval=1.0, t_end=10.0)
    clock = ClientClock(p, K=2)
    with pytest.raises(ParameterError):
        clock.collect(0, 1.0)


# ---------------------------------------------------------------- plots

def test_plot_timeline_labels():
    r = simulate_buffered_schedule(two_speed(12, seed=0), K=3, Z=4, t_end=60.0, seed=0)
    ax = plot_timeline(r.timeline, t_max=50.0)
    assert ax.get_xlabel() == "simulated time" and ax.get_ylabel() == "client" and ax.get_title()
    assert ax.get_xlim() == (0.0, 50.0)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "training (fast)" in legend and "training (slow)" in legend
    assert "server step" in legend and "buffer flush" in legend
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "server" and len(labels) == 13

    _, ax2 = plt.subplots()
    assert plot_timeline(r.timeline, ax=ax2, clients=[3, 1]) is ax2
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["server", "3", "1"]


def test_plot_timeline_by_task_and_errors():
    tl = Timeline()
    tl.add(0, 0.0, 2.0, task="mnist", steps=2)
    tl.add(1, 1.0, 3.0, task="cifar10", steps=1)
    tl.add(1, 3.0, 4.0, "queued", task="mnist")
    ax = plot_timeline(tl, color_by="task")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "training (mnist)" in legend and "training (cifar10)" in legend and "queued" in legend
    with pytest.raises(ParameterError):
        plot_timeline(Timeline())
    with pytest.raises(ParameterError):
        plot_timeline(tl, color_by="speed")


def test_demo_compute_and_plots():
    data = compute_straggler_demo(n=10, s=3, K=4, Z=3, t_end=300.0, t_show=40.0)
    assert set(data) == {"profile", "async", "buffered", "sync", "theory", "t_show"}
    ax = plot_steps_histogram(data["async"], theory=data["theory"])
    assert ax.get_ylabel() == "fraction of contacts" and "K = 4" in ax.get_title()
    ax = plot_class_shares(data["buffered"])
    assert ax.get_ylabel() == "fraction" and [t.get_text() for t in ax.get_xticklabels()] == ["fast", "slow"]
    fig = plot_straggler_demo(data)
    assert len(fig.axes) == 4 and all(a.get_xlabel() for a in fig.axes[:2])


# --- arrivals: FedBuff as QAFeL's FLSim code runs it ------------------------------------------------------------

def test_arrival_schedule_follows_littles_law_and_records_staleness():
    n, T = 2000, 400.0
    duration = HalfNormal(1.0)
    profile = SpeedProfile(["all"], np.zeros(n, dtype=int), [duration])
    rate = rate_for_concurrency(50, duration)                    # QAFeL: 627 for 500, 1253 for 1000
    res = simulate_arrival_schedule(profile, K=1, Z=10, arrivals=make_arrivals("constant", rate), t_end=T, seed=3)
    starts = sorted(c.started for c in res.contacts)
    assert np.allclose(np.diff(starts) * rate, np.round(np.diff(starts) * rate))   # arrivals on the 1/rate grid
    busy = sum(iv.end - iv.start for c in res.timeline.clients() for iv in res.timeline.for_client(c)
               if iv.label == "train")
    assert busy / T == pytest.approx(50, rel=0.05)                                  # mean clients in flight
    assert len(res.contacts) == 10 * res.server_steps and res.params["turned_away"] == 0
    stale = res.staleness()
    assert stale.min() >= 0 and 2 < stale.mean() < 8          # ~ concurrency / Z server steps while training


def test_arrival_schedule_caps_concurrency_and_turns_arrivals_away():
    n = 50
    profile = SpeedProfile(["all"], np.zeros(n, dtype=int), [HalfNormal(1.0)])
    res = simulate_arrival_schedule(profile, K=1, Z=2, arrivals=make_arrivals("poisson", 20.0), t_end=50.0,
                                    seed=0, concurrency=4)
    events = sorted([(c.started, 1) for c in res.contacts] + [(c.time, -1) for c in res.contacts])
    assert max(np.cumsum([e for _, e in events])) <= 4 and res.params["turned_away"] > 0
    with pytest.raises(ParameterError, match="arrivals"):
        simulate_arrival_schedule(profile, K=1, Z=2, arrivals=20.0, t_end=5.0)
    with pytest.raises(ParameterError, match="concurrency"):
        simulate_arrival_schedule(profile, K=1, Z=2, arrivals=make_arrivals("poisson", 2.0), t_end=5.0,
                                  concurrency=n + 1)
