"""FedAST (Algorithm 2, static): the server's buffered step with stale starting models, checked against a replay
of the pool's schedule; two tasks on one pool."""
import numpy as np
import pytest
import torch

from afl.algorithms import make_federation
from afl.algorithms import fedast as fedast_module
from afl.algorithms.fedast import FedASTServer, FedASTTask, plan_fedast, run_fedast
from afl.data import make_synthetic
from afl.errors import ParameterError
from afl.sim import ShiftedExponential, three_speed
from afl.sim.pool import PoolControl

DATA = make_synthetic(n_train=400, n_test=100, shape=(1, 28, 28), num_classes=10, seed=2)
N = 20


def federation(seed=0, model="mlp32"):
    return make_federation(DATA, model, N, batch_size=8, seed=seed, dtype=torch.float64)


def pool(costs):
    return three_speed(N, base=ShiftedExponential(shift=0.5, mean=1.0), seed=0, costs=costs)


def replay(schedule, task, m, fed, first_wave="paper"):
    """Algorithm 2 by hand: every arrival trains from the model version it was sent with; with the code's first
    wave, a version-0 request trains from the version live when its client started it."""
    versions, buffer = [fed.init.clone()], []
    steps = schedule.server_steps[m]
    for u in (u for u in schedule.updates if u.task == m):
        live = sum(t <= u.start for t in steps)
        start = versions[live if first_wave == "current" and u.version == 0 else u.version]
        batches = fed.queue.streams.take(u.client, task.steps)
        y = fed.engine.run(start[None], batches[None], [task.steps], task.lr, task.weight_decay)[0]
        buffer.append(start - y)
        if len(buffer) == task.buffer:
            versions.append(versions[-1] - task.server_lr * torch.stack(buffer).mean(0))
            buffer = []
    return versions[-1], len(versions) - 1


def test_fedast_equals_a_replay_of_its_schedule():
    tasks = [FedASTTask(lr=0.05, server_lr=0.7, steps=3, requests=6, buffer=2, weight_decay=1e-3, name="a"),
             FedASTTask(lr=0.1, server_lr=0.4, steps=2, requests=4, buffer=3, name="b")]
    out = run_fedast([federation(0), federation(1)], tasks, pool([0.15, 0.23]), total_time=12, eval_every=4,
                     cap=8, seed=5)
    schedule = out["schedule"]
    assert max(u.staleness for u in schedule.updates) >= 1          # stale updates were exercised
    for m, task in enumerate(tasks):
        model, steps = replay(schedule, task, m, federation(m))
        assert steps == out["tasks"][m]["server_steps"] == len(schedule.server_steps[m]) > 3
        torch.testing.assert_close(out["tasks"][m]["model"], model, rtol=1e-10, atol=1e-12)
        uploads = sum(u.task == m for u in schedule.updates)
        assert out["tasks"][m]["uploads"] == uploads and out["tasks"][m]["client_steps"] == uploads * task.steps
        assert out["tasks"][m]["curve"]["time"] == [0, 4, 8, 12]



@pytest.mark.parametrize("cap_first", [True, False])
def test_the_plan_of_a_run_is_its_own_count_of_client_steps(cap_first):
    """No task reaches a target: the schedule without training holds every arrival the run counts."""
    tasks = [FedASTTask(lr=0.05, server_lr=0.7, steps=3, requests=6, buffer=2, name="a"),
             FedASTTask(lr=0.1, server_lr=0.4, steps=2, requests=4, buffer=3, name="b")]
    out = run_fedast([federation(0), federation(1)], tasks, pool([0.15, 0.23]), total_time=12, eval_every=4,
                     cap=8, seed=5, cap_first=cap_first)
    plan = plan_fedast(pool([0.15, 0.23]), tasks, 12, cap=8, seed=5, cap_first=cap_first)
    assert plan == [t["client_steps"] for t in out["tasks"]] and min(plan) > 0

@pytest.mark.parametrize("first_wave", ["paper", "current"])
def test_the_first_wave_trains_from_x0_or_from_the_model_live_at_its_start(first_wave):
    """A single task whose first requests queue behind each other on few clients: with the paper's first wave they
    train from x^(0); with the code's, those started after an aggregation train from the model it made."""
    task = FedASTTask(lr=0.05, server_lr=0.7, steps=2, requests=30, buffer=2, name="a")
    out = run_fedast([federation(0)], [task], pool([0.15]), total_time=6, eval_every=2, cap=None, seed=2,
                     cap_first=False, first_wave=first_wave)
    schedule = out["schedule"]
    late = [u for u in schedule.updates if u.version == 0 and u.start > schedule.server_steps[0][0]]
    assert late                                                      # the case the two settings differ on
    model, steps = replay(schedule, task, 0, federation(0), first_wave)
    assert steps == out["tasks"][0]["server_steps"] > 2
    torch.testing.assert_close(out["tasks"][0]["model"], model, rtol=1e-10, atol=1e-12)
    other, _ = replay(schedule, task, 0, federation(0), {"paper": "current", "current": "paper"}[first_wave])
    assert not torch.allclose(out["tasks"][0]["model"], other)


