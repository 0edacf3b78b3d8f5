"""Fleets (afl.fleet): many runs trained together give what the runs give one by one; failures stay alone.

The federations are float64 (tests/reference.py), so that the bigger batched kernels of a fleet round no
ReLU differently from the one-by-one runs and the curves agree to 1e-9.
"""
import io
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import torch

import afl.jobs
from afl import deadline
from afl.algorithms import register, run_algorithm
from afl.algorithms.fedavg import FedAvg, FedAvgSettings
from afl.algorithms.registry import REGISTRY, synchronous
from afl.errors import ParameterError
from afl.fleet import (Outcome, attempt, chunks, process_parts, process_threads, run_fleet, run_in_processes,
                       run_one_by_one)
from afl.repro.runner import how_computed
from afl.results import RunProgress, report_progress
from reference import RUN, TIME, federation

TOL = dict(rtol=1e-9, atol=1e-10)


@dataclass(frozen=True)
class HeavyBall:
    """Local heavy-ball momentum as a correction hook: m <- beta m + d, step along m. Equal hooks batch."""

    beta: float

    def __call__(self, t, w, d, w0, state):
        return state["m"].mul_(self.beta).add_(d)


class MomentumFedAvg(FedAvg):
    """FedAvg whose clients train with local momentum (a hook with per-job state)."""

    def on_start(self, client, t):
        self.jobs[client] = self.queue.submit(client, self.w, self.K, self.lr, hook=HeavyBall(0.9),
                                              state={"m": torch.zeros_like(self.w)})


@pytest.fixture
def momentum_fedavg():
    register("momentum-fedavg", FedAvgSettings, MomentumFedAvg, synchronous, "FedAvg with local momentum (test)")
    yield "momentum-fedavg"
    REGISTRY.pop("momentum-fedavg")


def simulate(name, seed, **kw):
    out = run_algorithm(name, federation(seed=seed), **TIME, **{**RUN.get(name, RUN["fedavg"]), **kw})
    return out["curve"], out["model"], out["computed_client_steps"]


def assert_same(a, b):
    (curve_a, model_a, steps_a), (curve_b, model_b, steps_b) = a, b
    assert curve_a.keys() == curve_b.keys() and steps_a == steps_b
    for key in curve_a:
        assert curve_a[key] == pytest.approx(curve_b[key], rel=1e-9, abs=1e-10), key
    torch.testing.assert_close(model_a, model_b, **TOL)


def test_fleet_equals_one_by_one_and_batches_across_runs(momentum_fedavg, monkeypatch):
    runs = [(name, seed) for name in ("favas", "fedbuff", momentum_fedavg) for seed in (0, 1)]
    alone = {run: simulate(*run) for run in runs}
    calls, real = [], afl.jobs._train

    def spy(jobs):
        calls.append(({id(j._queue) for j in jobs}, {j.hook for j in jobs}))
        real(jobs)
    monkeypatch.setattr(afl.jobs, "_train", spy)
    outcomes = run_fleet([(run, lambda run=run: simulate(*run)) for run in runs])
    assert [o.key for o in outcomes] == runs and all(o.ok for o in outcomes)
    for o in outcomes:
        assert_same(o.value, alone[o.key])
    assert max(len(queues) for queues, _ in calls) >= 4       # one engine call trained several runs' jobs,
    assert max(len(hooks) for _, hooks in calls) == 2         # those with and without the momentum hook together


