"""QAFeL's bounds (afl.theory.qafel) on hand-computed cases."""
import math

import pytest

from afl.errors import ParameterError
from afl.theory import qafel as th

CASE = dict(T=100, eta_g=1.0, eta_local=0.01, P=2, K=10, L=1.0, F=1.0, sigma2=1.0, G=1.0, delta_c=0.5,
            delta_s=0.5, tau_max_1=20)


def test_theorem_f1_by_hand():
    # alpha_P = 0.02, beta_P = 2e-4, tau_max_K = ceil(20 / 10) = 2, phi = sum_{t=1}^{99} 0.5^t = 1 - 0.5^99
    t = th.theorem_f1_terms(**CASE)
    assert t["tau_max_K"] == 2
    assert t["optimization"] == pytest.approx(2 * 1.0 / (1.0 * 100 * 0.02))                       # = 1
    assert t["staleness_and_drift"] == pytest.approx(3 * 2e-4 * (4 * (0.5 / 20 + 1) + 1) * (1 + 2))  # 0.00918
    phi = 1 - 0.5 ** 99
    assert t["quantization"] == pytest.approx((1 / 0.02 + 3 * phi) * (1.5 / 10) * 2e-4 * 5)        # 0.00795
    assert th.theorem_f1_bound(**CASE) == pytest.approx(1 + 0.00918 + (50 + 3 * phi) * 0.15 * 1e-3)


def test_biased_server_quantizer_bound_and_phi():
    t = th.corollary_f2_terms(**CASE)
    assert t["quantization"] == pytest.approx((50 + 12 / 0.25) * 0.15 * 1e-3)
    assert th.phi(100, 0.5) == pytest.approx(1 - 0.5 ** 99) and th.phi(100, 0.5) <= 1 / 0.5
    # the printed biased sum, (2/d) sum_{t=0}^{T-1} (1 - d/2)^(t-1), tends to 4 / (d^2 (1 - d/2)), above 4/d^2
    assert th.phi(2000, 0.5, biased=True) == pytest.approx(4 / (0.25 * 0.75))
    assert th.phi(1, 0.5, biased=True) == pytest.approx(2 / 0.5 / 0.75)


def test_learning_rate_conditions():
    # (8): (alpha 3 L^2 eta_g^2 / delta_s + L eta_g)(1 + (1 - delta_c)/K) P eta_l
    c = th.condition(1.0, 0.01, K=10, L=1.0, delta_c=0.5, delta_s=0.5, P=2)
    assert c["lhs"] == pytest.approx((0.02 * 3 / 0.5 + 1) * 1.05 * 2 * 0.01) and c["holds"]
    b = th.condition(1.0, 0.01, K=10, L=1.0, delta_c=0.5, delta_s=0.5, P=2, biased=True)
    assert b["lhs"] == pytest.approx((12 * 0.02 / 0.25 + 1) * 1.05 * 0.02)
    assert not th.condition(1.0, 0.5, K=10, L=1.0, P=4)["holds"]
    assert th.condition(1.0, [0.01, 0.03], K=10, L=1.0)["lhs"] == pytest.approx((0.04 * 3 + 1) * 2 * 0.03)
    # the simple sufficient condition implies the exact one
    for eta in (0.001, 0.01, 0.05, 0.08):
        if th.simple_condition(1.0, eta, P=2, K=10, L=1.0, delta_c=0.5, delta_s=0.5):
            assert th.condition(1.0, eta, K=10, L=1.0, delta_c=0.5, delta_s=0.5, P=2)["holds"]
    assert th.simple_condition(1.0, 0.08, P=2, K=10, L=1.0, delta_s=0.5)                 # 0.5/6 = 0.0833
    assert not th.simple_condition(1.0, 0.09, P=2, K=10, L=1.0, delta_s=0.5)


def test_orders_recover_fedbuff_without_compression():
    orders = th.proposition35_orders(T=10000, P=5, K=10, F=1.0, sigma2=1.0, G=1.0, delta_c=1.0, delta_s=1.0,
                                     tau_max_1=30)
    assert orders["qafel_extra"]["client_quantization"] == 0 and orders["qafel_extra"]["cross"] == 0
    coarse = th.proposition35_orders(T=10000, P=5, K=10, F=1.0, sigma2=1.0, G=1.0, delta_c=0.2, delta_s=0.2,
                                     tau_max_1=30)
    assert coarse["qafel_total"] > orders["qafel_total"]
    f3 = th.corollary_f3_orders(T=10000, P=5, K=10, L=1.0, F=1.0, sigma2=1.0, G=1.0, delta_c=0.5, delta_s=0.5,
                                tau_max_1=30)
    assert f3["optimization"] == pytest.approx(1 / math.sqrt(50000))
    assert f3["staleness"] == pytest.approx((1 + 5) * (900 + 15 + 1) / (10000 * 100))
    # the client quantizer's term decays as 1/sqrt(T), the server's as 1/T (the paper's conclusion)
    later = th.corollary_f3_orders(T=40000, P=5, K=10, L=1.0, F=1.0, sigma2=1.0, G=1.0, delta_c=0.5,
                                   delta_s=0.5, tau_max_1=30)
    assert later["client_quantization"] == pytest.approx(f3["client_quantization"] / 2)
    assert later["server_quantization"] == pytest.approx(f3["server_quantization"] / 4)


def test_staleness_bound_and_bad_input():
    assert th.staleness_bound(20, 10) == 2 and th.staleness_bound(21, 10) == 3 and th.staleness_bound(0, 5) == 0
    assert th.step_sums([0.1, 0.2]) == (pytest.approx(0.3), pytest.approx(0.05))
    with pytest.raises(ParameterError, match="delta_c"):
        th.theorem_f1_terms(**{**CASE, "delta_c": 0.0})
    with pytest.raises(ParameterError, match="P"):
        th.step_sums(0.1)
    with pytest.raises(ParameterError, match="eta_local"):
        th.step_sums([0.1, -1.0])
    with pytest.raises(ParameterError, match="K"):
        th.staleness_bound(3, 0)
