"""Tests for afl.theory.favas (FAVAS eq. (1), Lemma 2, Theorem 3, Corollary 4, Table 1, time-model helpers)."""
import math

import numpy as np
import pytest

from afl.errors import ParameterError
from afl.sim import Exponential, contact_steps_pmf, steps_completed_pmf
from afl.theory import favas as fv

# A common set of problem constants for the bound tests.
C = dict(L=1.0, F=2.0, sigma2=0.5, G2=0.3, B2=1.5)


# --------------------------------------------------------------------------------------------- hand-computed a, b
def test_point_mass_at_K_deterministic():
    # E = K surely, K = 4: E[E∧K] = 4, E[(E∧K)^2] = 16.
    # a = 1/4 + 16/(16*4) = 1/4 + 1/4 = 1/2 (= 2/K);  b = 16/4 = 4 (= K).
    out = fv.reweight_constants([[0, 0, 0, 0, 1]], 4, "deterministic")
    assert out["a"] == pytest.approx([0.5])
    assert out["b"] == pytest.approx(4.0)


def test_point_mass_at_K_stochastic():
    # P(E>0) = 1, E[1(E>0)/(E∧K)] = 1/4: a = 1/16 + 1/4 = 5/16;  b = 1/P(E>0) = 1.
    out = fv.reweight_constants([[0, 0, 0, 0, 1]], 4, "stochastic")
    assert out["a"] == pytest.approx([5 / 16])
    assert out["b"] == pytest.approx(1.0)


def test_two_point_distribution_both_modes():
    # P(E=0) = P(E=2) = 1/2, K = 4 (no capping).
    # deterministic: m1 = 1, m2 = 2 -> a = 1/1 + 2/(16*1) = 1.125, b = 2/1 = 2.
    # stochastic: p = 1/2, E[1(E>0)/(E∧K)] = 1/2 * 1/2 = 1/4 -> a = 2 * (1/2/16 + 1/4) = 9/16, b = 2.
    pmf = [0.5, 0.0, 0.5]
    det = fv.reweight_constants([pmf], 4, "deterministic")
    sto = fv.reweight_constants([pmf], 4, "stochastic")
    assert det["a"] == pytest.approx([1.125]) and det["b"] == pytest.approx(2.0)
    assert sto["a"] == pytest.approx([9 / 16]) and sto["b"] == pytest.approx(2.0)


def test_support_beyond_K_is_capped_and_b_is_max_over_clients():
    # Client 0: P(E=1) = 1/4, P(E=5) = 3/4, K = 3 -> E∧K in {1, 3}: m1 = 2.5, m2 = 7, p = 1, inv = 1/4 + 1/4 = 1/2.
    #   det: a = 1/2.5 + 7/(9*2.5) = 0.4 + 0.31111 = 0.71111, b_0 = 7/2.5 = 2.8.   sto: a = 1/9 + 1/2, b_0 = 1.
    # Client 1: P(E=0) = 0.6, P(E=3) = 0.4: m1 = 1.2, m2 = 3.6, p = 0.4, inv = 0.4/3.
    #   det: a = 1/1.2 + 3.6/(9*1.2) = 0.8333 + 0.3333 = 1.16667, b_1 = 3.    sto: a = (0.4/9 + 0.4/3)/0.4 = 1/9 + 1/3, b_1 = 2.5.
    pmfs = [[0, 0.25, 0, 0, 0, 0.75], [0.6, 0, 0, 0.4]]
    det = fv.reweight_constants(pmfs, 3, "deterministic")
    sto = fv.reweight_constants(pmfs, 3, "stochastic")
    assert det["a"] == pytest.approx([0.4 + 7 / 22.5, 1 / 1.2 + 1 / 3])
    assert det["b"] == pytest.approx(3.0)
    assert sto["a"] == pytest.approx([1 / 9 + 1 / 2, 1 / 9 + 1 / 3])
    assert sto["b"] == pytest.approx(2.5)
    # Truncating the pmf at K first (mass at K = P(E >= K)) gives the same constants.
    trunc = [[0, 0.25, 0, 0.75], [0.6, 0, 0, 0.4]]
    assert fv.reweight_constants(trunc, 3, "deterministic")["a"] == pytest.approx(det["a"])