def test_mime_in_a_fleet_equals_one_by_one_and_its_full_gradients_share_calls(monkeypatch):
    """MIME's round starts with the sampled clients' full-batch gradients: in a fleet, one call for all runs."""
    kw = dict(K=3, lr=0.05, s=3, timing="rounds", total_time=4, eval_every=2)
    runs = [(name, seed) for name in ("mime", "mimemom") for seed in (0, 1)]
    alone = {run: run_algorithm(run[0], federation(seed=run[1]), **kw) for run in runs}
    calls, real = [], afl.jobs._full_gradients

    def spy(requests):
        calls.append(len(requests))
        real(requests)
    monkeypatch.setattr(afl.jobs, "_full_gradients", spy)
    outcomes = run_fleet([(run, lambda run=run: run_algorithm(run[0], federation(seed=run[1]), **kw))
                          for run in runs])
    assert all(o.ok for o in outcomes)
    for o in outcomes:
        assert o.value["curve"]["accuracy"] == pytest.approx(alone[o.key]["curve"]["accuracy"], rel=1e-9)
        torch.testing.assert_close(o.value["model"], alone[o.key]["model"], **TOL)
    assert calls == [4] * 4                                   # 4 rounds, each one call for the 4 runs


def test_fleet_size_bounds_the_live_runs():
    live, most = set(), []

    def task(i):
        live.add(i)
        most.append(len(live))
        out = simulate("fedavg", i)
        live.discard(i)
        return out
    outcomes = run_fleet([(i, lambda i=i: task(i)) for i in range(5)], size=2)
    assert max(most) == 2 and all(o.ok for o in outcomes)
    assert_same(outcomes[4].value, simulate("fedavg", 4))


def test_a_failing_run_fails_alone_with_its_error():
    def nan_lr():                      # fails inside an engine call shared with the other runs' jobs
        fed = federation(seed=3)
        return fed.queue.submit(0, fed.init, 2, float("nan")).result()
    tasks = [("favas", lambda: simulate("favas", 0)),
             ("s > n", lambda: simulate("favas", 1, s=99)),
             ("nan lr", nan_lr),
             ("fedbuff", lambda: simulate("fedbuff", 2))]
    seen = []
    outcomes = run_fleet(tasks, on_outcome=lambda o: seen.append(o.key))
    assert sorted(seen) == sorted(k for k, _ in tasks)
    errors = {o.key: o.error for o in outcomes}
    assert isinstance(errors["s > n"], ParameterError) and "s=99" in str(errors["s > n"])
    assert isinstance(errors["nan lr"], ParameterError) and "lr" in str(errors["nan lr"])
    assert_same(outcomes[0].value, simulate("favas", 0))
    assert_same(outcomes[3].value, simulate("fedbuff", 2))
    assert [o.ok for o in run_one_by_one(tasks)] == [True, False, False, True]


def test_runs_move_the_grid_bar_as_their_simulated_time_advances(monkeypatch):
    """A long run shows its progress: each server step reports the fraction of the run's simulated time whose steps
    are done (not only the evaluations, which may lie many minutes apart; not the step about to train)."""
    seen = []
    progress = RunProgress(3, enabled=False)
    monkeypatch.setattr(progress, "advance", lambda key, fraction, resumed: seen.append((key, fraction, resumed)))
    with progress:
        outcomes = run_fleet([(key, lambda seed=seed: simulate("fedavg", seed)) for seed, key in enumerate("ab")])
        outcomes += run_one_by_one([("c", lambda: simulate("favas", 2))])
    assert all(o.ok for o in outcomes)
    simulate("fedavg", 3)                                    # outside a grid: reports nowhere
    assert {k for k, _, _ in seen} == {"a", "b", "c"} and not any(resumed for _, _, resumed in seen)
    for key in "abc":                                        # each server step: the time done / 60
        fractions = [f for k, f, _ in seen if k == key]
        assert fractions == sorted(fractions) and fractions[-1] == 1.0
    # FAVAS's server steps every 7 units: 7, 14, ..., 56 (evaluations only at 7, 21, 42); the step at 7 is done
    # when the one at 14 begins, ..., the one at 56 when the run ends
    assert [f for k, f, _ in seen if k == "c"] == pytest.approx([7 * k / 60 for k in range(1, 8)] + [1])


