"""Checkpoints inside a run: a run stopped after some round and started again from its checkpoint gives exactly the
run that never stopped, for every method on synchronous rounds (each keeps other state: momenta, past models,
control variates, the client store, MIME's full-batch gradients)."""
import json

import pytest
import torch

import afl.algorithms.base as base
from afl.algorithms import get, run_algorithm
from afl.checkpoint import RunCheckpoint, every_s, saved_where
from afl.cli import main
from afl.errors import ParameterError, RunsFailed
from afl.repro import ghbm as repro_ghbm
from afl.repro.runner import heading
from afl.results import RunProgress, simulating
from test_data import Planted
from test_repro_ghbm import TINY, synthetic  # noqa: F401 -- synthetic: the GHBM grid on a synthetic task
from test_rounds import CASES, K, LR, S, WD, algorithm_of, federation

ROUNDS, STOP = 12, 7
NAMES = {case: algorithm_of(case) for case in CASES}


class Stop(Exception):
    """The interruption (Ctrl-C, a machine stopped) after round ``STOP``."""


def settings(case):
    return {**dict(K=K, lr=LR, s=S, weight_decay=WD), **CASES[case][0]}


def run(case, device="cpu", **kw):
    return run_algorithm(NAMES[case], federation(device=device), total_time=ROUNDS, eval_every=2, **settings(case),
                         **kw)


def stopping(name, stop=STOP):
    """The method's learner, stopped by an error as round ``stop + 1`` ends (after the checkpoint of round stop)."""
    base = get(name).learner

    class Stopping(base):
        def on_server_step(self, t, contacts):
            if t > stop:
                raise Stop
            super().on_server_step(t, contacts)
    return Stopping


def same_run(a, b):
    torch.testing.assert_close(a["model"], b["model"], rtol=0, atol=0)
    assert a["curve"] == b["curve"]
    for key in ("server_steps", "client_steps", "computed_client_steps", "bytes_up", "bytes_down", "uploads"):
        assert a[key] == b[key], key
    assert a["schedule"].contacts == b["schedule"].contacts


@pytest.mark.parametrize("case", list(CASES))
def test_a_run_resumed_from_its_checkpoint_is_the_run_that_never_stopped(case, tmp_path):
    path = tmp_path / "run.ckpt"
    whole = run(case)
    with pytest.raises(Stop):
        run(case, checkpoint=path, checkpoint_every=0, learner_class=stopping(NAMES[case]))
    assert path.is_file()
    resumed = run(case, checkpoint=path, checkpoint_every=0)
    same_run(resumed, whole)
    assert resumed["resumed_at"] == [float(STOP)] and "resumed_at" not in whole
    assert not path.exists()                                 # the run ended: its checkpoint is gone


def test_a_run_resumed_on_another_kind_of_cpu_names_each_sittings_cpu(tmp_path, monkeypatch):
    """The same seed rounds otherwise on another kind of CPU: a run whose sittings were not all on one kind lists
    each sitting's (``sitting_cpus``), and its report says so; sittings on one kind add nothing."""
    path = tmp_path / "run.ckpt"
    for kinds, said in ((["A", "A", "A"], None), (["A", "B", "B"], ["A", "B", "B"])):
        first, second, third = kinds
        monkeypatch.setattr(base, "cpu_kind", lambda: first)
        with pytest.raises(Stop):
            run("fedavg", checkpoint=path, checkpoint_every=0, learner_class=stopping("fedavg", stop=3))
        monkeypatch.setattr(base, "cpu_kind", lambda: second)
        with pytest.raises(Stop):
            run("fedavg", checkpoint=path, checkpoint_every=0, learner_class=stopping("fedavg"))
        monkeypatch.setattr(base, "cpu_kind", lambda: third)
        resumed = run("fedavg", checkpoint=path, checkpoint_every=0)
        assert resumed["resumed_at"] == [3.0, float(STOP)] and resumed.get("sitting_cpus") == said
    result = {"experiment": "x", "command": "c", "machine": "m", "config": {}, "runs": [resumed, {}]}
    assert "1 of them ran their sittings on unlike kinds of CPU (sitting by sitting, run by run: A then B then B)" in (
        heading(result)[4])