def test_alpha_values():
    pmf = [0.5, 0.0, 0.5]  # E[E∧4] = 1, P(E>0) = 1/2
    assert fv.alpha(pmf, 4, "deterministic") == pytest.approx(1.0)
    assert fv.alpha(pmf, 4, "stochastic", e=2) == pytest.approx(1.0)
    assert fv.alpha(pmf, 1, "stochastic", e=2) == pytest.approx(0.5)  # e ∧ K = 1
    assert fv.alpha(pmf, 4, "stochastic", e=0) == 0.0
    with pytest.raises(ParameterError, match="e="):
        fv.alpha(pmf, 4, "stochastic")


# --------------------------------------------------------------------------------------------- Monte Carlo checks
def _simulate_E_capped(rng, mean, window, K, size):
    """E ∧ K where steps take Exp(mean) and the client is interrupted after `window` (count of steps done)."""
    finish = np.cumsum(rng.exponential(mean, size=(size, K)), axis=1)
    return (finish < np.asarray(window).reshape(-1, 1)).sum(axis=1)


def test_poisson_window_pmf_matches_simulation():
    rng = np.random.default_rng(1)
    mean, window, K, N = 2.0, 9.0, 6, 200_000
    e = _simulate_E_capped(rng, mean, np.full(N, window), K, N)
    pmf = steps_completed_pmf(Exponential(mean), window, K)
    emp = np.bincount(e, minlength=K + 1) / N
    assert np.abs(emp - pmf).max() < 0.005
    mom = fv.truncated_moments(pmf, K)
    assert e.mean() == pytest.approx(mom["m1"], abs=0.02)
    assert (e > 0).mean() == pytest.approx(mom["p_pos"], abs=0.005)
    assert fv.alpha(pmf, K, "deterministic") == pytest.approx(mom["m1"])


def test_contact_window_pmf_matches_simulation():
    # Geometric(s/n) server steps between contacts, server period 3, slow client (mean 8), K = 5.
    rng = np.random.default_rng(2)
    mean, period, n, s, K, N = 8.0, 3.0, 8, 2, 5, 200_000
    gaps = rng.geometric(s / n, size=N)
    e = _simulate_E_capped(rng, mean, gaps * period, K, N)
    pmf = contact_steps_pmf(Exponential(mean), K, n, s, period)
    assert pmf.sum() == pytest.approx(1.0)
    assert np.abs(np.bincount(e, minlength=K + 1) / N - pmf).max() < 0.005


def test_reweighted_progress_is_unbiased_by_monte_carlo():
    # Eq. (1) / Sec. 4: ȟ = (1/α) Σ_{q ≤ E∧K} h̃_q. With i.i.d. h̃_q of mean h,
    # E[ȟ] = h for both α (deterministic: E[(E∧K)/E[E∧K]] = 1; stochastic: E[1(E>0)/P(E>0)] = 1).
    rng = np.random.default_rng(3)
    mean, window, K, N = 4.0, 6.0, 3, 200_000
    e = _simulate_E_capped(rng, mean, np.full(N, window), K, N)
    pmf = steps_completed_pmf(Exponential(mean), window, K)
    mom = fv.truncated_moments(pmf, K)
    h = np.array([1.0, -2.0])
    noise = rng.normal(0.0, 0.5, size=(N, K, 2))
    steps = h + noise
    mask = (np.arange(K)[None, :] < e[:, None])[:, :, None]
    sums = (steps * mask).sum(axis=1)  # Σ_{q ≤ E∧K} h̃_q

    a_det = fv.alpha(pmf, K, "deterministic")
    assert (e / a_det).mean() == pytest.approx(1.0, abs=0.01)
    assert (sums / a_det).mean(axis=0) == pytest.approx(h, abs=0.02)

    a_sto = np.array([fv.alpha(pmf, K, "stochastic", e=int(k)) for k in range(K + 1)])[e]
    safe = np.where(a_sto > 0, a_sto, 1.0)
    est = np.where((a_sto > 0)[:, None], sums / safe[:, None], 0.0)  # 0/0 := 0 when E = 0
    assert ((e > 0) / mom["p_pos"]).mean() == pytest.approx(1.0, abs=0.01)
    assert est.mean(axis=0) == pytest.approx(h, abs=0.02)
    # Without reweighting the plain sum has mean E[E∧K] h (here E[E∧K] ≈ 1.41): biased.
    assert sums.mean(axis=0) == pytest.approx(mom["m1"] * h, abs=0.02)
    assert abs(mom["m1"] - 1.0) > 0.3


