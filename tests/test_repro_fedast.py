"""FedAST's experiments: task sets, method names, settings and the time-gain summary (no data needed); the
sweeps end to end on a tiny pool (with the data mirror)."""
import json
import os
import re
from dataclasses import asdict, replace

import pytest

import afl.algorithms.base as base
from afl.cli import main
from afl.errors import ParameterError
from afl.repro import fedast as fr
from afl.repro.runner import read_result, reusable_runs
from committed import ROOT
from test_checkpoint import stop_at_time_limit


def test_tasksets_and_methods_parse():
    assert fr.parse_taskset("mnist*2,cifar10-jpeg") == ["mnist", "mnist", "cifar10-jpeg"]
    assert fr.split_method("sync-st:1/2") == ("sync-st", (1.0, 2.0))
    assert fr.split_method("fedast") == ("fedast", None)
    for bad in ("fedast:1/2", "sync-st:0/1", "sync-st:a", "fedsgd"):
        with pytest.raises(ParameterError, match="methods"):
            fr.split_method(bad)
    with pytest.raises(ParameterError, match="tasksets"):
        fr.parse_taskset("imagenet")


def test_tasks_follow_the_papers_rates_and_allocations():
    cfg = fr.setting("fedast-fig7", quick=False)
    tasks = cfg.tasks(cfg.tasksets[0], "sync-st", 300, None)
    assert [t.requests for t in tasks] == [100, 84, 48, 68]                 # Fig. 7's tuned Sync-ST
    assert [t.server_lr for t in tasks] == [1.0] * 4 and tasks[0].lr == 0.2 and tasks[2].weight_decay == 3e-4
    fed = cfg.tasks(cfg.tasksets[0], "fedast", 300, None)
    assert [(t.requests, t.buffer, t.server_lr) for t in fed] == [(96, 3, 0.1)] * 3 + [(96, 6, 0.1)]
    assert [t.target for t in fed] == pytest.approx([0.93, 0.82, 0.63, 0.42])
    nobuf = cfg.tasks("mnist*3", "fedast-nobuffer", 300, None)
    assert {(t.buffer, t.server_lr) for t in nobuf} == {(1, 0.038)} and nobuf[1].name == "mnist #2"
    fig3 = fr.setting("fedast-fig3", quick=True)
    assert [t.requests for t in fig3.tasks(fig3.tasksets[0], "fedast-static", 300, None)] == [100] * 3
    assert all(t.target is None for t in fig3.tasks(fig3.tasksets[0], "fedast-static", 300, None))


def test_a_shared_budget_of_requests_splits_fig7s_384_over_the_tasks_and_scales_each_buffer():
    """Sec. 4's constant budget R = sum_m R_m: 384 requests (Fig. 7's four tasks x 96) give two tasks 192 each with
    buffers of 6, four tasks Fig. 7's own 96 and 3, six tasks 64 and 2, each task's R / b kept (Shakespeare 16);
    Sync-ST splits its clients by ratios, so its tasks are the same under any budget. It is Figs. 2 and 5's
    setting, paper and quick; Fig. 7 keeps 96 a task."""
    default = fr.setting("fedast-fig5", quick=False, total_requests=None)
    shared = fr.setting("fedast-fig5", quick=False)
    assert [fr.setting(e, quick=q).total_requests for e in ("fedast-fig2", "fedast-fig5", "fedast-fig7")
            for q in (False, True)] == [384] * 4 + [None] * 2
    for taskset, want in (("mnist*2", (192, 6)), ("mnist*4", (96, 3)), ("fashion-mnist*6", (64, 2)),
                          ("shakespeare*2", (192, 12)), ("shakespeare*6", (64, 4))):
        assert {(t.requests, t.buffer) for t in shared.tasks(taskset, "fedast-static", 300, None)} == {want}
        assert shared.tasks(taskset, "sync-st", 300, None) == default.tasks(taskset, "sync-st", 300, None)
    assert shared.tasks("mnist*4", "fedast-static", 300, None) == default.tasks("mnist*4", "fedast-static", 300, None)
    assert [t.buffer for t in shared.tasks("mnist*2", "fedast-static", 300, 3)] == [3, 3]     # a buffer given stays
    assert {t.buffer for t in shared.tasks("mnist*2", "fedast-nobuffer", 300, None)} == {1}