def test_the_grid_bar_counts_finished_runs_and_fractions_of_live_ones():
    out = io.StringIO()
    with RunProgress(4, done=1, file=out, mininterval=0) as progress:
        progress.advance("x", 0.25)
        progress.advance("y", 0.5)
        progress.advance("x", 0.75)
        assert progress.bar.n == pytest.approx(2.25)
        progress.finished("x")
        progress.finished("z")                               # a run that failed before any report
        assert progress.bar.n == pytest.approx(3.5)
    assert "3.50/4 runs" in out.getvalue()


def test_the_grid_bar_of_runs_that_stop_at_a_target_gives_time_left_as_a_bound():
    """Runs that may stop before their end (QAFeL's, at a target): the time left is shown as at most."""
    for at_most, shown in ((True, ", at most "), (False, "<")):
        out = io.StringIO()
        with RunProgress(2, file=out, mininterval=0, at_most=at_most) as progress:
            progress.advance("x", 0.5)
        assert shown in out.getvalue().split("0.50/2 runs")[1]


def test_the_grid_bar_ends_exactly_at_its_total():
    """Fractions reported in tenths, then the runs' ends: the bar lands on the total, not float rounding past it
    (which tqdm warns of, and shows as a negative time left)."""
    with RunProgress(7, file=io.StringIO(), mininterval=0) as progress:
        for key in range(7):
            for tenth in range(1, 11):
                progress.advance(key, tenth / 10)
            progress.finished(key)
            assert progress.bar.n == key + 1


def test_ctrl_c_in_a_run_stops_the_fleet():
    def stop():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_fleet([("a", lambda: simulate("fedavg", 0)), ("b", stop)])


def test_chunks_cover_items_in_order():
    assert chunks(list(range(7)), 3) == [[0, 1], [2, 3, 4], [5, 6]]
    assert chunks([1, 2], 5) == [[1], [2]]
    with pytest.raises(ParameterError, match="fleet_size"):
        run_fleet([], size=0)