def test_a_run_resumed_on_another_number_of_threads_names_each_sittings_threads(tmp_path, monkeypatch):
    """A kernel's sums split over another number of threads round otherwise (oneDNN's LeNet-5 weight gradient: up
    to 3e-8 between 1 and 2 threads), as ``afl repro --processes`` changes them: a run whose sittings had unlike
    thread counts lists them (``sitting_threads``) and its report says so; a checkpoint from before afl recorded
    them counts as unknown, not as unlike."""
    path = tmp_path / "run.ckpt"
    threads = torch.get_num_threads()
    try:
        for counts, said, written in (((1, 1), None, None), ((2, 1), [2, 1], None),
                                      ((2, 1), [2, 1], "two lists"), ((None, 1), None, "no threads")):
            torch.set_num_threads(counts[0] or 1)
            if written:                        # an earlier afl's: CPU kinds and threads apart, or no threads at all
                monkeypatch.setattr(base.History, "state_dict", lambda self, saved=base.History.state_dict, w=written: (
                    earlier_afl(saved(self), w)))
            with pytest.raises(Stop):
                run("fedavg", checkpoint=path, checkpoint_every=0, learner_class=stopping("fedavg"))
            monkeypatch.undo()
            torch.set_num_threads(counts[1])
            resumed = run("fedavg", checkpoint=path, checkpoint_every=0)
            assert resumed["resumed_at"] == [float(STOP)] and resumed.get("sitting_threads") == said
            if said:
                result = {"experiment": "x", "command": "c", "machine": "m", "config": {}, "runs": [resumed]}
                assert ("1 of them ran their sittings on unlike numbers of PyTorch threads (sitting by sitting, run by "
                        "run: 2 then 1)") in heading(result)[4]
    finally:
        torch.set_num_threads(threads)


def earlier_afl(state: dict, written: str) -> dict:
    """A history's checkpoint ``state`` as an earlier afl wrote it: its sittings' CPU kinds and threads as two
    lists, or the CPU kinds alone."""
    state = dict(state)
    cpus, threads = zip(*state.pop("sittings"))
    return state | {"cpus": list(cpus)} | ({"threads": list(threads)} if written == "two lists" else {})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: a GPU run's checkpoint is loaded onto it")
def test_a_gpu_run_resumes_from_its_checkpoint(tmp_path):
    """Loading a checkpoint onto the GPU moves every tensor there, the CPU random generator's state too (which
    ``set_state`` refuses): the run goes on all the same. Found on an H200, where it stopped every resumed run."""
    path = tmp_path / "run.ckpt"
    for case in ("fedavg", "mime"):
        with pytest.raises(Stop):
            run(case, "cuda", checkpoint=path, checkpoint_every=0, learner_class=stopping(NAMES[case]))
        resumed = run(case, "cuda", checkpoint=path, checkpoint_every=0)
        assert resumed["resumed_at"] == [float(STOP)] and not path.exists()


def test_a_resumed_run_reports_its_head_start_apart_from_its_progress(tmp_path, monkeypatch):
    """The grid's bar jumps to a resumed run's checkpoint without counting the jump as speed (its time left)."""
    path, seen = tmp_path / "run.ckpt", []
    with pytest.raises(Stop):
        run("fedavg", checkpoint=path, checkpoint_every=0, learner_class=stopping(NAMES["fedavg"]))
    progress = RunProgress(1, enabled=False)
    monkeypatch.setattr(progress, "advance", lambda key, fraction, resumed: seen.append((fraction, resumed)))
    with progress, simulating("run"):
        run("fedavg", checkpoint=path, checkpoint_every=0)
    assert seen[0] == (STOP / ROUNDS, True)
    # then each server step, one a simulated time unit, to the end
    assert [f for f, _ in seen[1:]] == [t / ROUNDS for t in range(STOP + 1, ROUNDS + 1)]
    assert not any(resumed for _, resumed in seen[1:])


def test_saving_checkpoints_changes_nothing(tmp_path):
    same_run(run("ghbm", checkpoint=tmp_path / "a.ckpt", checkpoint_every=0), run("ghbm"))


def test_a_checkpoint_is_written_only_when_due(tmp_path):
    path = tmp_path / "run.ckpt"
    with pytest.raises(Stop):
        run("fedhbm", checkpoint=path, checkpoint_every=3600, learner_class=stopping("fedhbm"))
    assert not path.exists()


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    path = tmp_path / "run.ckpt"
    with pytest.raises(Stop):
        run("ghbm", checkpoint=path, checkpoint_every=0, learner_class=stopping("ghbm"))
    with pytest.raises(ParameterError, match="checkpoint.*another run"):
        run_algorithm("ghbm", federation(), total_time=ROUNDS, eval_every=2, **{**settings("ghbm"), "tau": 2},
                      checkpoint=path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ParameterError, match="checkpoint.*unreadable"):
        run("ghbm", checkpoint=path)


