"""FedAST theory: Theorem 1 / Corollary 1.1 as printed, the Realloc optimum, the round times (simulated)."""
import math

import numpy as np
import pytest

from afl.errors import ParameterError
from afl.theory import fedast


def test_theorem1_terms_as_printed():
    t = fedast.theorem1_terms(100, tau=27, b=3, R=96, eta_c=0.01, eta_s=0.1, L=2.0, sigma_l2=0.5, sigma_g2=3.0,
                              delta=4.0)
    assert t["fedavg_1"] == pytest.approx(4.0 / (100 * 0.01 * 0.1 * 27))
    assert t["fedavg_2"] == pytest.approx((2 * 0.01 * 0.1 / 3 + 4 * 1e-4 * 27) * (0.5 + 27 * 3.0))
    assert t["async"] == pytest.approx(4 * 0.01 * 1e-4 * 27 * 96 / 9 * (0.5 + 27 * 96 * 3.0))
    assert t["total"] == pytest.approx(t["fedavg_1"] + t["fedavg_2"] + t["async"])


def test_asynchrony_is_not_dominant_when_the_papers_condition_holds():
    """Sec. 4: when L eta_s eta_c R^2 tau <= b the asynchronous term is at most of FedAvg Error II's order."""
    tau, b, R, eta_s = 5, 10, 20, 1.0
    eta_c = b / (eta_s * R ** 2 * tau)                 # the condition with equality (L = 1)
    t = fedast.theorem1_terms(1e6, tau, b, R, eta_c, eta_s, sigma_l2=0.0, sigma_g2=1.0)
    assert t["async"] <= t["fedavg_2"]
    t4 = fedast.theorem1_terms(1e6, tau, b, 4 * R, eta_c, eta_s, sigma_l2=0.0, sigma_g2=1.0)
    assert t4["async"] > 10 * t4["fedavg_2"]            # four times the requests, the condition broken


def test_corollary_is_theorem1_at_its_learning_rates():
    T, tau, b, R = np.array([1e4, 1e6]), 27, 3, 96
    c = fedast.corollary11_terms(T, tau, b, R, sigma_l2=0.3, sigma_g2=2.0, delta=5.0)
    for k, Tk in enumerate(T):
        t = fedast.theorem1_terms(Tk, tau, b, R, float(c["eta_c"][k]), c["eta_s"], sigma_l2=0.3, sigma_g2=2.0,
                                  delta=5.0)
        assert c["fedavg_1"][k] == pytest.approx(t["fedavg_1"])
        assert c["async"][k] == pytest.approx(t["async"])
        assert c["fedavg_2"][k] == pytest.approx(t["fedavg_2"])
    assert c["total"][1] < c["total"][0]


def test_step_size_limits():
    lim = fedast.step_size_limits(tau=4, b=9, R=16, gamma_max=4, L=0.5)
    assert lim["eta_s_max"] == 6.0
    assert lim["eta_c_max"] == pytest.approx(min(1 / (6 * 0.5 * 4 * 6), 1 / (4 * 0.5 * 4 * math.sqrt(4 * 16 * 4))))


def test_realloc_optimum_minimizes_eq7_and_the_code_variant_differs():
    var, eta_s, eta_c, tau = [1.0, 4.0, 0.25, 9.0], [0.1, 0.1, 0.038, 0.1], [0.1, 0.06, 0.1, 7.0], [27, 27, 27, 27]
    best = fedast.realloc_optimum(288, var, eta_s, eta_c, tau)
    assert best.sum() == pytest.approx(288)
    f_best = fedast.allocation_objective(best, var, eta_s, eta_c, tau)
    rng = np.random.default_rng(0)
    for _ in range(200):                               # no feasible allocation does better
        other = rng.dirichlet(np.ones(4)) * 288
        assert fedast.allocation_objective(other, var, eta_s, eta_c, tau) >= f_best * (1 - 1e-12)
    w = np.sqrt(np.array(var) * np.array(eta_s) * np.array(eta_c) * np.array(tau))
    np.testing.assert_allclose(best, 288 * w / w.sum())
    code = fedast.realloc_optimum(288, var, eta_s, eta_c, tau, variant="code")
    code_w = np.array(eta_s) / (np.array(eta_c) * 27 ** 2) * np.array(var)
    np.testing.assert_allclose(code, 288 * code_w / code_w.sum())
    assert fedast.allocation_objective(code, var, eta_s, eta_c, tau) > f_best
    np.testing.assert_allclose(fedast.realloc_optimum(90, [0, 0, 0], 0.1, 0.1, 27), [30, 30, 30])


def test_round_times_match_simulation():
    rng = np.random.default_rng(1)
    lam, R, b = 2.0, 50, 5
    maxima = rng.exponential(1 / lam, size=(20000, R)).max(axis=1)
    assert fedast.sync_round_time(R, lam) == pytest.approx(maxima.mean(), rel=0.02)
    assert fedast.harmonic(R) == pytest.approx(math.log(R) + 0.5772, abs=0.02)
    # R requests in flight, each replaced at once: the b-th arrival of a Poisson process of rate R lam
    fills = rng.exponential(1 / (R * lam), size=(20000, b)).sum(axis=1)
    assert fedast.buffered_round_time(b, R, lam) == pytest.approx(fills.mean(), rel=0.02)
    assert fedast.buffered_round_time(b, R, lam) < fedast.sync_round_time(R, lam)


@pytest.mark.parametrize("call, name", [
    (lambda: fedast.theorem1_terms(0, 1, 1, 1, 0.1, 0.1), "T"),
    (lambda: fedast.theorem1_terms(10, 1, 0, 1, 0.1, 0.1), "b"),
    (lambda: fedast.theorem1_terms(10, 1, 1, 1, -0.1, 0.1), "eta_c"),
    (lambda: fedast.realloc_optimum(10, [1, -1], 0.1, 0.1, 1), "sigma_g2"),
    (lambda: fedast.realloc_optimum(10, [1, 1], [0.1, 0.1, 0.1], 0.1, 1), "eta_s"),
    (lambda: fedast.realloc_optimum(10, [1, 1], 0.1, 0.1, 1, variant="mine"), "variant"),
    (lambda: fedast.sync_round_time(0, 1.0), "R"),
    (lambda: fedast.buffered_round_time(3, 10, 0.0), "lam")])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ParameterError, match=name):
        call()