def test_ray_fleets_equal_the_local_fleet():
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'afl[ray]' runs this test")
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror (each Ray task loads it on its worker)")
    from afl.repro import favas as fr
    cfg = fr.setting("favas-table2", quick=True, n=8, s=2, Z=2, K=3, batch=8, total_time=40.0, eval_every=20.0,
                     methods=("fedavg", "fedbuff", "favas"), splits=("iid", "noniid_2of3_fast"))
    local = fr.compute_runs(cfg, seeds=2, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        spread = fr.compute_runs(cfg, seeds=2, progress=False, ray="local")
    finally:
        ray.shutdown()
    assert [fr.run_key(r) for r in spread] == [fr.run_key(r) for r in local]
    for a, b in zip(local, spread):            # two fleets instead of one: at most float rounding apart
        assert a["curve"]["loss"] == pytest.approx(b["curve"]["loss"], rel=1e-5)
        assert a["computed_client_steps"] == b["computed_client_steps"]


def square_in_this_process(key):
    report_progress(0.5, resumed=key == 6)                  # run 6 goes on from a checkpoint
    if key == 3:
        raise ParameterError("key", key, "anything but 3")
    return key * key, os.getpid()


def squares(keys, on_outcome):
    """A grid's work as run_in_processes takes it: outcomes reported as they end (module level: picklable)."""
    outcomes = []
    for key in keys:
        outcomes.append(attempt(key, lambda key=key: square_in_this_process(key)))
        on_outcome(outcomes[-1])
    return outcomes


def test_processes_report_every_run_in_order_and_a_failure_alone(monkeypatch):
    seen, halfway = [], []
    with RunProgress(7, enabled=False) as progress:                # the runs' own progress reaches this bar
        monkeypatch.setattr(progress, "advance", lambda *report: halfway.append(report))
        outcomes = run_in_processes(squares, list(range(7)), 2, on_outcome=seen.append)
    assert sorted(halfway) == [(key, 0.5, key == 6) for key in range(7)]
    assert [o.key for o in outcomes] == list(range(7)) and sorted(o.key for o in seen) == list(range(7))
    assert [o.value[0] for o in outcomes if o.ok] == [0, 1, 4, 16, 25, 36]
    assert isinstance(outcomes[3].error, ParameterError) and "key=3" in str(outcomes[3].error)
    pids = {o.value[1] for o in outcomes if o.ok}
    assert len(pids) == 2 and os.getpid() not in pids                  # interleaved parts: 0, 2, 4, 6 and 1, 3, 5
    assert {o.value[1] for o in outcomes if o.ok and o.key % 2} == {outcomes[1].value[1]}
    assert run_in_processes(squares, [], 3) == []
    with pytest.raises(ParameterError, match="processes=0"):
        run_in_processes(squares, [1], 0)


def threads_in_this_process(keys, on_outcome):
    """Each run's PyTorch thread count in its process of run_in_processes (module level: picklable)."""
    for key in keys:
        on_outcome(attempt(key, torch.get_num_threads))


def test_each_process_gets_its_share_of_the_threads(monkeypatch):
    """N processes share this process's threads (at least one each): what a result's execution names, since a
    run's rounding depends on its threads."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)          # the parent's count, as on a 4-core machine
    assert [process_threads(n) for n in (1, 2, 3, 4, 8)] == [4, 2, 1, 1, 1]
    monkeypatch.undo()
    seen = run_in_processes(threads_in_this_process, [0, 1], 2)
    assert [o.value for o in seen] == [process_threads(2)] * 2
    alone, = run_in_processes(threads_in_this_process, [0], 2)        # one run left: one process, every thread
    assert alone.value == process_threads(1) == torch.get_num_threads()


def test_a_result_names_the_threads_its_processes_had(monkeypatch):
    """What compute spread, not what was asked: 2 runs left of 6 in 4 processes run in 2 processes of half the
    threads each; none left (all resumed), no thread count."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    said = {n: how_computed(list(range(n)), fleet=True, fleet_size=None, ray=None, processes=4) for n in (6, 2, 1, 0)}
    assert said == {6: "in 4 processes of 1 thread, each a fleet", 2: "in 4 processes of 2 threads, each a fleet",
                    1: "in 4 processes of 4 threads, each a fleet", 0: "in 4 processes, each a fleet"}
    assert how_computed([0], fleet=False, fleet_size=None, ray=None, processes=None) == "one by one"
    assert how_computed([0], fleet=True, fleet_size=8, ray=None, processes=1) == "as one fleet of at most 8 live runs"


def test_the_parts_of_the_processes_interleave_and_none_is_empty():
    assert process_parts(list(range(7)), 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert process_parts([0, 1], 4) == [[0], [1]] and process_parts([], 2) == []
    with pytest.raises(ParameterError, match="processes=0"):
        process_parts([1], 0)


def broken_grid(keys, on_outcome):
    raise ValueError("this grid cannot start")


def dying_grid(keys, on_outcome):
    if keys == [1]:
        os._exit(3)                                  # as a process killed for memory: no outcome, no traceback
    squares(keys, on_outcome)


def stopping_grid(keys, on_outcome):
    """Process 0's run stops at the time limit; process 1's ends past it, with many progress reports on the way, as
    a run that was in its last round (module level: picklable)."""
    while not deadline.passed():
        time.sleep(0.01)
    if keys == [0]:
        raise deadline.TimeLimit("the time limit stopped run 0")
    time.sleep(1.0)                                  # after process 0 has told the parent that it stopped

    def last_round():
        for step in range(20_000):                   # more than a pipe holds: the parent must go on reading
            report_progress(step / 20_000)
        return "finished"
    on_outcome(attempt(1, last_round))


@contextmanager
def hang_guard(seconds: float = 60.0):
    """An AssertionError if the block still runs ``seconds`` later (a deadlock found, not a speed measured)."""
    def hung(signum, frame):
        raise AssertionError(f"still waiting {seconds:g} s later")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        deadline.clear()


def test_a_run_that_ends_after_another_process_stopped_is_kept(monkeypatch):
    """At the time limit every process is heard to its end: a run finishing in one process after another has
    stopped is reported (not lost), and the parent neither waits on a process blocked on its unread reports nor
    raises before all have stopped."""
    monkeypatch.setenv(deadline.ENV, "")
    seen = []
    with hang_guard(), pytest.raises(deadline.TimeLimit):
        deadline.start(1.0)
        run_in_processes(stopping_grid, [0, 1], 2, on_outcome=seen.append)
    assert [(o.key, o.value) for o in seen] == [(1, "finished")]


def first_then_wait(keys, on_outcome):
    """Each process's first run ends; its second waits for the time limit, which no clock sets here (module level:
    picklable)."""
    on_outcome(attempt(keys[0], lambda: "finished"))
    while not deadline.passed():
        time.sleep(0.01)
    raise deadline.TimeLimit(f"the time limit stopped run {keys[1]}")


def test_a_signal_to_the_command_reaches_its_processes(monkeypatch):
    """A SIGTERM sent to the command alone (a scheduler, a kill) ends the limit there (afl.deadline.expire); the
    command passes it on, and every process stops at its runs' next step, as at the time limit."""
    monkeypatch.setenv(deadline.ENV, "")
    deadline.clear()
    seen = []

    def finished(outcome):
        seen.append(outcome)
        if len(seen) == 2:                           # both processes are at work: the command gets its signal
            deadline.expire(signal.SIGTERM)
    with hang_guard(), pytest.raises(deadline.TimeLimit):
        run_in_processes(first_then_wait, [0, 1, 2, 3], 2, on_outcome=finished)
    assert sorted(o.key for o in seen) == [0, 1]


def test_a_process_that_fails_outside_its_runs_raises_in_the_parent():
    with pytest.raises(RuntimeError, match="(?s)outside its runs.*this grid cannot start"):
        run_in_processes(broken_grid, [0, 1], 2)
    with pytest.raises(RuntimeError, match=r"ended before its runs did \(exit codes \[.*3"):
        run_in_processes(dying_grid, [0, 1], 2)


def free_gpu_memory(keys, on_outcome):
    """The GPU memory free as a process of run_in_processes starts (module level: picklable)."""
    for key in keys:
        on_outcome(attempt(key, lambda: torch.cuda.mem_get_info()[0]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the parent's cached GPU memory")
def test_processes_find_the_memory_the_parent_freed():
    free = torch.cuda.mem_get_info()[0]
    block = torch.empty(free // 2, dtype=torch.uint8, device="cuda")
    del block                                         # freed, but kept in this process's cache
    assert torch.cuda.mem_get_info()[0] < 0.6 * free
    [seen] = run_in_processes(free_gpu_memory, [0], 1)
    assert seen.value > 0.8 * free


def test_processes_equal_the_local_fleet():
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror (each process loads it)")
    from afl.repro import favas as fr
    cfg = fr.setting("favas-table2", quick=True, n=8, s=2, Z=2, K=3, batch=8, total_time=40.0, eval_every=20.0,
                     methods=("fedavg", "fedbuff", "favas"), splits=("iid", "noniid_2of3_fast"))
    local = fr.compute_runs(cfg, seeds=2, progress=False)
    spread = fr.compute_runs(cfg, seeds=2, progress=False, processes=3)
    assert [fr.run_key(r) for r in spread] == [fr.run_key(r) for r in local]
    for a, b in zip(local, spread):            # three fleets instead of one: at most float rounding apart
        assert a["curve"]["loss"] == pytest.approx(b["curve"]["loss"], rel=1e-5)
        assert a["computed_client_steps"] == b["computed_client_steps"]
    with pytest.raises(ParameterError, match="processes=2.*Ray"):
        fr.compute_runs(cfg, seeds=1, progress=False, processes=2, ray="local")


def test_engine_work_times_outermost_calls_and_restores_the_engine(monkeypatch):
    """``afl.bench.engine_work`` on a fake clock that ticks once per reading: a call's nested engine calls
    (MIME's full gradient inside a run, say) count within it, not again on their own."""
    import itertools

    from afl.bench import engine_work
    from afl.engine import LocalSGD

    def run(self):
        return self.evaluate()
    monkeypatch.setattr(LocalSGD, "run", run)
    monkeypatch.setattr(LocalSGD, "evaluate", lambda self: "evaluated")
    monkeypatch.setattr(time, "perf_counter", itertools.count().__next__)
    engine = object.__new__(LocalSGD)
    with engine_work() as (calls, seconds):
        assert engine.run() == "evaluated"           # reads 0 and 2 (the nested call's start is read 1)
        engine.evaluate()                            # reads 3 and 4
    assert calls == [engine] and seconds == {"run": 2, "evaluate": 1}
    assert LocalSGD.run is run


def test_bench_fleet_also_times_the_grid_in_processes():
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror (each process loads it)")
    from afl.bench import bench_fleet
    tiny = dict(n=8, s=2, Z=2, K=3, batch=8, total_time=40.0, eval_every=20.0, methods=("fedavg", "favas"),
                splits=("iid", "noniid_2of3_fast"))
    row = bench_fleet("favas-table2", seeds=1, overrides=tiny, processes=2)
    assert row["processes"] == 2 and row["processes_failed_runs"] == 0 and row["runs"] == 4
    assert row["processes_speedup"] == pytest.approx(row["sequential_s"] / row["processes_s"])
    assert row["processes_max_final_accuracy_gap"] < 0.05


def test_favas_fig2_variance_is_the_same_in_a_fleet(monkeypatch, tmp_path):
    """Fig. 2 measures the local models' spread through extra jobs at every evaluation; a fleet batches them."""
    import json

    from afl.data import make_synthetic
    from afl.repro import favas as fr
    data = make_synthetic(400, 80, shape=(1, 28, 28), num_classes=10, seed=0)
    monkeypatch.setattr(fr, "load_dataset", lambda *a, **k: data)
    kw = dict(quick=True, progress=False, n=8, s=2, Z=2, K=3, batch=8, total_time=40.0, eval_every=20.0,
              methods=("favas", "quafl"), model="mlp32")
    runs = {}
    for fleet in (True, False):
        path = fr.run_experiment("favas-fig2", out=tmp_path / str(fleet), fleet=fleet, **kw)[0]
        runs[fleet] = json.loads(path.read_text())["runs"]
    assert [fr.run_key(r) for r in runs[True]] == [fr.run_key(r) for r in runs[False]]
    for a, b in zip(runs[True], runs[False]):        # float32: the fleet's bigger kernels round differently
        assert a["curve"]["variance"] == pytest.approx(b["curve"]["variance"], rel=1e-4)
        assert a["curve"]["loss"] == pytest.approx(b["curve"]["loss"], rel=1e-4)
        assert a["computed_client_steps"] == b["computed_client_steps"]


def test_the_grid_bar_does_not_count_head_starts_as_speed():
    """Runs done before (``done``) and a resumed run's jump to its checkpoint move the bar but not its speed: tqdm
    measures speed from ``initial``, and once it has printed, from ``last_print_n``."""
    out = io.StringIO()
    with RunProgress(4, done=1, file=out, mininterval=0) as progress:
        assert (progress.bar.n, progress.bar.initial) == (1, 1)
        progress.advance("x", 0.5, resumed=True)
        assert progress.bar.n - progress.bar.initial == 0 == progress.bar.n - progress.bar.last_print_n
        progress.advance("x", 0.75)
        assert progress.bar.n == pytest.approx(1.75)
        assert progress.bar.n - progress.bar.initial == pytest.approx(0.25)
    assert "1.75/4 runs" in out.getvalue()
    with RunProgress(2, enabled=False, done=1) as progress:             # a disabled bar takes every move quietly
        progress.advance("x", 0.5, resumed=True)


def test_a_worker_whose_parent_is_gone_ends_itself(tmp_path):
    """A process started by a parent that then dies (SIGKILL) ends within seconds instead of computing on."""
    import subprocess
    import sys
    child = tmp_path / "child.pid"
    script = f"""
import os, sys, time, subprocess
code = "import os, time, pathlib; from afl.fleet import _orphan_watch; _orphan_watch(os.getppid(), 0.1); " \\
       "pathlib.Path({str(child)!r}).write_text(str(os.getpid())); time.sleep(60)"
subprocess.Popen([sys.executable, "-c", code])
time.sleep(60)
"""
    parent = subprocess.Popen([sys.executable, "-c", script])
    for _ in range(200):
        if child.exists() and child.read_text():
            break
        time.sleep(0.05)
    pid = int(child.read_text())
    parent.kill()
    parent.wait()
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        raise AssertionError("the orphaned worker still runs")


def test_an_unreachable_ray_cluster_is_an_error_in_seconds():
    from afl.fleet import _reachable
    with pytest.raises(ParameterError, match=r"ray='127.0.0.1:1'.*answers"):
        _reachable("127.0.0.1:1", timeout_s=2)
    with pytest.raises(ParameterError, match="ray='nonsense'.*host:port"):
        _reachable("nonsense")


def test_ray_tasks_hand_over_each_run_as_it_ends(monkeypatch):
    """``afl repro --ray`` saves every run as it ends: a task streams its outcomes, so the first run of a slow
    chunk arrives long before the chunk ends; an error in a task comes after the outcomes before it; the time limit
    ends no task early."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'afl[ray]' runs this test")
    from afl.fleet import run_on_ray

    def work(chunk, on_outcome):                 # a closure: Ray ships it by value
        for seconds in chunk:
            if seconds < 0:
                raise RuntimeError("a task failed")
            time.sleep(seconds)
            on_outcome(Outcome(seconds, seconds))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        arrived = {}
        outcomes = run_on_ray(work, [0.1, 4.0], fleets=1, address="local",
                              on_outcome=lambda o: arrived.setdefault(o.key, time.perf_counter()))
        assert [o.key for o in outcomes] == [0.1, 4.0]
        assert arrived[4.0] - arrived[0.1] > 3.0             # one task: its first run came back when it ended
        got = []
        with pytest.raises(RuntimeError, match="a task failed"):
            run_on_ray(work, [0.1, -1.0], fleets=1, address="local", on_outcome=got.append)
        assert [o.key for o in got] == [0.1]

        def stop_or_finish(keys, on_outcome):       # run 0 stops at the time limit, run 1 (another task) ends after
            if keys == [0]:
                deadline.check()                    # the limit reaches workers started before it was set
                on_outcome(Outcome(0, "not stopped"))
            time.sleep(2.0)
            on_outcome(Outcome(keys[0], "finished"))
        got = []                      # at the time limit: a stopped task is no error, and the others are heard out
        monkeypatch.setenv(deadline.ENV, "")
        deadline.start(0.0)
        with pytest.raises(deadline.TimeLimit):
            run_on_ray(stop_or_finish, [0, 1], fleets=2, address="local", on_outcome=got.append)
        assert [(o.key, o.value) for o in got] == [(1, "finished")]
    finally:
        deadline.clear()
        ray.shutdown()


def test_a_dropout_run_has_the_same_numbers_alone_and_in_a_fleet(monkeypatch):
    """Dropout draws its masks per engine call from a seed of the call's jobs: a run's calls must hold its own jobs
    only, else its masks (and every number after them) depend on the runs beside it (issue 52: QAFeL's curve and
    channel errors changed in a fleet of three)."""
    from afl.algorithms import make_federation
    from afl.data import make_synthetic
    data = make_synthetic(96, 32, shape=(3, 32, 32), num_classes=2, seed=0).to("cpu", torch.float64)

    def fed(seed):
        return make_federation(data, "celeba-cnn", 6, "iid", batch_size=4, seed=seed, dtype=torch.float64,
                               model_kw={"variant": "fedbuff", "dropout": 0.5, "norm_groups": 4})
    assert fed(0).engine.model.random
    kw = dict(K=2, lr=0.05, Z=2, total_time=30.0, eval_every=10.0)
    runs = [("fedbuff", 0), ("fedbuff", 1), ("qafel", 0)]
    calls, real = [], afl.jobs._train_chunk

    def spy(engine, jobs):
        calls.append(len({id(j._queue) for j in jobs}))
        real(engine, jobs)
    extra = {"qafel": dict(client_quantizer="scalar:4", server_quantizer="scalar:4")}

    def one(name, seed):
        out = run_algorithm(name, fed(seed), **kw, **extra.get(name, {}))
        return out["curve"], out["model"], out["computed_client_steps"]
    alone = {run: one(*run) for run in runs}
    monkeypatch.setattr(afl.jobs, "_train_chunk", spy)
    outcomes = run_fleet([(run, lambda run=run: one(*run)) for run in runs])
    assert all(o.ok for o in outcomes)
    for o in outcomes:
        assert_same(o.value, alone[o.key])
    assert calls and max(calls) == 1                          # each call trained one run's jobs
    assert not torch.equal(alone[("fedbuff", 0)][1], alone[("fedbuff", 1)][1])


def _queue_with_starts(model="mlp200", shape=(1, 28, 28), classes=10, kw=None):
    from afl.algorithms import make_federation
    from afl.data import make_synthetic
    data = make_synthetic(n_train=400, n_test=200, shape=shape, num_classes=classes, seed=0)
    fed = make_federation(data, model, 4, batch_size=32, seed=0, model_kw=kw or {})
    g = torch.Generator().manual_seed(1)
    return fed.queue, [fed.init + 0.01 * torch.randn(fed.init.shape, generator=g) for _ in range(3)]


def test_a_job_and_a_full_gradient_give_the_same_numbers_alone_as_in_company():
    """A lone job steps as a pair of copies of itself (``afl.engine.LocalSGD._lone``): on a CPU, PyTorch's batched
    matmuls round a batch of one otherwise (an MLP's last-layer weight gradient, (10, 32) by (32, 200), moved by
    3e-6), so a FedAST run resumed from a checkpoint, whose first call may train one job where the run that never
    stopped trained two, drifted from it. A lone full gradient (MIME's) goes as it is, and equals it in company."""
    queue, starts = _queue_with_starts()
    g = torch.Generator().manual_seed(2)
    batches = [torch.randint(0, 100, (5, 32), generator=g) for _ in range(2)]
    alone = queue.submit(0, starts[0], 5, 0.1, batches=batches[0])
    queue.flush()
    pair = [queue.submit(c, starts[c], 5, 0.1, batches=batches[c]) for c in range(2)]
    queue.flush()
    assert torch.equal(alone.result(), pair[0].result())
    parts = [torch.arange(0, 40), torch.arange(40, 90)]
    lone = queue.full_gradient(starts[0][None], parts[:1])
    queue.flush()
    both = queue.full_gradient(torch.stack(starts[:2]), parts)
    queue.flush()
    assert torch.equal(lone.value()[0], both.value()[0])


@pytest.mark.parametrize("model, shape, classes, kw", [
    ("mlp32", (1, 28, 28), 10, None), ("mlp200", (1, 28, 28), 10, None), ("lenet5", (3, 32, 32), 10, None),
    ("cnn-cifar", (3, 32, 32), 10, None), ("resnet20", (3, 32, 32), 10, None),
    ("celeba-cnn", (3, 32, 32), 2, {"variant": "fedbuff"})])
def test_a_model_evaluates_the_same_alone_as_in_company(model, shape, classes, kw):
    """Evaluations go to the engine as they come (no copy: a lone one would take twice as long), which holds only
    because their matmuls give the same numbers for one model as for several."""
    queue, starts = _queue_with_starts(model, shape, classes, kw)
    alone = queue.evaluate(starts[0])
    queue.flush()
    together = [queue.evaluate(m) for m in starts]
    queue.flush()
    assert alone.value() == together[0].value()