@pytest.mark.parametrize("fleet", [False, True])
def test_afl_repro_goes_on_from_a_runs_checkpoint(fleet, tmp_path, monkeypatch, synthetic):
    """A GHBM grid stopped inside a run: the same command goes on from its checkpoint, and gives the run that never
    stopped; the checkpoint is gone once the results are written."""
    monkeypatch.setenv("AFL_CHECKPOINT_EVERY", "0")
    cfg = dict(TINY, splits=("noniid",), methods=("fedhbm",))
    real = repro_ghbm.run_algorithm

    def stopped(*args, **kw):
        return real(*args, **(kw | {"learner_class": stopping("fedhbm", stop=3)}))
    monkeypatch.setattr(repro_ghbm, "run_algorithm", stopped)
    with pytest.raises(RunsFailed):
        repro_ghbm.run_experiment("ghbm-table2", quick=True, out=tmp_path / "a", progress=False, fleet=fleet, **cfg)
    assert sorted(p.name for p in (tmp_path / "a" / "ghbm-table2.checkpoints").iterdir()) == [
        "noniid-fedhbm-None-0.ckpt", "noniid-fedhbm-None-0.ckpt.where"]
    monkeypatch.setattr(repro_ghbm, "run_algorithm", real)
    for out in ("a", "b"):
        repro_ghbm.run_experiment("ghbm-table2", quick=True, out=tmp_path / out, progress=False, fleet=fleet, **cfg)
    resumed, whole = (json.loads((tmp_path / out / "ghbm-table2.json").read_text())["runs"][0] for out in "ab")
    assert resumed.pop("resumed_at") == [3.0]
    assert "1 of the 1 runs went on from a checkpoint after an interruption (at simulated time 3)" in (
        tmp_path / "a" / "ghbm-table2.md").read_text()
    assert resumed["curve"] == whole["curve"] and resumed["final"] == whole["final"]
    assert not (tmp_path / "a" / "ghbm-table2.checkpoints").exists()


def test_a_report_counts_every_resumption_of_a_run_resumed_more_than_once():
    """Runs that went on from checkpoints once each get one time each; where one went on twice, the report says how
    many resumptions in all and groups each run's times."""
    result = {"experiment": "x", "command": "c", "machine": "m", "config": {},
              "runs": [{"resumed_at": [3.0]}, {"resumed_at": [2.5]}, {}]}
    assert "2 of the 3 runs went on from a checkpoint after an interruption (at simulated time 3, 2.5)" in (
        heading(result)[4])
    result["runs"][1]["resumed_at"] = [2.5, 7.25]
    assert ("2 of the 3 runs went on from a checkpoint after an interruption (3 times in all; at simulated times, "
            "run by run: 3; 2.5 and 7.25)") in heading(result)[4]