@pytest.mark.parametrize("kw, hint", [(dict(total_requests=100), "a multiple of the 6 tasks"),
                                      (dict(total_requests=1, tasksets=("mnist*2",)), "at least one request per task"),
                                      (dict(total_requests=384, requests=None), "None where requests is None")])
def test_a_budget_that_cannot_be_shared_is_refused_by_name(kw, hint):
    with pytest.raises(ParameterError, match=f"total_requests.*{hint}"):
        fr.setting("fedast-fig5", quick=False, **({"tasksets": ("mnist*6",)} | kw))


@pytest.mark.parametrize("kw, name", [(dict(methods=("fedavg",)), "methods"), (dict(caps=(0,)), "caps"),
                                      (dict(target_offset=0.5), "target_offset"),
                                      (dict(models=("mnist=vgg",)), "models"), (dict(tasksets=("mnist*0",)), "tasksets"),
                                      (dict(tasksets=("mnist*two",)), "tasksets='mnist\\*two'"),
                                      (dict(tasksets=("mnist*",)), "tasksets='mnist\\*'"),
                                      (dict(clients=0), "clients=0"),
                                      (dict(tasksets=("mnist",), methods=("sync-st:1/2",)),
                                       "methods='sync-st:1/2'.*one allocation per task of mnist"),
                                      (dict(tasksets=("mnist",), methods=("sync-st",), sync_allocation=(100, 84)),
                                       "sync_allocation")])
def test_bad_settings_name_the_field(kw, name):
    with pytest.raises(ParameterError, match=name):
        fr.setting("fedast-fig7", quick=True, **kw)


def run(method, seed, all_targets, per_task=(10.0, None)):
    return {"taskset": "mnist,fashion-mnist", "method": method, "cap": 300, "buffer": None, "seed": seed,
            "time_to_all_targets": all_targets,
            "tasks": [{"name": n, "reached": r, "reached_accuracy": None if r is None else 0.9, "final_accuracy": 0.9}
                      for n, r in zip(("mnist", "fashion-mnist"), per_task)]}


def test_gain_is_against_the_best_sync_allocation():
    runs = [run("fedast", 0, 60.0), run("fedast", 1, 80.0), run("sync-st", 0, 120.0), run("sync-st", 1, 120.0),
            run("sync-st:1/2", 0, 90.0), run("sync-st:1/2", 1, 110.0), run("fedast-static", 0, None),
            run("fedast-static", 1, 90.0)]
    row = fr.summarize(runs)["mnist,fashion-mnist | cap 300 | buffer own"]
    assert row["best_sync"] == "sync-st:1/2"
    assert row["fedast"]["time_to_all_targets"]["mean"] == 70.0
    assert row["gain_vs_sync"]["fedast"] == pytest.approx((100 - 70) / 100)
    assert row["fedast-static"]["time_to_all_targets"]["reached"] == "1/2"   # a missed target is not averaged in
    assert row["fedast"]["per_task"]["mnist"]["mean"] == 10.0
    assert row["gain_vs_static"] == {"fedast": pytest.approx((90 - 70) / 90)}   # App. D.6: dynamic over static


def test_a_grid_without_sync_st_compares_dynamic_with_static_only():
    runs = [run("fedast", 0, 60.0), run("fedast-code", 0, 66.0), run("fedast-static", 0, 80.0)]
    result = {"experiment": "fedast-d6", "command": "afl repro fedast-d6", "machine": "m", "execution": "e",
              "quick": False, "config": {"target_offset": 0.0, "eval_every": 5.0, "stop_at_target": True},
              "rows": fr.summarize(runs), "runs": runs}
    text = fr.markdown(result)
    assert "Sync-ST" not in text
    assert "| FedAST (dynamic, Realloc as in the code) | 66 (1/1) | 10 (1/1) | – | 17.5 % |" in text
    assert "Final test accuracy (%, mean over seeds; a task stopped at its target ends with the model that" in text


