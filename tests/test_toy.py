"""afl.toy: FedAvg on quadratics, the primer's problem (notebook 00a), against its closed forms."""
import numpy as np
import pytest

from afl.errors import ParameterError
from afl.toy import fedavg, fedavg_fixed_point, max_stable_lr, quadratic_clients


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_fedavg_settles_on_its_computed_fixed_point(dim):
    q = quadratic_clients(n=7, dim=dim, curvature=6.0, seed=3)
    for K in (1, 3, 17):
        path = fedavg(q, rounds=500, K=K, lr=0.1)
        assert np.allclose(path[-1], fedavg_fixed_point(q, K, 0.1), atol=1e-10)


def test_one_local_step_or_equal_curvatures_leave_no_drift():
    q = quadratic_clients(n=10, dim=3, curvature=8.0, seed=1)
    assert np.allclose(fedavg_fixed_point(q, 1, 0.05), q.optimum(), atol=1e-12)
    assert np.linalg.norm(fedavg_fixed_point(q, 20, 0.05) - q.optimum()) > 1e-2         # drift
    same = quadratic_clients(n=10, dim=3, curvature=1.0, seed=1)
    assert np.allclose(same.A, np.eye(3)[None].repeat(10, 0))
    for K in (1, 20, 300):
        assert np.allclose(fedavg_fixed_point(same, K, 0.05), same.optimum(), atol=1e-12)


def test_many_local_steps_average_the_clients_minimisers():
    q = quadratic_clients(n=6, dim=2, curvature=4.0, seed=2)
    assert np.allclose(fedavg_fixed_point(q, 5000, 0.1), q.c.mean(0), atol=1e-9)


def test_the_optimum_zeroes_the_gradient_and_the_gap():
    q = quadratic_clients(n=5, dim=4, curvature=3.0, seed=0)
    x = q.optimum()
    grad = np.einsum("nij,nj->i", q.A, x[None] - q.c) / q.n
    assert np.allclose(grad, 0, atol=1e-12) and abs(q.gap(x)) < 1e-12 and q.gap(x + 0.1) > 0
    assert max_stable_lr(q) == pytest.approx(2 / 3.0)


def test_sampling_and_noise_are_seeded():
    q = quadratic_clients(n=10, dim=2, seed=0)
    a = fedavg(q, 30, K=5, lr=0.05, s=3, noise=0.5, seed=4)
    assert np.array_equal(a, fedavg(q, 30, K=5, lr=0.05, s=3, noise=0.5, seed=4))
    assert not np.array_equal(a, fedavg(q, 30, K=5, lr=0.05, s=3, noise=0.5, seed=5))
    assert a.shape == (31, 2)


@pytest.mark.parametrize("kwargs, name", [({"s": 11}, "s"), ({"s": 0}, "s"), ({"lr": 0.0}, "lr"),
                                          ({"K": 0}, "K"), ({"noise": -1.0}, "noise"),
                                          ({"x0": np.zeros(3)}, "x0")])
def test_bad_settings_are_named(kwargs, name):
    q = quadratic_clients(n=10, dim=2, seed=0)
    with pytest.raises(ParameterError, match=f"{name}="):
        fedavg(q, 3, **({"K": 2, "lr": 0.1} | kwargs))