def test_c_fedavg_matches_simulation_and_exact_cases():
    # s = 1: E[max] = E[Γ(K, mean)] = K * mean, mixed by the chance of picking a slow client.
    assert fv.c_fedavg(5, 1, 3, 1, interaction_time=10.0) == pytest.approx(0.75 * 10 + 0.25 * 40 + 10.0, rel=1e-6)
    assert fv.c_fedavg(7, 1, 4, 0) == pytest.approx(14.0, rel=1e-6)
    rng = np.random.default_rng(4)
    K, s, nf, ns, N = 6, 4, 6, 3, 40_000
    slow = np.array([0] * nf + [1] * ns)
    picks = np.argsort(rng.random((N, nf + ns)), axis=1)[:, :s]
    means = np.where(slow[picks] == 1, 8.0, 2.0)
    rounds = (rng.gamma(K, 1.0, size=(N, s)) * means).max(axis=1)
    assert fv.c_fedavg(K, s, nf, ns) == pytest.approx(rounds.mean(), rel=0.01)


def test_c_server_clock():
    assert fv.c_server_clock(10.0) == 10.0
    assert fv.c_server_clock(10.0, 0.0, bits=14) == pytest.approx(4.375)
    assert fv.c_server_clock(3.0, 5.0, bits=16) == pytest.approx(6.5)


# --------------------------------------------------------------------------------------------- Lemma 2
def test_kappa_values():
    assert fv.kappa(3, 1) == pytest.approx(1 / 3 * (1 * 2) / (2 * 4 * 2))  # = 1/24
    assert fv.kappa(100, 20) == pytest.approx(0.01 * 20 * 80 / (2 * 101 * 21))
    assert fv.kappa(5, 5) == 0.0
    for bad in [(5, 0), (5, 6), (0, 1), (5.0, 2)]:
        with pytest.raises(ParameterError):
            fv.kappa(*bad)


# --------------------------------------------------------------------------------------------- Theorem 3 / Cor. 4
def _ab(n=10, K=5):
    pmfs = [steps_completed_pmf(Exponential(2.0 if i % 3 else 8.0), 10.0, K) for i in range(n)]
    return fv.reweight_constants(pmfs, K, "deterministic")


def test_theorem3_hand_value():
    # n=1, s=1, K=1, L=1, F=1, σ²=1, G²=0, B²=1, a=[1], b=1, T=10, eta=0.01 (eta_max = 1/20):
    # 2*2*1/(10*1*0.01) + (1/2)(1)(0.01) + 1*(720)(1e-4) = 40 + 0.005 + 0.072
    val = fv.theorem3_bound(10, 0.01, 1, 1, 1, 1.0, 1.0, 1.0, 0.0, 1.0, [1.0], 1.0)
    assert val == pytest.approx(40.077)