def test_a_result_written_before_the_reaching_test_was_kept_says_its_accuracy_is_the_grids():
    """Earlier results hold, for a task stopped at its target, the last grid evaluation (before the aggregation
    that reached): their table says so rather than calling it the accuracy at the target."""
    runs = [run("fedast", 0, 60.0), run("fedast-static", 0, 80.0)]
    for r in runs:
        for t in r["tasks"]:
            del t["reached_accuracy"]
    result = {"experiment": "fedast-d6", "command": "afl repro fedast-d6", "machine": "m", "execution": "e",
              "quick": False, "config": {"target_offset": 0.0, "eval_every": 5.0, "stop_at_target": True},
              "rows": fr.summarize(runs), "runs": runs}
    assert "the last evaluation on the grid; a task that stopped at its target was last evaluated before" in \
        fr.markdown(result)


TINY = dict(clients=12, samples=20, steps=2, total_time=40.0, eval_every=10.0, seeds=2)


@pytest.mark.parametrize("experiment, kw, xs", [
    ("fedast-fig3", dict(tasksets=("mnist*2",), caps=(4, 12)), "caps"),
    ("fedast-fig5", dict(tasksets=("mnist*2", "mnist*3"), caps=(12,), target_offset=-0.8), "tasksets"),
    ("fedast-fig8", dict(caps=(12,), requests=4, buffers=(1, 2)), "buffers")])
def test_sweeps_run_end_to_end_and_draw_the_papers_figure(experiment, kw, xs, tmp_path):
    """Figs. 3, 5 and 8 on a tiny pool: every point of the sweep is run for every seed, and the picture plots
    the sweep (one marker per point of the x axis and method or task), not the training curves."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST and Fashion-MNIST mirrors")
    paths = fr.run_experiment(experiment, quick=True, out=tmp_path, progress=False, **TINY, **kw)
    result = json.loads(paths[0].read_text())
    cfg = result["config"]
    assert len(result["runs"]) == (cfg["seeds"] * len(cfg["methods"]) * len(cfg["tasksets"]) * len(cfg["caps"])
                                   * len(cfg["buffers"]))
    assert paths[2].stat().st_size > 10_000
    fig = fr.figure(result)
    points = [len(line.get_xdata()) for ax in fig.axes for line in ax.lines if line.get_marker() == "o"]
    assert points and all(p == len(kw[xs]) for p in points)


def test_fig5_marks_a_small_gain_to_a_tenth_and_draws_times_from_zero():
    """A gain under 1 % is printed as such (not "-0 %"), and the time axis starts at 0 so that it is not drawn
    as a gulf (one seed of two Fashion-MNIST tasks: 568.5 against 565.8)."""
    runs = [{**run(m, 0, t), "taskset": "fashion-mnist*2"} for m, t in (("fedast-static", 568.5), ("sync-st", 565.8))]
    result = {"experiment": "fedast-fig5", "quick": False, "runs": runs,
              "config": {**asdict(fr.setting("fedast-fig5", quick=False)), "seeds": 1}}
    ax = fr.figure(result).axes[0]
    assert [t.get_text() for t in ax.texts] == ["-0.5 %"]
    assert ax.get_ylim()[0] == 0


def test_a_saved_run_is_reused_only_while_its_tasks_are_unchanged():
    cfg = fr.setting("fedast-fig7", quick=True)
    saved = run("fedast", 0, 60.0)
    saved["settings"] = [asdict(t) for t in cfg.tasks(saved["taskset"], "fedast", 300, None)]
    saved = json.loads(json.dumps(saved))                               # as read back from a result file
    assert fr.same_run(saved, cfg)
    assert not fr.same_run(saved, replace(cfg, steps=5))                 # 5 local steps, not 27
    assert not fr.same_run({**saved, "method": "fedast-nobuffer"}, cfg)  # b = 1 and server lr 0.038


@pytest.mark.parametrize("method", ["fedast-static", "sync-st", "sync-st-nomit"])
def test_a_runs_plan_is_its_own_count_while_no_task_reaches_its_target(method):
    """What the GPU queue plans a run with (the schedule alone) is what the run counts, task for task, on a tiny
    pool that does not reach its targets in 25 time units."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST and Fashion-MNIST mirrors")
    cfg = fr.setting("fedast-fig7", quick=True, **TINY | dict(total_time=25.0, seeds=1), methods=(method,),
                     caps=(8,), cap_first=False)
    run = fr.compute_run(cfg, cfg.tasksets[0], method, cfg.caps[0], None, seed=1, datasets=fr.load_tasks(cfg))
    assert [t["reached"] for t in run["tasks"]] == [None, None]
    plan = fr.planned_client_steps(cfg, cfg.tasksets[0], method, cfg.caps[0], seed=1)
    assert plan == [t["client_steps"] for t in run["tasks"]] and min(plan) > 0
    with pytest.raises(ParameterError, match="method='sync-ucb'"):
        fr.planned_client_steps(cfg, cfg.tasksets[0], "sync-ucb", cfg.caps[0], seed=1)


