"""FedAST's synchronous baselines: the client split, first-k, one round by hand, the small GP."""
import numpy as np
import pytest
import torch

from afl.algorithms import make_federation
from afl.algorithms.fedast import FedASTTask
from afl.algorithms.sync_st import SmallGP, expected_improvement, plan_sync_st, run_sync_st, split_clients
from afl.data import make_synthetic
from afl.errors import ParameterError
from afl.sim import ShiftedExponential, three_speed

DATA = make_synthetic(n_train=400, n_test=100, shape=(1, 28, 28), num_classes=10, seed=2)
N = 20


def federation(seed=0):
    return make_federation(DATA, "mlp32", N, batch_size=8, seed=seed, dtype=torch.float64)


def pool(costs):
    return three_speed(N, base=ShiftedExponential(shift=0.5, mean=1.0), seed=0, costs=costs)


def test_split_follows_the_allocation_and_fills_the_cap():
    rng = np.random.default_rng(0)
    sizes = split_clients(300, [100, 84, 48, 68], [True] * 4, rng)
    assert sum(sizes) == 300 and sizes[0] >= 100 and sizes[2] >= 48
    assert split_clients(10, [1, 1, 1], [True, False, True], rng)[1] == 0


def test_first_k_round_by_hand():
    """One round: the kept updates are the first k to finish, the model is their mean step, the round ends at
    the last kept finish."""
    tasks = [FedASTTask(lr=0.05, server_lr=1.0, steps=2, requests=5, buffer=1, name="a"),
             FedASTTask(lr=0.05, server_lr=1.0, steps=2, requests=5, buffer=1, name="b")]
    out = run_sync_st([federation(0), federation(1)], tasks, pool([0.1, 0.2]), total_time=20, eval_every=5,
                      cap=10, first_k=3, seed=4)
    s = out["schedule"]
    assert s["kept"][0] == [3, 3] and s["discarded"][0] == [2, 2]
    intervals = s["timeline"].intervals
    first = [iv for iv in intervals if iv.start == 0.0]
    assert len(first) == 10
    kept_end = max(iv.end for iv in first if iv.label == "train")
    assert s["round_ends"][0] == pytest.approx(kept_end)
    for name in ("a", "b"):
        mine = sorted((iv for iv in first if iv.task == name), key=lambda iv: iv.end)
        assert [iv.label for iv in mine] == ["train"] * 3 + ["discarded"] * 2



@pytest.mark.parametrize("first_k", [3, None])
def test_the_plan_of_a_run_is_its_own_count_of_client_steps(first_k):
    """No task reaches a target: the rounds drawn without training compute the steps the run counts."""
    tasks = [FedASTTask(lr=0.05, server_lr=1.0, steps=2, requests=6, buffer=1, name="a"),
             FedASTTask(lr=0.05, server_lr=1.0, steps=3, requests=4, buffer=1, name="b")]
    out = run_sync_st([federation(0), federation(1)], tasks, pool([0.1, 0.2]), total_time=20, eval_every=5,
                      cap=10, first_k=first_k, seed=4)
    plan = plan_sync_st(pool([0.1, 0.2]), tasks, 20, cap=10, first_k=first_k, seed=4)
    assert plan == [t["client_steps"] for t in out["tasks"]] and min(plan) > 0
    assert len(out["schedule"]["round_ends"]) > 2

def test_sync_learns_and_every_selection_runs():
    data = make_synthetic(n_train=2000, n_test=400, shape=(1, 28, 28), num_classes=4, seed=0, noise=1.0)
    for selection in ("uniform", "ucb", "bayes"):
        fed = make_federation(data, "mlp32", N, batch_size=16, seed=0)
        out = run_sync_st([fed], [FedASTTask(lr=0.05, server_lr=1.0, steps=5, requests=8)], pool([0.2]),
                          total_time=60, eval_every=10, cap=8, first_k=4, selection=selection, seed=1)
        acc = out["tasks"][0]["curve"]["accuracy"]
        assert acc[-1] > acc[0] + 0.3, selection