def test_ctrl_c_names_the_checkpoints_and_fresh_discards_them(tmp_path, monkeypatch, capsys, synthetic):
    monkeypatch.setenv("AFL_CHECKPOINT_EVERY", "0")
    real = repro_ghbm.run_algorithm
    base = stopping("fedhbm", stop=3)

    class CtrlC(base):
        def on_server_step(self, t, contacts):
            try:
                super().on_server_step(t, contacts)
            except Stop:
                raise KeyboardInterrupt from None
    monkeypatch.setattr(repro_ghbm, "run_algorithm", lambda *a, **kw: real(*a, **(kw | {"learner_class": CtrlC})))
    out = tmp_path / "res"
    argv = ["repro", "ghbm-table2", "--quick", "--no-fleet", "--out", str(out), "--set", "splits=noniid",
            "--set", "methods=fedhbm"] + [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "1 stopped run(s) have checkpoints in" in err and "ghbm-table2.checkpoints" in err
    monkeypatch.setattr(repro_ghbm, "run_algorithm", real)
    assert main(argv + ["--fresh"]) == 0
    run_, = json.loads((out / "ghbm-table2.json").read_text())["runs"]
    assert "resumed_at" not in run_ and not (out / "ghbm-table2.checkpoints").exists()


def test_a_checkpoint_says_where_its_run_was_without_loading_it(tmp_path):
    """What a stopped command names beside each kept checkpoint: where the run was saved, or that an earlier afl did
    not record it, or that the file cannot be read."""
    kept = RunCheckpoint(tmp_path / "a.ckpt", {"run": "a"})
    kept.save({"w": torch.zeros(3)}, "at simulated time 92.1")
    assert saved_where(kept.path) == "at simulated time 92.1" and kept.load()["w"].shape == (3,)
    old = RunCheckpoint(tmp_path / "b.ckpt", {"run": "b"})
    old.save({"w": torch.zeros(3)})
    assert saved_where(old.path) == "(where not recorded)"
    (tmp_path / "c.ckpt").write_bytes(b"not a checkpoint")
    assert saved_where(tmp_path / "c.ckpt") == "(unreadable)"


def test_where_is_read_from_the_note_beside_a_checkpoint_only_while_it_names_that_file(tmp_path, monkeypatch):
    """A FedAST pool's checkpoint takes seconds to unpickle; the note beside it says where in milliseconds -- unless a
    stop fell between the two writes, when the note describes the checkpoint before and the file itself is read."""
    kept = RunCheckpoint(tmp_path / "a.ckpt", {"run": "a"})
    kept.save({"w": torch.zeros(3)}, "after round 7")
    note = tmp_path / "a.ckpt.where"
    assert note.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["a.ckpt", "a.ckpt.where"]
    with monkeypatch.context() as m:
        m.setattr(torch, "load", lambda *a, **kw: pytest.fail("the note should have answered"))
        assert saved_where(kept.path) == "after round 7"
    earlier = note.read_text()
    kept.save({"w": torch.ones(5)}, "after round 9")
    note.write_text(earlier)                                     # the second note never written
    assert saved_where(kept.path) == "after round 9"
    note.write_text("{damaged")
    assert saved_where(kept.path) == "after round 9"
    kept.save({"w": torch.ones(5)})                              # saved without a where: no note to mislead
    assert not note.exists() and saved_where(kept.path) == "(where not recorded)"
    kept.save({"w": torch.ones(5)}, "after round 11")
    kept.discard()
    assert list(tmp_path.iterdir()) == []


def stop_at_time_limit(monkeypatch, argv: list[str], checks: int) -> None:
    """Run ``afl argv --time-limit 9m`` with the limit passing at its ``checks``-th look (the runs' rounds or
    events): the command must stop cleanly (status 3). The limit never passes afterwards."""
    from afl import deadline
    monkeypatch.setattr(deadline, "passed", lambda calls=iter(range(10 ** 9)): next(calls) >= checks)
    try:
        assert main(argv + ["--time-limit", "9m"]) == 3
    finally:
        deadline.clear()
    monkeypatch.setattr(deadline, "passed", lambda: False)


def test_a_time_limit_stops_cleanly_and_the_same_command_goes_on(tmp_path, monkeypatch, capsys, synthetic):
    """``--time-limit``: the run saves its state at the round where the limit passes and the command ends with
    status 3, naming what was kept; the same command goes on from it (here, with no limit) to the run that never
    stopped (its results equal another folder's uninterrupted run)."""
    argv = ["repro", "ghbm-table2", "--quick", "--no-fleet", "--set", "splits=noniid", "--set", "methods=fedhbm"] + [
        x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    stop_at_time_limit(monkeypatch, argv + ["--out", str(tmp_path / "a")], checks=3)
    err = capsys.readouterr().err
    assert "afl: the time limit is reached; 0 finished run(s)" in err and "1 stopped run(s) have checkpoints" in err
    assert "(noniid-fedhbm-None-0 after round " in err                     # where the run stopped, read from its file
    for out in ("a", "b"):
        assert main(argv + ["--out", str(tmp_path / out)]) == 0
    resumed, whole = (json.loads((tmp_path / out / "ghbm-table2.json").read_text())["runs"][0] for out in "ab")
    assert resumed.pop("resumed_at") and resumed["curve"] == whole["curve"] and resumed["final"] == whole["final"]


def test_a_time_limit_stops_an_event_clock_and_reads_durations():
    from afl import deadline
    from afl.sim.clock import EventQueue
    clock = EventQueue(0)
    clock.push(1.0, "a")
    try:
        deadline.start(-1.0)                                   # already past
        with pytest.raises(deadline.TimeLimit):
            clock.pop()
    finally:
        deadline.clear()
    assert clock.pop().time == 1.0
    assert [deadline.parse(x) for x in ("90s", "9m", "2.5h", "9", " 1.5 ")] == [90, 540, 9000, 540, 90]
    for bad in ("0", "-3m", "9 minutes", ""):
        with pytest.raises(ParameterError, match="--time-limit"):
            deadline.parse(bad)


def test_a_learner_attribute_that_cannot_be_saved_is_an_error(tmp_path):
    class Holding(get("fedavg").learner):
        def __init__(self, *args):
            super().__init__(*args)
            self.opened = open(tmp_path / "log.txt", "w")
    with pytest.raises(TypeError, match="Holding.opened"):
        run("fedavg", checkpoint=tmp_path / "run.ckpt", checkpoint_every=0, learner_class=Holding)


@pytest.mark.parametrize("text", ["-1", "often", "nan"])
def test_a_bad_checkpoint_interval_names_the_variable(text, monkeypatch):
    monkeypatch.setenv("AFL_CHECKPOINT_EVERY", text)
    with pytest.raises(ParameterError, match="AFL_CHECKPOINT_EVERY"):
        every_s()


def test_a_planted_checkpoint_runs_nothing(tmp_path):
    marker, path = tmp_path / "ran", tmp_path / "run.ckpt"
    torch.save({"identity": {"algorithm": "fedavg"}, "state": Planted(marker)}, path)
    with pytest.raises(ParameterError, match="run.ckpt.*unreadable"):
        RunCheckpoint(path, {"algorithm": "fedavg"}).load()
    assert not marker.exists()