def test_a_time_limit_inside_the_runs_and_the_same_grid_goes_on_from_their_checkpoints(tmp_path, monkeypatch):
    """FedAST's and Sync-ST's runs save their state at the time limit; the same grid goes on from it to the runs
    that never stopped (another folder's)."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror")
    from afl import deadline
    kw = dict(quick=True, progress=False, fleet=False, **dict(TINY, seeds=1), tasksets=("mnist*2",), caps=(12,))
    monkeypatch.setattr(deadline, "passed", lambda calls=iter(range(10 ** 6)): next(calls) >= 25)
    monkeypatch.setattr(base, "cpu_kind", lambda: "A")                 # the first sitting's kind of CPU
    with pytest.raises(deadline.TimeLimit):
        fr.run_experiment("fedast-fig3", out=tmp_path / "a", **kw)
    kept = list((tmp_path / "a" / "fedast-fig3.checkpoints").glob("*.ckpt"))
    assert len(kept) == 1
    monkeypatch.setattr(deadline, "passed", lambda: False)
    monkeypatch.setattr(base, "cpu_kind", lambda: "B")                 # the rest on another
    runs = {}
    for out in ("a", "b"):
        path = fr.run_experiment("fedast-fig3", out=tmp_path / out, **kw)[0]
        runs[out] = {(r["method"], r["seed"]): r for r in json.loads(path.read_text())["runs"]}
    assert runs["a"].keys() == runs["b"].keys()
    for key, run in runs["b"].items():
        assert [t["accuracy"] for t in runs["a"][key]["tasks"]] == [t["accuracy"] for t in run["tasks"]]
        assert "sitting_cpus" not in run
    assert [r.get("sitting_cpus") for r in runs["a"].values()].count(["A", "B"]) == 1     # the run that went on
    assert not (tmp_path / "a" / "fedast-fig3.checkpoints").exists()


def test_a_fedast_grid_stopped_at_its_time_limit_goes_on_to_the_runs_that_never_stopped(tmp_path, monkeypatch,
                                                                                        capsys):
    """``afl repro fedast-fig5 --time-limit``: every run of the fleet (FedAST and Sync-ST) saves its state and the
    command ends with status 3; the same command goes on to the runs of an uninterrupted folder, number for
    number, and its runs and report say they went on from a checkpoint."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror")
    argv = ["repro", "fedast-fig5", "--quick", "--seeds", "1"] + [
        x for k, v in (TINY | dict(tasksets="mnist*2", caps=12, target_offset=-0.5, seeds=None)).items()
        if v is not None for x in ("--set", f"{k}={v}")]
    stop_at_time_limit(monkeypatch, argv + ["--out", str(tmp_path / "a")], checks=40)
    err = capsys.readouterr().err
    assert "2 stopped run(s) have checkpoints" in err
    assert re.search(r"fedast-static-12-None-0 at simulated time [\d.]+; mnist\*2-sync-st-12-None-0 after round \d+, "
                     r"at simulated time [\d.]+\)", err)                 # where each stopped, read from its file
    for out in "ab":
        assert main(argv + ["--out", str(tmp_path / out)]) == 0
    resumed, whole = (json.loads((tmp_path / out / "fedast-fig5.json").read_text()) for out in "ab")
    for r, w in zip(resumed["runs"], whole["runs"]):
        assert r.pop("resumed_at") and "resumed_at" not in w
        assert [t.pop("wall_seconds") >= 0 for t in r["tasks"] + w["tasks"]] and r == w
    assert "2 of the 2 runs went on from a checkpoint" in (tmp_path / "a" / "fedast-fig5.md").read_text()