@pytest.mark.parametrize("first_wave", ["paper", "code", "current"])
def test_the_first_wave_on_a_hand_made_schedule(first_wave):
    """Four version-0 requests, the authors' loop popping two at a time (issue 52): the paper's first wave trains
    all four from x^(0); the code's trains the second batch (popped at 3, after the aggregation at 2) from the
    aggregated model; afl's earlier reading ("current") trains each from the model live when its client started it
    (client 2 at 2.5: the aggregated one; client 3 at 0: x^(0))."""
    task = FedASTTask(lr=0.05, server_lr=0.7, steps=2, requests=4, buffer=2, weight_decay=1e-3, name="a")
    server = FedASTServer([federation(0)], [task], total_time=10, eval_every=10, first_wave=first_wave)
    server.bind(PoolControl([task.pool_task()]))
    sends = {0: (0.0, 1.0), 1: (0.0, 2.0), 2: (2.5, 3.0), 3: (0.0, 4.0)}          # client: (start, end)
    for c, (start, end) in sends.items():
        server.on_request(0, c, 0.0, start, end)
    for pop, batch_end, clients in ((1.0, 2.0, (0, 1)), (3.0, 4.0, (2, 3))):
        server.on_pop(pop, batch_end)
        for c in clients:
            server.on_update(0, c, sends[c][1])
        server.on_server_step(0, batch_end, None)
    ref = federation(0)
    batches = {c: ref.queue.streams.take(c, task.steps) for c in sends}

    def step(w, starts):
        ys = [ref.engine.run(s[None], batches[c][None], [task.steps], task.lr, task.weight_decay)[0]
              for c, s in starts.items()]
        return w - task.server_lr * torch.stack([s - y for s, y in zip(starts.values(), ys)]).mean(0)
    x0 = ref.init.clone()
    w1 = step(x0, {0: x0, 1: x0})
    starts = {"paper": {2: x0, 3: x0}, "code": {2: w1, 3: w1}, "current": {2: w1, 3: x0}}[first_wave]
    torch.testing.assert_close(server.w[0], step(w1, starts), rtol=1e-10, atol=1e-12)


def test_the_code_s_first_wave_runs_on_the_pool_and_differs_from_the_papers():
    """On a real schedule the code's first wave trains late first-wave requests from aggregated models."""
    task = FedASTTask(lr=0.05, server_lr=0.7, steps=2, requests=30, buffer=2, name="a")
    models = {wave: run_fedast([federation(0)], [task], pool([0.15]), total_time=6, eval_every=2, seed=2,
                               cap_first=False, first_wave=wave)["tasks"][0]["model"] for wave in ("paper", "code")}
    assert not torch.allclose(models["paper"], models["code"])


def test_fedast_learns():
    data = make_synthetic(n_train=2000, n_test=400, shape=(1, 28, 28), num_classes=4, seed=0, noise=1.0)
    fed = make_federation(data, "mlp32", N, batch_size=16, seed=0)
    out = run_fedast([fed], [FedASTTask(lr=0.05, server_lr=1.0, steps=5, requests=8, buffer=2)], pool([0.2]),
                     total_time=40, eval_every=10)
    acc = out["tasks"][0]["curve"]["accuracy"]
    assert acc[-1] > acc[0] + 0.3


@pytest.mark.parametrize("make, name", [
    (lambda: FedASTTask(lr=0.0), "lr"), (lambda: FedASTTask(lr=0.1, buffer=0), "buffer"),
    (lambda: run_fedast([federation()], [FedASTTask(0.1), FedASTTask(0.1)], pool([0.1, 0.1]), 5, 1), "feds"),
    (lambda: run_fedast([make_federation(DATA, "mlp32", 10, batch_size=8)], [FedASTTask(0.1)], pool([0.1]), 5, 1),
     "feds")])
def test_bad_input_names_the_parameter(make, name):
    with pytest.raises(ParameterError, match=name):
        make()


def test_normalized_variance_is_algorithm_4():
    d = torch.tensor([[1.0, 0.0], [3.0, 0.0], [2.0, 2.0], [2.0, -2.0]], dtype=torch.float64)
    # mean (2, 0); squared distances 1, 1, 4, 4 -> mean 2.5; / ||mean||^2 = 4
    assert fedast_module.normalized_variance(d) == pytest.approx(2.5 / 4)
    assert fedast_module.normalized_variance(7 * d) == pytest.approx(2.5 / 4)          # scale-free
    with pytest.raises(ParameterError, match="deltas"):
        fedast_module.normalized_variance(d[:1])


def test_the_papers_realloc_splits_in_exact_proportion_the_codes_in_chunks():
    """Eq. (3): R_m proportional to the weights, whole requests by largest remainders; the code's chunks of 32 leave
    a 43/57 split of 192 at 96/96."""
    assert fedast_module.allocate_proportional(192, [43, 57]) == [83, 109]
    assert fedast_module.allocate_chunks(192, [43, 57]) == [96, 96]
    out = fedast_module.allocate_proportional(384, [1.0, 3.0, 0.0, 2.0])
    assert sum(out) == 384 and out == [64, 191, 1, 128]                    # one request at least while active
    assert fedast_module.allocate_proportional(16, [1, 2], [True, False]) == [16, 0]
    assert fedast_module.Realloc("paper").allocate(192, [43, 57], [True, True]) == [83, 109]
    assert fedast_module.Realloc("code").allocate(192, [43, 57], [True, True]) == [96, 96]