def test_ucb_tries_every_client_before_repeating():
    fed = federation(0)
    out = run_sync_st([fed], [FedASTTask(lr=0.05, server_lr=1.0, steps=1, requests=4)], pool([0.1]),
                      total_time=20, eval_every=5, cap=4, first_k=4, selection="ucb", seed=0)
    clients = [iv.client for iv in out["schedule"]["timeline"].intervals]
    assert len(set(clients[:N])) >= N - 5        # unexplored clients (index +inf) first; availability limits it


def test_small_gp_interpolates_and_ei_prefers_low_means():
    x = np.linspace(0, 1, 8)[:, None]
    y = np.sin(6 * x[:, 0])
    gp = SmallGP().fit(x, y)
    mu, sigma = gp.predict(x)
    assert np.allclose(mu, y, atol=1e-3) and np.all(sigma < 1e-2)
    ei = expected_improvement(np.array([0.0, 1.0]), np.array([0.1, 0.1]), best=0.5)
    assert ei[0] > ei[1] >= 0


@pytest.mark.parametrize("kw, name", [(dict(cap=1), "cap"), (dict(first_k=0), "first_k"),
                                      (dict(selection="random"), "selection"), (dict(ucb_gamma=0), "ucb_gamma")])
def test_bad_input_names_the_parameter(kw, name):
    with pytest.raises(ParameterError, match=name):
        run_sync_st([federation(0), federation(1)], [FedASTTask(0.1), FedASTTask(0.1)], pool([0.1, 0.2]),
                    total_time=5, eval_every=1, **kw)


def test_train_loss_is_the_mean_loss_on_each_clients_samples():
    fed = federation(0)
    engine = fed.engine
    params = torch.stack([fed.init, fed.init * 0.5])
    parts = [torch.arange(0, 13), torch.arange(20, 27)]
    got = engine.train_loss(params, parts)
    for c in range(2):
        module = engine.model.load_into(params[c])
        x = DATA.inputs(DATA.train_x[parts[c]]).to(torch.float64)
        with torch.no_grad():
            want = torch.nn.functional.cross_entropy(module(x), DATA.train_y[parts[c]])
        assert float(got[c]) == pytest.approx(want.item(), rel=1e-9)


def test_a_task_finishes_at_the_aggregation_that_reaches_its_target():
    """The round whose aggregation brings a task to its target is its last: from the next round on its clients
    train the other task, and its time to the target is that aggregation's (tested after each, as FedAST's)."""
    data = make_synthetic(n_train=2000, n_test=400, shape=(1, 28, 28), num_classes=4, seed=0, noise=1.0)
    feds = [make_federation(data, "mlp32", N, batch_size=16, seed=s) for s in (0, 1)]
    tasks = [FedASTTask(lr=0.02, server_lr=1.0, steps=2, requests=8, target=0.95, name="a"),
             FedASTTask(lr=0.05, server_lr=1.0, steps=5, requests=8, name="b")]
    out = run_sync_st(feds, tasks, pool([0.2, 0.2]), total_time=60, eval_every=2, cap=16, first_k=6, seed=1)
    s, a = out["schedule"], out["tasks"][0]
    k = s["round_ends"].index(s["finished_at"][0])          # the round of the aggregation that reached
    assert k >= 1 and s["kept"][k][0] > 0 and all(kept[0] == 0 for kept in s["kept"][k + 1:])
    assert len(s["round_ends"]) > k + 1                      # the other task went on
    assert a["target_reached_at"] == s["finished_at"][0]       # its time to the target: that aggregation's
    assert feds[0].engine.evaluate(a["model"])["accuracy"] >= 0.95 > max(a["curve"]["accuracy"][:-1])
    assert a["target_reached_accuracy"] == feds[0].engine.evaluate(a["model"])["accuracy"]