@pytest.mark.parametrize("field, value", [("first_wave", "code"), ("cap_first", False), ("total_requests", None)])
def test_reuse_takes_sync_st_runs_of_a_result_that_differs_only_in_fedasts_own_fields(field, value):
    """Sync-ST reads none of how FedAST's first requests are sent, what they train from and how many requests its
    tasks share: a probe of any takes the committed task set's Sync-ST runs (``--reuse``), never its FedAST runs,
    and nothing of another setting."""
    committed = read_result(ROOT / "results/fedast/fig5/mnist*2/fedast-fig5.json", "reuse")
    probe = fr.grid(fr.setting("fedast-fig5", False, tasksets=("mnist*2",), **{field: value}), seeds=3)
    taken = reusable_runs(committed, probe)
    assert sorted((r["method"], r["seed"]) for r in taken) == [("sync-st", s) for s in range(3)]
    assert reusable_runs(committed, fr.grid(fr.setting("fedast-fig5", False, tasksets=("mnist*2",)), seeds=3)) == \
        committed["runs"]                                                   # the same setting: every run
    other = fr.grid(fr.setting("fedast-fig5", False, tasksets=("mnist*2",), target_offset=0.01, **{field: value}))
    assert reusable_runs(committed, other) == []


def test_reuse_takes_fedast_runs_whose_tasks_a_budget_leaves_as_they_were():
    """Four tasks get 96 requests and a buffer of 3 each, shared from 384 or not: their FedAST runs are the same,
    and ``--reuse`` takes them across ``total_requests`` (two tasks' runs, 192 against 96 a task, it does not)."""
    four = read_result(ROOT / "results/fedast/fig5/mnist*4/fedast-fig5.json", "reuse")
    per_task = fr.grid(fr.setting("fedast-fig5", False, tasksets=("mnist*4",), total_requests=None), seeds=3)
    assert reusable_runs(four, per_task) == four["runs"]
    two = read_result(ROOT / "results/fedast/fig5/mnist*2/fedast-fig5.json", "reuse")
    per_task = fr.grid(fr.setting("fedast-fig5", False, tasksets=("mnist*2",), total_requests=None), seeds=3)
    assert {r["method"] for r in reusable_runs(two, per_task)} == {"sync-st"}


def test_a_probes_report_and_title_name_the_fields_it_changed():
    """A result run with a further ``--set`` says so in its report and its figure's title, against the setting it
    ran from: the quick one (``first_wave = code``) or the paper's (``cap_first=False``); the setting itself, none."""
    wave = read_result(ROOT / "results/fedast/fig2/first-wave-code/fedast-fig2.json", "probe")
    assert "Differs from the quick setting: first_wave = code (quick: paper)." in fr.markdown(wave)
    assert fr._tag(wave) == " (QUICK setting, first_wave=code)"
    dispatch = read_result(ROOT / "results/fedast/fig5/mnist*2/code-dispatch/fedast-fig5.json", "probe")
    assert fr._tag(dispatch) == " (cap_first=False)"
    assert fr._tag(read_result(ROOT / "results/fedast/fig5/mnist*2/fedast-fig5.json", "run")) == ""
    quick = read_result(ROOT / "results/fedast/fig2/fedast-fig2.json", "quick")
    assert fr._tag(quick) == " (QUICK setting)" and "Differs from the quick" not in fr.markdown(quick)