def test_allocate_chunks_follows_the_codes_greedy_rule():
    from afl.theory.fedast import realloc_optimum
    assert fedast_module.allocate_chunks(384, [1, 1, 1, 1]) == [96, 96, 96, 96]
    out = fedast_module.allocate_chunks(384, [1.0, 3.0, 0.0, 2.0])
    assert sum(out) == 384 and min(out) >= 32 and out[1] == max(out) and out[2] == 32
    real = realloc_optimum(384, [1.0, 9.0, 0.0, 4.0], 1, 1, 1)           # weights 1, 3, 0, 2 (sqrt of these)
    assert np.all(np.abs(np.array(out) - real) <= 32 + 1e-9)             # within one chunk of the real optimum
    assert fedast_module.allocate_chunks(384, [1, 5, 2, 2], active=[True, False, True, True])[1] == 0
    with pytest.raises(ParameterError, match="total"):
        fedast_module.allocate_chunks(64, [1, 1, 1])


# -- option D, targets and the synchronous baselines ------------------------------------------------------------

def two_task_run(realloc=None, targets=(None, None), total_time=30.0, seed=3, b_server_lr=0.5):
    tasks = [FedASTTask(lr=0.05, server_lr=0.5, steps=3, requests=8, buffer=2, name="a", target=targets[0]),
             FedASTTask(lr=0.05, server_lr=b_server_lr, steps=3, requests=8, buffer=2, name="b", target=targets[1])]
    return run_fedast([federation(0), federation(1)], tasks, pool([0.1, 0.2]), total_time=total_time, eval_every=1,
                      cap=16, seed=seed, realloc=realloc)


def test_realloc_moves_requests_in_chunks_within_the_budget():
    out = two_task_run(fedast_module.Realloc("paper", window=4, warmup=2, chunk=2), b_server_lr=2.0)
    s = out["schedule"]
    assert len(out["reallocations"]) >= 2 and len(s.allocations) >= 2
    for _, alloc in s.allocations:
        assert sum(alloc) == 16 and all(r % 2 == 0 and r >= 2 for r in alloc)
    t, variance = out["reallocations"][0]
    w = fedast_module.realloc_weights(variance, [0.5, 2.0], 0.05, 3, "paper")
    # the first reallocation follows Algorithm 3 on the variances it measured
    first = next(a for tt, a in s.allocations if tt == t)
    assert list(first) == fedast_module.allocate_chunks(16, w, 2)


def test_code_variant_sets_buffers_from_active_requests():
    out = two_task_run(fedast_module.Realloc("code", window=4, warmup=2, chunk=4))
    schedule = out["schedule"]
    assert len(out["reallocations"]) >= 1
    # buffer = ceil(active / chunk): with at most 16 requests out, at most 4 updates per server step
    steps = [len(schedule.server_steps[m]) for m in range(2)]
    uploads = [sum(u.task == m for u in schedule.updates) for m in range(2)]
    assert all(st * 1 <= up for st, up in zip(steps, uploads))


def test_a_task_that_reaches_its_target_stops_and_frees_its_requests():
    out = two_task_run(targets=(0.05, None))             # task a reaches 5 % at once
    s = out["schedule"]
    a = out["tasks"][0]
    assert a["target_reached_at"] == 0 and s.finished_at[0] is not None and s.finished_at[1] is None
    assert s.allocations[-1][1] == (0, 16)              # its 8 requests went to task b
    assert all(u.end <= s.finished_at[0] for u in s.updates if u.task == 0)
    assert all(c[0] == 0 for c in s.cancelled) and len(s.cancelled) >= 1
    assert out["tasks"][1]["curve"]["time"][-1] == 30


def test_a_task_reaches_its_target_at_the_aggregation_that_makes_it():
    """Tested after every aggregation, as Sync-ST is: the time to the target is a server step's own time, not the
    evaluation grid's next point, and nothing of the task arrives after it."""
    out = two_task_run(targets=(0.4, None))
    s, a = out["schedule"], out["tasks"][0]
    assert a["target_reached_at"] is not None and a["target_reached_at"] in s.server_steps[0]
    assert a["target_reached_at"] % 1 != 0                # off the grid (eval_every = 1)
    assert s.finished_at[0] == a["target_reached_at"] and s.server_steps[0][-1] == a["target_reached_at"]
    # the task ends with the model that reached: its test is kept, and the grid's last evaluation came before it
    assert a["target_reached_accuracy"] == federation(0).engine.evaluate(a["model"])["accuracy"] >= 0.4
    assert a["curve"]["accuracy"][-1] < 0.4


def test_realloc_settings_are_checked():
    with pytest.raises(ParameterError, match="variant"):
        fedast_module.Realloc("sqrt")
    with pytest.raises(ParameterError, match="window"):
        fedast_module.Realloc(window=1)
