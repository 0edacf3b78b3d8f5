"""GHBM theory calculators against simulation and hand-computed values."""
import math

import numpy as np
import pytest

from afl.errors import ParameterError
from afl.sim import RoundSampler
from afl.theory import ghbm


def simulated_unseen(n, s, tau, sampling, trials=4000, seed=0):
    out = []
    for k in range(trials):
        sampler = RoundSampler(n, s, sampling, seed=seed + k)
        seen = set().union(*(sampler(r) for r in range(tau)))
        out.append(((n - len(seen)) / n) ** 2)
    return np.mean(out), np.std(out) / np.sqrt(trials)


@pytest.mark.parametrize("tau", [1, 3, 10, 25])
def test_unseen_fraction_matches_simulated_uniform_sampling(tau):
    exact = ghbm.unseen_fraction_moment(20, 4, tau)
    mean, se = simulated_unseen(20, 4, tau, "uniform")
    assert abs(exact - mean) < 4 * se + 1e-12


def test_cyclic_deviation_vanishes_at_one_over_c():
    assert ghbm.unseen_fraction_moment(100, 10, 1, "cyclic") == pytest.approx(0.81)
    assert ghbm.deviation_bound(100, 10, 5, G2=2.0, grad_norm2=1.0, sampling="cyclic") == pytest.approx(8 * 0.25 * 3)
    assert ghbm.deviation_bound(100, 10, 10, G2=2.0, sampling="cyclic") == 0.0
    assert simulated_unseen(20, 4, 3, "cyclic", trials=50)[0] == pytest.approx((1 - 3 * 4 / 20) ** 2)
    # uniform sampling keeps a positive error at tau = 1/C: some clients are still unseen
    # (n p1 + n (n-1) p2) / n^2 with p1 = 0.9^10, p2 = (90 * 89 / (100 * 99))^10
    assert ghbm.unseen_fraction_moment(100, 10, 10) == pytest.approx(0.9 ** 10 / 100 + 0.99 * (8010 / 9900) ** 10)
    assert ghbm.unseen_fraction_moment(100, 10, 10) > 0.1


def test_cover_time_small_case_by_hand_and_by_simulation():
    pmf = ghbm.cover_time_pmf(2, 1)                    # one of two per round: T = 1 + Geometric(1/2)
    assert pmf[:4] == pytest.approx([0, 0, 0.5, 0.25]) and pmf.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    sims = []
    for _ in range(3000):
        seen, t = set(), 0
        while len(seen) < 20:
            seen.update(rng.choice(20, 4, replace=False).tolist())
            t += 1
        sims.append(t)
    assert ghbm.expected_cover_time(20, 4) == pytest.approx(np.mean(sims), abs=4 * np.std(sims) / math.sqrt(3000))


def test_participation_period_has_mean_one_over_c():
    pmf = ghbm.participation_period_pmf(100, 10, max_rounds=2000)
    assert pmf.sum() == pytest.approx(1.0) and np.arange(len(pmf)) @ pmf == pytest.approx(10.0)


def test_rates_ghbm_matches_full_participation_and_scales_with_n():
    r = ghbm.rates(np.array([100.0, 10000.0]), n=100, C=0.1)
    np.testing.assert_allclose(r["ghbm"], r["fedavg_m_full"])
    assert np.all(r["ghbm"] < r["fedavg_partial"]) and np.all(r["fedcm"] > r["fedavg_partial"])


def test_bad_inputs_name_the_parameter():
    for call, name in [(lambda: ghbm.unseen_fraction_moment(10, 11, 1), "s"),
                       (lambda: ghbm.unseen_fraction_moment(10, 2, 0), "tau"),
                       (lambda: ghbm.unseen_fraction_moment(10, 2, 1, "random"), "sampling"),
                       (lambda: ghbm.deviation_bound(10, 2, 1, G2=-1), "G2"),
                       (lambda: ghbm.rates(10, C=0), "C")]:
        with pytest.raises(ParameterError, match=name):
            call()
