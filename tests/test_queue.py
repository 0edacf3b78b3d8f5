"""The GPU queue (afl.queue), on the CPU: its entries and estimates, the data that travels, a refused entry, a tiny
entry run to its archive, an entry stopped at its deadline that goes on from its archive, what a call can bring back,
and the visit's fleet figure."""
import json
import os
import subprocess
import sys
import tarfile

import pytest
import torch

from afl import queue
from afl.errors import ParameterError
from afl.repro import ghbm

FAST = {(e.model, e.width): (1e12, "test") for e in queue.QUEUE}


@pytest.fixture(autouse=True)
def own_scratch(monkeypatch, tmp_path):
    """Each test its own scratch folder (a visit keeps measured rates there for its later calls)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))


def test_entries_are_exact_invocations_with_steps_from_their_settings(monkeypatch, tmp_path):
    rows = {r["name"]: r for r in queue.listing()}
    fedavg = rows["ghbm-cifar10-noniid-fedavg"]
    cfg = ghbm.setting("ghbm-table2", quick=False)
    assert fedavg["client_steps"] == cfg.rounds * cfg.per_round * cfg.local_steps == 1_600_000
    assert fedavg["command"].startswith("afl repro ghbm-table2 --seeds 1 ") and "--device cuda" in fedavg["command"]
    rate, basis = queue.RATES[("cnn-cifar", 10)]
    assert fedavg["minutes"] == pytest.approx(1_600_000 / rate / 60, abs=0.01) and fedavg["rate_basis"] == basis
    # the Shakespeare column: 6 methods of 10 clients and FedCM-full's 100, 250 rounds of 20 steps, one split
    assert rows["ghbm-shakespeare-noniid-b"]["client_steps"] == (6 * 10 + 100) * 250 * 20
    assert rows["ghbm-shakespeare-noniid-a"]["minutes"] < queue.CALL_MINUTES
    headline = rows["ghbm-cifar10-noniid-headline-2000-rounds"]
    assert headline["client_steps"] == 5 * 2000 * cfg.per_round * cfg.local_steps     # a tenth of the rounds, 5 runs
    monkeypatch.setattr(queue.Entry, "result", lambda self: tmp_path / "not-committed.json")
    names = [e.name for e in queue.next_entries(10_000, FAST)]
    assert names[:5] == ["ghbm-cifar10-noniid-headline-2000-rounds", "ghbm-shakespeare-noniid-a",
                         "ghbm-shakespeare-iid-a", "ghbm-shakespeare-noniid-c", "ghbm-shakespeare-iid-c"]
    assert [e.name for e in queue.next_entries(10_000, FAST, skip=names[:2])] == names[2:]
    assert queue.next_entries(0.5, FAST) == []                                   # less than the visit's overhead
    slow = {key: (1000.0, "slow") for key in FAST}                               # 27 minutes an entry
    assert queue.find("ghbm-cifar10-noniid-fedavg").status(slow) == "pending"    # goes on from a 6.7 MB checkpoint
    assert queue.find("ghbm-cifar10-noniid-fedhbm").status(slow).startswith("needs a faster engine")
    assert all("shakespeare" in e.name for e in queue.next_entries(20, slow))    # 8.3 minutes each: they fit


def test_the_cli_lists_the_queue_as_json():
    out = subprocess.run([sys.executable, "-m", "afl.cli", "queue", "--json"], capture_output=True, text=True,
                         check=True).stdout
    assert {r["name"] for r in json.loads(out)} == {e.name for e in queue.QUEUE}


def test_an_entry_that_cannot_finish_in_the_time_left_is_refused(tmp_path):
    entry = queue.find("ghbm-cifar10-noniid-fedavg")
    with pytest.raises(ParameterError, match=r"--minutes=5.*ghbm-cifar10-noniid-fedavg.*not started"):
        queue.run(entry, 5, tmp_path / "out", device="cpu")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ParameterError, match="entry='nope'"):
        queue.find("nope")


def test_a_visit_goes_on_down_the_queue_while_entries_fit_the_minutes_left(monkeypatch, tmp_path):
    """Planned at the start, a 9-minute visit holds two 4-minute entries; when they end sooner than estimated, the
    visit takes the queue's next entries that fit the minutes then left, each once, in the queue's order."""
    monkeypatch.setattr(queue.Entry, "status", lambda self, rates=None: "pending")
    monkeypatch.setattr(queue.Entry, "minutes", lambda self, rates=None: 4.0)
    assert len(queue.next_entries(9)) == 2
    ran = []

    def instant(entry, minutes, out, **kw):
        ran.append(entry.name)
        return {"entry": entry.name}
    monkeypatch.setattr(queue, "run", instant)
    queue.visit([], 9, tmp_path, device="cpu")
    assert ran == [e.name for e in queue.QUEUE]
    assert json.loads((tmp_path / "queue-report.json").read_text()) == [{"entry": n} for n in ran]


def test_where_nothing_fits_a_visit_starts_only_an_entry_whose_checkpoints_come_back(monkeypatch, tmp_path):
    """With --allow-partial and no entry fitting, the minutes go to the first pending entry that can go on in a later
    visit (FedAvg's 6.7 MB checkpoints), not to the first pending one, whose checkpoints would stay behind; with no
    such entry, nothing is started."""
    slow = {key: (1000.0, "slow") for key in FAST}                       # no entry fits 5 minutes
    monkeypatch.setattr(queue.Entry, "result", lambda self: tmp_path / "not-committed.json")
    started = []
    monkeypatch.setattr(queue, "run", lambda entry, minutes, out, **kw: started.append(entry.name) or {})
    queue.visit([], 5, tmp_path / "a", device="cpu", rates=slow, allow_partial=True)
    first = next(e for e in queue.QUEUE if e.status(slow) == "pending")
    assert not first.carried() and started == ["ghbm-cifar10-noniid-fedavg"]
    monkeypatch.setattr(queue.Entry, "carried", lambda self: False)
    with pytest.raises(ParameterError, match="--minutes=5"):
        queue.visit([], 5, tmp_path / "b", device="cpu", rates=slow, allow_partial=True)
    queue.visit([first], 5, tmp_path / "c", device="cpu", rates=slow, allow_partial=True)     # named: it starts
    assert started[-1] == first.name


@pytest.mark.parametrize("archive_mib, runs", [(0, 5), (15, 4)])
def test_a_visit_starts_no_entry_whose_archive_would_not_come_back(archive_mib, runs, monkeypatch, tmp_path):
    """A call brings back 8 files, 64 MiB together: beside visit.log and the report and rates written last, five
    archives; of 15 MiB each, four (a fifth would pass 64 MiB with the 16 MiB the next may take). The rest wait."""
    monkeypatch.setattr(queue.Entry, "status", lambda self, rates=None: "pending")
    monkeypatch.setattr(queue.Entry, "minutes", lambda self, rates=None: 0.1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "visit.log").write_text("the caller's tee\n")

    def archived(entry, minutes, out, **kw):
        with open(out / f"{entry.name}.tar.gz", "wb") as f:
            f.truncate(archive_mib << 20)
        return {"entry": entry.name}
    monkeypatch.setattr(queue, "run", archived)
    reports = queue.visit([], 9, out, device="cpu")
    assert [r["entry"] for r in reports] == [e.name for e in queue.QUEUE[:runs]]
    files = list(out.iterdir())
    assert len(files) <= queue.RETURN_FILES - 1 and sum(f.stat().st_size for f in files) <= queue.RETURN_TOTAL


FIG7 = [e for e in queue.QUEUE if e.experiment == "fedast-fig7"]


def test_fedast_entries_plan_their_steps_from_the_schedule_and_wait_for_a_measured_rate():
    from afl.repro import fedast
    entry = queue.find("fedast-fig7-sync-st")
    cfg = fedast.setting("fedast-fig7", quick=False, methods=("sync-st",), total_time=entry.sets["total_time"])
    assert entry.client_steps() == sum(fedast.planned_client_steps(cfg, cfg.tasksets[0], "sync-st", 300, 0))
    assert entry.sets["total_time"] == round(1.5 * 619 / (1 - 0.401))         # the paper's finish time x 1.5
    assert entry.argv == ["repro", "fedast-fig7", "--seeds", "1", "--set", "methods=sync-st", "--set",
                          "total_time=1550", "--device", "cuda"]
    assert entry.status().startswith("waits for its rate") and not entry.measured()
    with pytest.raises(ParameterError, match="rates=.*fedast-fig7 sync-st.*measured rate"):
        entry.minutes()
    assert {(e.model, e.width) for e in FIG7} == {("fedast-fig7 fedast", 1), ("fedast-fig7 sync-st", 1)}
    rates = {(entry.model, entry.width): (entry.client_steps() / 240, "test")}
    assert entry.minutes(rates) == pytest.approx(4.0) and entry.status(rates) == "pending"


def test_a_visit_measures_an_entrys_rate_when_its_turn_comes_then_runs_it_if_it_fits(monkeypatch, tmp_path):
    """FedAST's entries, alone in the queue and with no rate: FedAST's is measured when its turn comes and run (its
    static and code variants share the rate); Sync-ST's measurement fails and it is passed over; the measured rate
    comes back in rates.json."""
    monkeypatch.setattr(queue, "QUEUE", FIG7)
    monkeypatch.setattr(queue.Entry, "result", lambda self: tmp_path / "not-committed.json")
    events = []

    def measure(entry, **kw):
        events.append(f"measure {entry.name}")
        if entry.name == "fedast-fig7-sync-st":
            raise subprocess.CalledProcessError(1, "afl repro")
        return entry.client_steps() / (60 * 3.0), f"fake {entry.name}"      # 3 minutes an entry

    def instant(entry, left, out, **kw):
        events.append(f"run {entry.name}")
        return {"entry": entry.name}
    monkeypatch.setattr(queue, "measure_rate", measure)
    monkeypatch.setattr(queue, "run", instant)
    queue.visit([], 9, tmp_path, device="cpu")
    assert events == ["measure fedast-fig7-fedast", "run fedast-fig7-fedast", "measure fedast-fig7-sync-st",
                      "run fedast-fig7-fedast-static", "run fedast-fig7-fedast-code"]
    saved = json.loads((tmp_path / "rates.json").read_text())["rates"]
    assert [(r["model"], r["basis"]) for r in saved] == [("fedast-fig7 fedast", "fake fedast-fig7-fedast")]
    rates = queue.load_rates(tmp_path / "rates.json")
    assert queue.next_entries(60, rates) == FIG7[:1]                  # stops where a rate is still to be measured
    assert queue.to_measure(rates, skip=["fedast-fig7-fedast"]).name == "fedast-fig7-sync-st"
    events.clear()                                                  # the visit's next call keeps the rate
    queue.visit([], 9, tmp_path / "call2", device="cpu")
    assert events == ["run fedast-fig7-fedast", "measure fedast-fig7-sync-st", "run fedast-fig7-fedast-static",
                      "run fedast-fig7-fedast-code"]
    assert not (tmp_path / "call2" / "rates.json").exists()
    slow = rates | {("fedast-fig7 sync-st", 1): (100.0, "slow")}
    assert queue.find("fedast-fig7-sync-st").status(slow).startswith("needs a faster engine")
    assert queue.next_entries(60, slow) == [FIG7[0], FIG7[2], FIG7[3]]


def test_qafel_and_favas_entries_are_their_rows_with_afls_bound_on_their_work():
    from afl.repro import estimate, qafel
    rows = [e for e in queue.QUEUE if e.experiment == "qafel-table1"]
    assert [e.sets["methods"][0] for e in rows] == list(qafel.TABLE1_METHODS)
    assert {(e.model, e.width) for e in rows} == {("qafel-table1 row", 3)}        # one rate for every row
    cfg = qafel.setting("qafel-table1", quick=False)
    assert rows[0].client_steps() == 3 * (cfg.max_uploads + cfg.users)           # every upload of the budget
    fig3a = queue.find("favas-fig3a-favas")
    assert fig3a.client_steps() == round(estimate("favas-fig3a", seeds=1, methods=("favas",)).client_steps)
    assert fig3a.probe == {"total_time": 200} and fig3a.argv[-2:] == ["--device", "cuda"]


@pytest.mark.slow
@pytest.mark.parametrize("name, quick", [
    ("fedast-fig7-fedast-static", ["repro", "fedast-fig7", "--quick", "--set", "methods=fedast-static", "--set",
                                   "total_time=6"]),
    ("qafel-table1-fedbuff", ["repro", "qafel-table1", "--quick", "--set", "methods=fedbuff", "--set",
                              "max_uploads=60", "--set", "eval_every=30", "--set", "users=100"])])
def test_a_rate_is_measured_from_a_short_run_of_the_entry(name, quick, tmp_path):
    """End to end: the short run's client steps (FedAST's per task, the others' computed ones) over its wall time."""
    entry = queue.find(name)
    rate, basis = queue.measure_rate(entry, device="cpu", argv=quick + ["--seeds", "1", "--device", "cpu"],
                                     work=tmp_path)
    saved = json.loads((tmp_path / f"rate-{entry.name}" / f"{entry.experiment}.json").read_text())["runs"]
    steps = sum(sum(t["client_steps"] for t in r["tasks"]) if "tasks" in r else r["computed_client_steps"]
                for r in saved)
    assert steps > 0 and f"{steps:,} client steps" in basis and 0 < rate < steps


def test_packed_folders_are_split_into_the_calls_that_can_carry_them(tmp_path):
    files = []
    for name, size in (("shakespeare", 2), ("MNIST", 12), ("FashionMNIST", 31), ("cifar10", 18)):
        f = tmp_path / name / "raw" / "x.xz"
        f.parent.mkdir(parents=True)
        f.write_bytes(b"0" * size * 1000)
        files.append(f)
    calls = queue.carry_calls(files, tmp_path, budget=39_000)
    assert [[d.name for d in call] for call in calls] == [["shakespeare", "MNIST", "cifar10"], ["FashionMNIST"]]
    with pytest.raises(ParameterError, match="--datasets='FashionMNIST'.*at most 0.0"):
        queue.carry_calls(files, tmp_path, budget=20_000)
    assert 0 < queue.tree_bytes() < queue.CALL_CARRY_BYTES
    assert queue.present_datasets(["mnist", "shakespeare"]) == {"mnist", "shakespeare"}     # the CI's mirror
    assert queue.present_datasets(["mnist", "shakespeare"], root=tmp_path) == set()


def test_a_visit_passes_over_an_entry_whose_data_this_call_did_not_carry(monkeypatch, tmp_path):
    entries = [queue.find("fedast-fig7-fedast"), queue.find("ghbm-shakespeare-noniid-b")]
    monkeypatch.setattr(queue, "QUEUE", entries)
    monkeypatch.setattr(queue.Entry, "result", lambda self: tmp_path / "not-committed.json")
    monkeypatch.setattr(queue, "present_datasets", lambda names, root=None: {"shakespeare", "mnist", "cifar10-jpeg"})
    events = []
    monkeypatch.setattr(queue, "measure_rate", lambda entry, **kw: events.append(f"measure {entry.name}"))
    monkeypatch.setattr(queue, "run", lambda entry, left, out, **kw: events.append(f"run {entry.name}") or {})
    queue.visit([], 9, tmp_path, device="cpu")
    assert events == ["run ghbm-shakespeare-noniid-b"]
    with pytest.raises(ParameterError, match="with its data carried"):
        queue.visit([], 5, tmp_path, device="cpu")                 # 6.9 minutes do not fit 5


def test_packed_data_unpacks_to_the_same_files_and_a_corrupt_pack_is_refused(tmp_path):
    files = queue.pack(["shakespeare"], tmp_path / "pack")
    assert [f.name for f in files] == ["raw_data.txt.xz"]
    root = queue.unpack(tmp_path / "pack", tmp_path / "data")
    from afl.data.files import locate
    assert locate("shakespeare", root=root, download=False, fresh=True).root == root
    (tmp_path / "pack" / "shakespeare" / "raw_data.txt.xz.md5").write_text("0" * 32 + "\n")
    (root / "shakespeare" / "raw_data.txt").unlink()
    with pytest.raises(ParameterError, match="--pack=.*corrupt"):
        queue.unpack(tmp_path / "pack", tmp_path / "data")
    with pytest.raises(ParameterError, match="--pack"):
        queue.unpack(tmp_path / "empty", tmp_path / "data")


def tiny(rounds, out_args=()):
    """A GHBM run small enough for the CPU (Fashion-MNIST, 10 clients, 2 a round, one local step)."""
    return ["repro", "ghbm-table2", "--seeds", "1", "--set", "dataset=fashion-mnist", "--set", "methods=fedavg",
            "--set", "splits=noniid", "--set", f"rounds={rounds}", "--set", "eval_every=1", "--set", "last=1",
            "--set", "clients=10", "--set", "participation=0.2", "--set", "local_steps=1", "--set", "batch=8",
            "--device", "cpu", *out_args]


@pytest.mark.slow
def test_a_tiny_entry_runs_to_its_archive(tmp_path):
    entry = queue.find("ghbm-cifar10-noniid-fedavg")
    report = queue.run(entry, 5, tmp_path / "out", device="cpu", rates=FAST, work=tmp_path / "work",
                       argv=tiny(3), overhead_min=0)
    assert report["finished"] and not report["stopped_at_deadline"] and report["exit_code"] == 0
    with tarfile.open(report["archive"]) as tar:
        names = set(tar.getnames())
    assert {"ghbm-table2.json", "ghbm-table2.md", "ghbm-table2.png"} <= names
    assert not any(n.endswith(".ckpt") for n in names)
    assert "tar xzf ghbm-cifar10-noniid-fedavg.tar.gz -C results/ghbm/cifar10/paper/fedavg" in report["commit"]


def saved_round(archive, tmp):
    with tarfile.open(archive) as tar:
        ckpts = [m for m in tar.getmembers() if m.name.endswith(".ckpt")]
        assert len(ckpts) == 1, tar.getnames()
        tar.extract(ckpts[0], tmp, filter="data")
    return torch.load(tmp / ckpts[0].name, weights_only=False)["state"]["round"]


@pytest.mark.slow
def test_an_entry_stopped_at_its_deadline_goes_on_from_its_archive(tmp_path):
    """A run far longer than the call is stopped cleanly and its checkpoint comes back; given back, the next call
    goes on from it: in a shorter call it gets past where the first stopped, which a fresh start could not."""
    entry = queue.find("ghbm-cifar10-noniid-fedavg")
    args = dict(device="cpu", rates=FAST, argv=tiny(100_000), overhead_min=0, env={"AFL_CHECKPOINT_EVERY": "0"})
    first = queue.run(entry, 0.4, tmp_path / "out1", work=tmp_path / "work1", **args)
    assert first["stopped_at_deadline"] and not first["finished"]
    r1 = saved_round(first["archive"], tmp_path / "x1")
    assert r1 > 0
    second = queue.run(entry, 0.2, tmp_path / "out2", work=tmp_path / "work2", resume_from=first["archive"], **args)
    assert second["stopped_at_deadline"]
    assert saved_round(second["archive"], tmp_path / "x2") > r1


def test_every_entry_without_a_rate_has_a_short_run_to_measure_it_and_that_run_is_a_valid_setting():
    from dataclasses import replace
    unmeasured = [e for e in queue.QUEUE if not e.measured()]
    assert unmeasured and all(e.probe for e in unmeasured)
    for e in unmeasured:
        cfg = replace(e, sets=e.sets | e.probe).setting()        # the setting's own checks pass
        assert all(getattr(cfg, k) == v for k, v in e.probe.items())


def test_ghbm_entries_count_their_steps_exactly_within_afls_bound_on_the_work():
    """GHBM's entries count their runs' steps exactly; afl's limit check bounds them from above, FedCM-full's
    every client included."""
    from afl.repro import estimate
    for e in (e for e in queue.QUEUE if e.experiment == "ghbm-table2"):
        bound = estimate(e.experiment, seeds=e.sets["seeds"], **{k: v for k, v in e.sets.items() if k != "seeds"})
        assert e.client_steps() <= bound.client_steps, e.name
    full = queue.find("ghbm-shakespeare-noniid-b")
    assert "fedcm-full" in full.sets["methods"] and full.client_steps() == (6 * 10 + 100) * 250 * 20


def test_the_fleet_figure_is_the_issues_command_sized_for_one_call():
    """Issue 41's fleet figure runs beside the queue (not one of its reproductions), as the issue states it, and its
    bound on the work fits a call at the only rate measured so far (an H200's)."""
    assert "afl " + " ".join(queue.FLEET.argv) == "afl repro favas-table2 --seeds 10 --device cuda --processes 8"
    assert queue.FLEET.name not in {e.name for e in queue.QUEUE}
    steps = queue.FLEET.client_steps()
    assert steps >= 16_742_753                        # at least what the H200's run computed (a bound, not a plan)
    assert queue.FLEET.minutes(queue.FLEET_RATES) == pytest.approx(steps / (16_742_753 / 145) / 60)
    assert queue.FLEET.minutes(queue.FLEET_RATES) < queue.CALL_MINUTES


def test_what_a_command_computed_is_read_from_its_result_or_from_the_runs_it_finished(tmp_path):
    runs = [{"computed_client_steps": 40}, {"tasks": [{"client_steps": 5}, {"client_steps": 7}]}]
    (tmp_path / "x.json").write_text(json.dumps({"runs": runs}))
    assert queue.computed(tmp_path, "x") == (2, 52)
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    assert queue.computed(stopped, "x") == (0, 0)
    from afl.results import PartialRuns
    saved = PartialRuns(stopped / "x.partial.jsonl", "its setting")      # as afl repro saves its finished runs
    for r in runs:
        saved.append(r)
    with open(saved.path, "a") as f:
        f.write('{"computed_cli')
    assert queue.computed(stopped, "x") == (2, 52)    # the line cut off by the stop is not a run


@pytest.mark.slow
def test_a_visit_times_the_fleet_table_end_to_end_and_brings_its_folder_back(tmp_path):
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror (each process loads it)")
    sys.path.insert(0, str(queue.REPO / "tools"))
    import gpu_visit
    row = gpu_visit.table_in_processes(tmp_path / "out", 300, cpu=True)
    assert row["finished"] and row["exit_code"] == 0 and row["runs"] == 21 and row["client_steps"] > 0
    assert row["command"] == "afl repro favas-table2 --quick --seeds 1 " + " ".join(gpu_visit.CPU_FLEET)
    assert row["cpu_s"] > 0 and row["client_steps_per_s"] == pytest.approx(row["client_steps"] / row["wall_s"], 0.01)
    with tarfile.open(tmp_path / "out" / row["archive"]) as tar:
        assert "favas-table2.json" in tar.getnames()


def test_a_stopped_entrys_archive_takes_the_checkpoints_that_fit_one_returned_file(monkeypatch, tmp_path):
    """A call returns files of at most 16 MiB: an archive with every checkpoint of a fleet could exceed it and then
    nothing would come back, results included. It takes the results and the checkpoints that fit beside them."""
    monkeypatch.setattr(queue, "RETURN_BYTES", 1000)
    work = tmp_path / "work"
    (work / "x.checkpoints").mkdir(parents=True)
    (work / "x.partial.jsonl").write_bytes(b"r" * 300)
    for name, size in (("a.ckpt", 400), ("b.ckpt", 400), ("c.ckpt", 200), ("d.ckpt.part", 100)):
        (work / "x.checkpoints" / name).write_bytes(b"\0" * size)
    carried, left = queue._archive(work, tmp_path / "x.tar.gz", finished=False)
    assert [p.name for p in carried] == ["a.ckpt", "c.ckpt"] and left == ["b.ckpt (0 MB)"]
    with tarfile.open(tmp_path / "x.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["x.checkpoints/a.ckpt", "x.checkpoints/c.ckpt", "x.partial.jsonl"]
    assert queue._archive(work, tmp_path / "y.tar.gz", finished=True) == ([], [])
    entry = queue.find("ghbm-cifar10-noniid-fedavg")
    assert "the next visit goes on from it; the runs whose" in queue._what_to_commit(entry, "x", False, True, True)
    assert queue._what_to_commit(entry, "x", False, False, True).startswith("nothing")


def test_whether_an_entry_goes_on_over_visits_counts_the_checkpoints_of_all_its_runs():
    from dataclasses import replace
    fedavg = queue.find("ghbm-cifar10-noniid-fedavg")
    assert fedavg.checkpoints_mb() == 6.7 and fedavg.carried()
    pair = replace(fedavg, sets=fedavg.sets | {"methods": ("fedavg", "fedcm")})
    assert pair.checkpoint_mb() == 9.9 and pair.checkpoints_mb() == 16.6 and pair.carried()   # 16.6 MB < 16 MiB
    assert replace(pair, sets=pair.sets | {"seeds": 2}).checkpoints_mb() == 33.2
    assert not replace(pair, sets=pair.sets | {"seeds": 2}).carried()          # each run small, all of them not
    assert not replace(pair, sets=pair.sets | {"splits": ("iid", "noniid")}).carried()


@pytest.mark.slow
def test_the_checkpoint_sizes_the_queue_plans_with_are_what_a_run_writes():
    """CHECKPOINT_MB is measured, not typed: FedAvg's CIFAR-10 run at round 11 writes 6.7 MB."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the CIFAR-10 mirror")
    sys.path.insert(0, str(queue.REPO / "tools"))
    import checkpoint_sizes
    assert checkpoint_sizes.sizes("cifar10-jpeg", ["fedavg"], 11) == {"fedavg": queue.CHECKPOINT_MB["cnn-cifar", "fedavg"]}