def test_theorem3_monotone_and_step_size_condition():
    n, s, K = 10, 3, 5
    ab = _ab(n, K)
    eta_max = fv.max_step_size(s, K, C["L"], C["B2"], ab["b"])
    assert eta_max == pytest.approx(1 / (20 * C["B2"] * ab["b"] * K * C["L"] * s))
    vals = [fv.theorem3_bound(T, eta_max / 2, n, s, K, a=ab["a"], b=ab["b"], **C) for T in (1, 10, 100, 1000)]
    assert all(x > y for x, y in zip(vals, vals[1:]))
    terms = fv.theorem3_terms(100, eta_max, n, s, K, a=ab["a"], b=ab["b"], **C)
    assert terms["total"] == pytest.approx(terms["initial"] + terms["linear"] + terms["quadratic"])
    assert terms["step_size_ok"]
    with pytest.raises(ParameterError, match="eta"):
        fv.theorem3_bound(100, 2 * eta_max, n, s, K, a=ab["a"], b=ab["b"], **C)
    loose = fv.theorem3_terms(100, 2 * eta_max, n, s, K, a=ab["a"], b=ab["b"], check_step_size=False, **C)
    assert not loose["step_size_ok"] and loose["total"] > 0
    # Larger heterogeneity G² gives a larger bound.
    C2 = dict(C, G2=3.0)
    assert (fv.theorem3_bound(100, eta_max / 2, n, s, K, a=ab["a"], b=ab["b"], **C2)
            > fv.theorem3_bound(100, eta_max / 2, n, s, K, a=ab["a"], b=ab["b"], **C))


def test_corollary4_hand_value_and_monotonicity():
    # n=1, s=1, K=1, L=1, F=1, σ²=1, G²=0, B²=1, a=[1], b=1, eps=0.5:
    # 1*(1)/0.25 + 2*( sqrt(1 + 0 + 1 + 0) / 0.5^1.5 + 1/0.5 ) = 4 + 2*(4 + 2) = 16
    assert fv.corollary4_steps(0.5, 1, 1, 1, 1.0, 1.0, 1.0, 0.0, 1.0, [1.0], 1.0) == pytest.approx(16.0)
    ab = _ab()
    steps = [fv.corollary4_steps(eps, 10, 3, 5, a=ab["a"], b=ab["b"], **C) for eps in (1.0, 0.1, 0.01)]
    assert steps[0] < steps[1] < steps[2]


# --------------------------------------------------------------------------------------------- Table 1
def test_table1_rows_hand_values():
    k = dict(eps=0.5, F=1.0, L=4.0, sigma2=1.0, G2=4.0)
    # FedAvg, K=2, s=2, n=4, B²=1: ((4 + (1 - 2/4)*2*4)/(2*2))*4 + 1*2*2*0.5^-1.5 + 4*1*1*2
    fedavg = (4 + 4) / 4 * 4 + 4 * 2**1.5 + 8
    assert fv.table1_fedavg(B2=1.0, K=2, s=2, n=4, **k) == pytest.approx(fedavg)
    assert fv.table1_fedavg(B2=1.0, K=2, s=2, n=4, C=3.0, **k) == pytest.approx(3 * fedavg)
    # a_fedavg overrides the (1 - a_i/n) factor: a_fedavg = 4 = n kills the G² term.
    assert fv.table1_fedavg(B2=1.0, K=2, s=2, n=4, a_fedavg=4.0, **k) == pytest.approx(4 / 4 * 4 + 4 * 2**1.5 + 8)
    # FedBuff, n=4, s=2, tau_max=4: 4*5*4 + 4*sqrt((4/4+1)*(1+16))*2^1.5 + 4*2
    assert fv.table1_fedbuff(n=4, s=2, tau_max=4.0, **k) == pytest.approx(80 + 4 * math.sqrt(34) * 2**1.5 + 8)
    # AsyncSGD, s=2, tau_avg=2, tau_max=8: 4*(3+16)*4 + 4*2*sqrt(4)*2^1.5 + sqrt(16)*2
    assert fv.table1_asyncsgd(s=2, tau_avg=2.0, tau_max=8.0, **k) == pytest.approx(304 + 16 * 2**1.5 + 8)
    # QuAFL, B²=4 (B=2), K=1, n=4, s=1, E=1: v = 1 + 8 = 9 -> 4*9*4 + 8*4*3*2^1.5 + 8*2*4*2
    assert fv.table1_quafl(B2=4.0, K=1, n=4, s=1, E=1.0, **k) == pytest.approx(144 + 96 * 2**1.5 + 128)
    # FAVAS, B²=1, K=1, n=2, s=1, a=[1,1], b=1: 4*(1+32)*4 + 2*16*sqrt(1+64+1+4)*2^1.5 + 2*4*2
    assert fv.table1_favas(B2=1.0, K=1, n=2, s=1, a=[1.0, 1.0], b=1.0, **k) == pytest.approx(
        528 + 32 * math.sqrt(70) * 2**1.5 + 16)
    assert set(fv.TABLE1) == {"fedavg", "fedbuff", "asyncsgd", "quafl", "favas"}


