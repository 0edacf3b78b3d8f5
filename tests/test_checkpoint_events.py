"""Checkpoints inside event-driven runs (FAVAS, QuAFL, FedBuff, QAFeL, FedAsync, CA2FL, FADAS, FedAvg on the
slowest client's clock): a run stopped by the command's time limit between two events and started again from its
checkpoint gives exactly the run that never stopped -- with clients still training (their pending jobs), a buffer
half full, a server step still to wake, stochastic quantizers and dropout."""
import pytest
import torch

import afl.deadline
from afl.algorithms import make_federation, run_algorithm
from afl.data import make_synthetic
from afl.deadline import TimeLimit
from afl.errors import ParameterError
from test_checkpoint import same_run as same_rounds_run
from test_rounds import CASES as ROUND_CASES, K, LR, algorithm_of, federation

TOTAL, EVERY = 60.0, 10.0
CASES = {
    "favas": dict(s=2, server_interval=3.0),
    "favas-variance": dict(s=2, server_interval=3.0, track_variance=True),
    "quafl": dict(s=2, server_interval=3.0, quantizer="sr:4"),
    "fedbuff": dict(Z=2, concurrency=4, server_time=1.5, server_momentum=0.5),
    "fedbuff-all-clients": dict(Z=2),
    "qafel": dict(Z=2, arrival_rate=1.5, server_time=0.0, client_quantizer="sr:4", server_quantizer="qsgd:4"),
    "fedasync": dict(concurrency=3, rho=0.1, mixing="poly:0.5"),
    "ca2fl": dict(Z=2, concurrency=4),
    "fadas": dict(Z=2, concurrency=4),
    "fedavg": dict(s=2, timing="slowest", server_time=1.0),
}


def algorithm(case):
    return case.split("-")[0]


def run(case, fed=None, **kw):
    return run_algorithm(algorithm(case), fed or federation(), total_time=TOTAL, eval_every=EVERY, K=K, lr=LR,
                         **CASES[case], **kw)


def stop_after(monkeypatch, events):
    """The command's time limit passes at the ``events``-th event of the run."""
    monkeypatch.setattr(afl.deadline, "passed", lambda calls=iter(range(10 ** 9)): next(calls) >= events)


def same_run(a, b):
    """:func:`test_checkpoint.same_run`, and the same timeline and schedule parameters."""
    same_rounds_run(a, b)
    assert a["schedule"].timeline.intervals == b["schedule"].timeline.intervals
    assert a["schedule"].params == b["schedule"].params


@pytest.mark.parametrize("case", list(CASES))
def test_an_event_driven_run_resumed_from_its_checkpoint_is_the_run_that_never_stopped(case, tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    calls = []
    monkeypatch.setattr(afl.deadline, "passed", lambda: calls.append(1) and False)
    whole = run(case)
    assert len(calls) >= 10                                       # one look at the limit per event
    stop_after(monkeypatch, len(calls) // 2)
    with pytest.raises(TimeLimit):
        run(case, checkpoint=path, checkpoint_every=3600)         # not due: saved because the limit passed
    assert path.is_file()
    saved = torch.load(path, weights_only=False)["state"]
    if case.startswith(("fedbuff", "qafel", "fedasync", "ca2fl", "fadas")):
        assert saved["learner"]["queue"]["jobs"]                  # clients were training when it stopped
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    resumed = run(case, checkpoint=path)
    same_run(resumed, whole)
    assert len(resumed["resumed_at"]) == 1 and 0 < resumed["resumed_at"][0] < TOTAL
    assert not path.exists()


def test_a_run_stopped_twice_and_saved_at_every_event_is_the_same_run(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    whole = run("qafel")
    for events in (11, 17):
        stop_after(monkeypatch, events)
        with pytest.raises(TimeLimit):
            run("qafel", checkpoint=path, checkpoint_every=0)
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    resumed = run("qafel", checkpoint=path, checkpoint_every=0)
    same_run(resumed, whole)
    assert len(resumed["resumed_at"]) == 2


def test_dropout_runs_resume_with_the_masks_they_would_have_drawn(tmp_path, monkeypatch):
    """A pending job keeps the dropout seed it was submitted with: the masks after the restart are the same."""
    data = make_synthetic(96, 32, shape=(3, 32, 32), num_classes=2, seed=0).to("cpu", torch.float64)

    def fed():
        return make_federation(data, "celeba-cnn", 6, "iid", batch_size=4, seed=1, dtype=torch.float64,
                               model_kw={"variant": "fedbuff", "dropout": 0.5, "norm_groups": 4})
    assert fed().engine.model.random
    kw = dict(total_time=30.0, eval_every=10.0, K=2, lr=0.05, Z=2, concurrency=4)
    whole = run_algorithm("fedbuff", fed(), **kw)
    path = tmp_path / "run.ckpt"
    stop_after(monkeypatch, 9)
    with pytest.raises(TimeLimit):
        run_algorithm("fedbuff", fed(), **kw, checkpoint=path)
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    same_run(run_algorithm("fedbuff", fed(), **kw, checkpoint=path), whole)


def test_a_checkpoint_of_another_event_driven_run_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    stop_after(monkeypatch, 5)
    with pytest.raises(TimeLimit):
        run("fedbuff", checkpoint=path)
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    with pytest.raises(ParameterError, match="checkpoint.*another run"):
        run("ca2fl", checkpoint=path)


@pytest.mark.parametrize("case", [c for c in ROUND_CASES if c != "fedavg"])
def test_every_method_on_rounds_of_the_slowest_client_resumes_mid_round(case, tmp_path, monkeypatch):
    """Rounds that end with their slowest client: a checkpoint between two clients' deliveries holds the round's
    pending jobs, with their corrections and per-client state (SCAFFOLD's controls, FedDyn's, MIME's)."""
    kw = dict(ROUND_CASES[case][0], K=K, lr=LR, s=2, timing="slowest", server_time=1.0)
    name = algorithm_of(case)
    whole = run_algorithm(name, federation(), total_time=TOTAL, eval_every=EVERY, **kw)
    path = tmp_path / "run.ckpt"
    stop_after(monkeypatch, 7)
    with pytest.raises(TimeLimit):
        run_algorithm(name, federation(), total_time=TOTAL, eval_every=EVERY, **kw, checkpoint=path)
    assert torch.load(path, weights_only=False)["state"]["learner"]["queue"]["jobs"]
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    same_run(run_algorithm(name, federation(), total_time=TOTAL, eval_every=EVERY, **kw, checkpoint=path), whole)


# -- several models on one pool: FedAST (its own event loop) and Sync-ST (its rounds) -------------------------------
def _same_tasks(a, b):
    for x, y in zip(a["tasks"], b["tasks"]):
        torch.testing.assert_close(x["model"], y["model"], rtol=0, atol=0)
        assert x["curve"] == y["curve"] and x["target_reached_at"] == y["target_reached_at"]


@pytest.mark.parametrize("kw", [dict(first_wave="paper"), dict(first_wave="code", cap_first=False),
                                dict(first_wave="current", realloc="code"), dict(realloc="paper")])
def test_a_fedast_run_resumed_from_its_checkpoint_is_the_run_that_never_stopped(kw, tmp_path, monkeypatch):
    """Requests out with their models (first waves waiting for theirs), buffers half full, a finished task (its
    target reached), Realloc's estimates and allocations are all in the checkpoint."""
    from afl.algorithms.fedast import FedASTTask, Realloc, run_fedast
    from test_fedast import federation as fedast_federation, pool
    realloc = kw.get("realloc")
    if realloc is not None:
        kw = dict(kw, realloc=Realloc(realloc, window=3, period=0.5, warmup=1, chunk=2))
    tasks = [FedASTTask(lr=0.05, server_lr=0.7, steps=3, requests=6, buffer=2, name="a",
                        target=None if realloc else 0.7),
             FedASTTask(lr=0.1, server_lr=0.4, steps=2, requests=4, buffer=3, name="b")]

    def run(**more):
        return run_fedast([fedast_federation(0), fedast_federation(1)], tasks, pool([0.15, 0.23]), total_time=12,
                          eval_every=4, cap=8, seed=5, **kw, **more)
    calls = []
    monkeypatch.setattr(afl.deadline, "passed", lambda: calls.append(1) and False)
    whole = run()
    if realloc:                                   # the cases the checkpoint must carry
        assert len(whole["reallocations"]) > 5
    else:
        assert whole["schedule"].finished_at[0] is not None
    path = tmp_path / "run.ckpt"
    stop_after(monkeypatch, len(calls) // 2)
    with pytest.raises(TimeLimit):
        run(checkpoint=path)
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    resumed = run(checkpoint=path)
    _same_tasks(resumed, whole)
    a, b = resumed["schedule"], whole["schedule"]
    assert a.updates == b.updates and a.allocations == b.allocations and a.finished_at == b.finished_at
    assert resumed["reallocations"] == whole["reallocations"] and not path.exists()


@pytest.mark.parametrize("selection", ["uniform", "ucb", "bayes"])
def test_a_sync_st_run_resumed_from_its_checkpoint_is_the_run_that_never_stopped(selection, tmp_path, monkeypatch):
    from afl.algorithms.fedast import FedASTTask
    from afl.algorithms.sync_st import run_sync_st
    from test_sync_st import federation as sync_federation, pool
    tasks = [FedASTTask(lr=0.05, server_lr=1.0, steps=3, requests=6, name="a", target=0.3),
             FedASTTask(lr=0.1, server_lr=1.0, steps=2, requests=4, name="b")]

    def run(**more):
        return run_sync_st([sync_federation(0), sync_federation(1)], tasks, pool([0.1, 0.2]), total_time=20,
                           eval_every=5, cap=8, first_k=3, selection=selection, seed=1, **more)
    whole = run()
    path = tmp_path / "run.ckpt"
    stop_after(monkeypatch, 4)
    with pytest.raises(TimeLimit):
        run(checkpoint=path)
    monkeypatch.setattr(afl.deadline, "passed", lambda: False)
    resumed = run(checkpoint=path)
    _same_tasks(resumed, whole)
    assert len(whole["schedule"]["round_ends"]) > 4
    assert resumed["schedule"]["round_ends"] == whole["schedule"]["round_ends"]
    assert resumed["schedule"]["finished_at"] == whole["schedule"]["finished_at"] and not path.exists()