def test_table1_decreasing_in_eps():
    ab = _ab()
    for eps_big, eps_small in [(1.0, 0.1)]:
        assert (fv.table1_favas(eps_big, 1, 1, 1, 1, 1, 5, 10, 3, ab["a"], ab["b"])
                < fv.table1_favas(eps_small, 1, 1, 1, 1, 1, 5, 10, 3, ab["a"], ab["b"]))
        assert (fv.table1_fedavg(eps_big, 1, 1, 1, 1, 1, 5, 3, 10)
                < fv.table1_fedavg(eps_small, 1, 1, 1, 1, 1, 5, 3, 10))


# --------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("pmfs, match", [
    ([[0.5, 0.6]], r"pmfs\[0\]"),             # sums to 1.1
    ([[0.0, 1.0], [1.2, -0.2]], r"pmfs\[1\]"),  # negative entry
    ([[0.0, 1.0], [1.0]], r"pmfs\[1\]"),        # P(E > 0) = 0
    ([[0.0, 1.0], [[0.5, 0.5]]], r"pmfs\[1\]"),  # not 1-D
    ([[0.0, float("nan"), 1.0]], r"pmfs\[0\]"),
    ([], "pmfs"),
])
def test_reweight_constants_rejects_bad_pmfs(pmfs, match):
    with pytest.raises(ParameterError, match=match):
        fv.reweight_constants(pmfs, 3, "deterministic")


def test_pmf_tolerance_is_1e_9():
    fv.reweight_constants([[0.5, 0.5 + 5e-10]], 2, "stochastic")
    with pytest.raises(ParameterError):
        fv.reweight_constants([[0.5, 0.5 + 5e-9]], 2, "stochastic")


def test_bad_K_mode_and_other_arguments():
    for K in (0, 2.0, True, -1):
        with pytest.raises(ParameterError, match="K="):
            fv.reweight_constants([[0, 1]], K, "deterministic")
    with pytest.raises(ParameterError, match="mode="):
        fv.reweight_constants([[0, 1]], 2, "exact")
    with pytest.raises(ParameterError, match="pmf"):
        fv.alpha([1.0], 2, "deterministic")
    with pytest.raises(ParameterError, match="a="):
        fv.theorem3_bound(10, 1e-4, 3, 1, 1, a=[1.0, 1.0], b=1.0, **C)  # a has length 2, n = 3
    with pytest.raises(ParameterError, match="B2="):
        fv.theorem3_bound(10, 1e-4, 2, 1, 1, a=[1.0, 1.0], b=1.0, **dict(C, B2=0.5))
    with pytest.raises(ParameterError, match="T="):
        fv.theorem3_bound(0, 1e-4, 2, 1, 1, a=[1.0, 1.0], b=1.0, **C)
    with pytest.raises(ParameterError, match="eps="):
        fv.corollary4_steps(0.0, 2, 1, 1, a=[1.0, 1.0], b=1.0, **C)
    with pytest.raises(ParameterError, match="s="):
        fv.table1_fedavg(0.1, 1, 1, 1, 1, 1, 2, 5, 4)  # s > n
    with pytest.raises(ParameterError, match="s="):
        fv.c_fedavg(3, 5, 2, 2)
