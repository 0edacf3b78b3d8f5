"""The plan of paper-scale runs (afl.plan), its measured rates (afl.rates) and the datasets packed for an offline
machine (afl.data.packing), on the CPU: jobs taken from the scoreboard, costs from rates recomputed from their
sources, a job run under a time limit and passed over once finished, archives within the caller's limits, and the
clear errors of missing or damaged inputs; nothing written through a symbolic link."""
import json
import lzma
import math
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from afl import plan, rates
from afl.claims import Run
from afl.cli import main
from afl.data import packing
from afl.data.files import Located
from afl.errors import ChecksumError, DataMissingError, ParameterError
from afl.repro import estimate
from afl.repro.fedast import EXPERIMENTS, parse_taskset
from afl.scoreboard import HEADLINE, papers
from afl.scoreboard.verdict import Results, verdict
from committed import commit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def jobs():
    return plan.jobs(ROOT)


# -- the plan ---------------------------------------------------------------------------------------------------------
def test_the_plan_holds_every_claim_not_run_or_reduced_headline_first(jobs):
    """Each claim the board shows as not run (afl can compute it) or decided at a scale its command can lift (a
    field or fewer seeds than the paper's) is in exactly one job, the run it waits for, and in its probe's run
    where its probe is not run; no other claim is -- one reduced only by its data (a substitute afl has in place of
    the paper's) is none; the jobs deciding a headline claim come first."""
    results = Results(ROOT)
    wanted, other_data = set(), set()
    for claims in papers().values():
        for c in claims:
            if c.run is None:
                continue
            row = verdict(c, results)
            scale = row.get("scale") or {}
            fewer = bool(scale.get("paper_seeds")) and scale["seeds"] < scale["paper_seeds"]
            if row["status"] == "not run" or (scale.get("reduced") and (scale["fields"] or fewer)):
                wanted.add((c.id, plan.wanting(c, results)))
            elif scale.get("reduced"):
                other_data.add(c.id)
            if c.probe and c.probe.run and row.get("probe") and row["probe"]["afl"] is None:
                wanted.add((c.id, c.probe.run))
    assert {(c, j.run) for j in jobs for c in j.claims} == wanted
    assert {"beyond-fadas-beats-fedbuff-noniid_2of3_fast", "beyond-ca2fl-beats-fedbuff-noniid_1of9_fast"} <= other_data
    assert len({j.run for j in jobs}) == len(jobs) and len({j.name for j in jobs}) == len(jobs)
    heads = [j.headline for j in jobs]
    assert heads == sorted(heads, reverse=True) and any(heads)
    assert all(j.headline == any(c in HEADLINE for c in j.claims) for j in jobs)


def test_a_jobs_cost_is_its_estimate_over_a_measured_rate_with_its_source(jobs):
    measured = rates.load(ROOT)
    shakespeare = next(j for j in jobs if j.name.startswith("ghbm-shakespeare-runs-")    # a one-gradient method
                       and not any(m in j.name for m in ("mime", "fedcm-full")) and not j.reuse)
    row = plan.row(shakespeare, measured, cpu_hours=24)
    assert row["client_steps_at_most"] == 5 * 250 * 10 * 20 == estimate(
        "ghbm-table2", seeds=5, **dict(shakespeare.run.overrides)).client_steps
    h100 = row["minutes"]["h100"]
    lstm = next(r for r in measured if (r.key, r.machine) == ("char-lstm", "h100"))
    assert h100["minutes"] == round(250_000 / lstm.value / 60, 1) and h100["source"] == lstm.source
    assert row["checkpoints"] and row["command"].startswith("afl repro ghbm-table2 --seeds 5 ")
    for job in jobs[:12]:
        for cost in plan.row(job, measured, 24)["minutes"].values():
            assert cost is None or (ROOT / cost["source"]).is_file()


def test_a_claim_between_rows_run_apart_is_listed_under_the_row_it_waits_for(tmp_path):
    """A QAFeL claim between Table 1's 2/8 and 4/8 rows is listed under 2/8's paper-protocol run while none is
    committed, and under 4/8's once 2/8's is: never under a job that is finished."""
    claim = next(c for claims in papers().values() for c in claims if c.id == "qafel-more-uploads-s8")
    rows = [r.out.rsplit("/", 1)[1] for r in (claim.run, *claim.needs)]
    assert rows == ["qafel_c2_s8", "qafel_c4_s8"]

    def listed():
        return [j.name for j in plan.jobs(tmp_path) if claim.id in j.claims]

    assert listed() == ["qafel-table1-paper-qafel_c2_s8"]
    commit(tmp_path, "qafel/table1/paper/qafel_c2_s8/qafel-table1")
    assert listed() == ["qafel-table1-paper-qafel_c4_s8"]


def test_a_claim_that_differs_is_listed_under_its_probes_run_until_the_probe_is_run(tmp_path):
    """QAFeL's 2/2-against-FedBuff claim differs at the 85 % target: its probe at the paper's load is a job of the
    plan (``probe not run``) until a result holding both rows at the 91 % target is committed."""
    claim = "qafel-2-2-more-uploads"

    def listed():
        return [(j.name, j.why[j.claims.index(claim)]) for j in plan.jobs(tmp_path) if claim in j.claims]

    commit(tmp_path, "qafel/table1/paper/qafel-table1")
    assert listed() == [("qafel-table1-paper-load", "probe not run")]
    job = next(j for j in plan.jobs(tmp_path) if j.name == "qafel-table1-paper-load")
    rows = ",".join(["fedbuff"] + [f"qafel_c{c}_s{s}" for c in (8, 4, 2) for s in (8, 4, 2)])
    assert job.command == (f"afl repro qafel-table1 --seeds 3 --set methods={rows} --set target=0.91 "
                           "--out results/qafel/table1/paper-load")
    commit(tmp_path, "qafel/table1/paper/qafel-table1", dest="qafel/table1/paper-load/qafel-table1",
           methods=("fedbuff", "qafel_c2_s2"))
    assert listed() == []


def test_every_claim_reads_the_result_its_paper_scale_run_writes():
    """Else finishing the plan's job would leave the board as it was: a claim reads what its run writes, or it is
    merged from several runs and names the others (``needs``); a reduced result it reads meanwhile is ``earlier``."""
    for claims in papers().values():
        for claim in claims:
            if claim.run is not None:
                assert f"{plan.dest(claim.run)}/{claim.run.experiment}" == claim.result or claim.needs, claim.id


def test_a_fedast_fig5_claim_reads_its_task_sets_run_else_the_quick_figure(tmp_path):
    """Fig. 5's claims read their task set's paper-scale run (the plan's job writes it there), the quick figure
    until it is committed; the gain's growth from 2 to 6 tasks waits for both task sets' runs. While a claim differs
    and its probe (the task set as the authors' code runs it) is not run, it waits for that run too."""
    claims = {c.id: c for cs in papers().values() for c in cs}
    two, grows = claims["fedast-fig5-mnist*2"], claims["fedast-fig5-grows-mnist"]
    assert f"{two.run.out}/fedast-fig5" == f"results/{two.result}"

    def state(claim):
        row = verdict(claim, Results(tmp_path))
        return row["status"], row["result"], [j.name for j in plan.jobs(tmp_path) if claim.id in j.claims]

    commit(tmp_path, "fedast/fig5/fedast-fig5")                   # the quick figure (MNIST, 2, 4 and 6 tasks)
    assert state(two) == ("differs — open", "results/fedast/fig5/fedast-fig5.json",
                          ["fedast-fig5-mnist*2", "fedast-fig5-mnist*2-code-dispatch"])
    assert state(grows)[::2] == ("consistent at reduced scale", ["fedast-fig5-mnist*6"])   # no probe: it holds
    commit(tmp_path, "fedast/fig5/fedast-fig5", "fedast/fig5/mnist*6/fedast-fig5")   # stands in for the paper run
    assert state(grows)[1:] == ("results/fedast/fig5/fedast-fig5.json", ["fedast-fig5-mnist*2"])
    commit(tmp_path, "fedast/fig5/fedast-fig5", "fedast/fig5/mnist*2/fedast-fig5")
    assert (state(two)[1], state(grows)[1]) == ("results/fedast/fig5/mnist*2/fedast-fig5.json",
                                                "results/fedast/fig5/mnist*6/fedast-fig5.json")


def test_a_fedast_task_set_that_differs_lists_its_code_probe_until_it_is_run(tmp_path):
    """A Fig. 5 task set that differs at the paper's targets lists its probe, the same task set as the authors' code
    runs it, beside the task set's folder until its result is committed there: the code's dispatch of the first
    requests (``cap_first=False``), which the cap of 300 meets with any number of tasks (they share 384 requests,
    Sec. 4's budget); it takes the task set's Sync-ST runs, which read no FedAST setting."""
    paper = EXPERIMENTS["fedast-fig5"][0]
    assert all(len(parse_taskset(t)) * paper.share(t) > min(paper.caps) for t in paper.tasksets)
    taskset, probe, setting = "mnist*2", "code-dispatch", "cap_first=False"      # MNIST's two tasks differ
    claim = f"fedast-fig5-{taskset}"

    def listed():
        return [(j.name, j.why[j.claims.index(claim)], j.command) for j in plan.jobs(tmp_path) if claim in j.claims]

    commit(tmp_path, f"fedast/fig5/{taskset}/fedast-fig5")
    assert listed() == [(f"fedast-fig5-{taskset}-{probe}", "probe not run",
                         f"afl repro fedast-fig5 --seeds 3 --set 'tasksets={taskset}' --set {setting} "
                         f"--out 'results/fedast/fig5/{taskset}/{probe}' "
                         f"--reuse 'results/fedast/fig5/{taskset}/fedast-fig5.json'")]
    job = next(j for j in plan.jobs(tmp_path) if claim in j.claims)
    assert job.reused == 3                                 # the task set's Sync-ST runs: the probe changes only FedAST
    # the probe's result stands in for the run of the same task set (the plan reads only that it is committed)
    commit(tmp_path, f"fedast/fig5/{taskset}/fedast-fig5", dest=f"fedast/fig5/{taskset}/{probe}/fedast-fig5")
    assert listed() == []


def test_a_job_takes_the_runs_of_a_reading_kept_beside_its_result(tmp_path):
    """Fashion-MNIST's two tasks under the shared budget: its Sync-ST runs are those of the result kept in the task
    set's ``per-task-requests/`` folder (96 requests a task, afl's former default), which reads no budget."""
    def job():
        return next(j for j in plan.jobs(tmp_path) if j.name == "fedast-fig5-fashion-mnist*2")

    assert job().reused == 0
    commit(tmp_path, "fedast/fig5/fashion-mnist*2/per-task-requests/fedast-fig5")
    assert (job().reuse, job().reused) == ("results/fedast/fig5/fashion-mnist*2/per-task-requests/fedast-fig5.json", 3)
    assert job().command.endswith("--reuse 'results/fedast/fig5/fashion-mnist*2/per-task-requests/fedast-fig5.json'")


def test_a_job_takes_the_runs_of_the_result_its_run_names(tmp_path):
    """QAFeL's Table 2 at the paper's load shares Table 1's FedBuff row: the job takes the FedBuff runs of Table 1 at
    that load (``Run.reuse``), and only those."""
    def job():
        return next(j for j in plan.jobs(tmp_path) if j.name == "qafel-table2-paper-load")

    for row in ("fedbuff", "qafel_c2_stopk"):                         # Table 2's cells at 85 %, failing
        commit(tmp_path, f"qafel/table2/paper/{row}/qafel-table2")
    assert job().reused == 0
    commit(tmp_path, "qafel/table1/paper-load/qafel-table1")
    assert (job().reuse, job().reused) == ("results/qafel/table1/paper-load/qafel-table1.json", 3)
    assert job().command.endswith("--reuse results/qafel/table1/paper-load/qafel-table1.json")


def test_a_job_with_checkpoints_in_its_folder_is_listed_as_under_way(tmp_path):
    """A job stopped at a time limit keeps its runs' checkpoints in its results folder: the plan names them, each with
    where it was, so that its command is known to go on from them rather than start over."""
    from afl.checkpoint import RunCheckpoint
    job = next(j for j in plan.jobs(tmp_path) if j.name == "fedast-fig5-fashion-mnist*6")
    assert plan.row(job, [], 24, tmp_path)["under_way"] == []
    folder = tmp_path / "results" / job.dest / "fedast-fig5.checkpoints"
    RunCheckpoint(folder / "fashion-mnist*6-fedast-static-300-None-0.ckpt", {}).save({}, "at simulated time 108")
    assert plan.row(job, [], 24, tmp_path)["under_way"] == [["fashion-mnist*6-fedast-static-300-None-0",
                                                              "at simulated time 108"]]


def test_fig7_lists_the_codes_dispatch_as_a_run_of_its_own(tmp_path):
    """Fig. 7's four tasks send 4 x 96 first requests against the cap of 300: the authors' code sends them all
    (``cap_first=False``), afl's default caps them. That reading is a job of the plan of its own, beside Fig. 7's
    run, for the three Fig. 7 claims, until its result is committed."""
    def listed():
        return {j.name: (j.claims, j.command) for j in plan.jobs(tmp_path) if j.run.experiment == "fedast-fig7"
                and "code-dispatch" in j.name}

    commit(tmp_path, "fedast/fig7/fedast-fig7")                       # the quick figure: the claims differ
    assert listed() == {"fedast-fig7-code-dispatch": (
        ("fedast-fig7-mnist", "fedast-fig7-all", "fedast-fig7-gain"),
        "afl repro fedast-fig7 --seeds 3 --set cap_first=False --out results/fedast/fig7/code-dispatch")}
    # a stand-in where the probe's result goes (the plan reads only that it is committed)
    commit(tmp_path, "fedast/fig7/fedast-fig7", dest="fedast/fig7/code-dispatch/fedast-fig7")
    assert listed() == {}


def _shakespeare_job(*methods):
    run = Run("ghbm-table2", (("dataset", "shakespeare"), ("eval_every", 10), ("splits", ("noniid",)),
                              ("methods", methods)), seeds=5, out="results/ghbm/shakespeare/runs/x")
    return plan.Job(run, ("c",), False, ("not run",))


@pytest.mark.parametrize("methods, per_step", [(("fedhbm",), 1), (("mimelitemom",), 2), (("mimemom",), 3),
                                               (("mime",), 3), (("fedavg", "mime"), 3)])
def test_a_job_is_priced_by_its_gradients(methods, per_step):
    """MIME and MimeMom take a second gradient on each step's batch and a full-batch one a round (a client's 2,000
    windows are 20 batches of 100, as many as its J = 20 steps), MimeLiteMom the full-batch one: 3, 3 and 2
    gradients a client step; a job of several methods is priced by its costliest. The minutes are the gradients
    over the rate."""
    measured = rates.load(ROOT)
    row = plan.row(_shakespeare_job(*methods), measured, cpu_hours=24)
    assert row["client_steps_at_most"] == 5 * len(methods) * 250 * 10 * 20
    assert row["gradients_at_most"] == per_step * row["client_steps_at_most"]
    lstm = next(r for r in measured if (r.key, r.machine) == ("char-lstm", "h200"))
    assert row["minutes"]["h200"]["minutes"] == round(row["gradients_at_most"] / lstm.value / 60, 1)


def test_the_cli_lists_the_plan_with_rates_and_sources(capsys):
    assert main(["plan", "--root", str(ROOT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("HEADLINE ") and "each measured by its source" in out and "results/" in out
    assert main(["plan", "--json", "--root", str(ROOT)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {j.name for j in plan.jobs(ROOT)}
    with pytest.raises(ParameterError, match="job='nope'"):
        plan.find(ROOT, ["nope"])
    last, first = rows[-1]["name"], rows[0]["name"]              # named jobs run in the order named, each once
    assert [j.name for j in plan.find(ROOT, [last, first, last])] == [last, first]


# -- rates ------------------------------------------------------------------------------------------------------------
def _result(root: Path, rel: str, walls, steps, execution="runs computed one by one", machine="device cpu",
            model="mlp32", **extra):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    runs = [{"computed_client_steps": s, "wall_seconds": w} for s, w in zip(steps, walls)]
    path.write_text(json.dumps({"experiment": "favas-table2", "config": {"model": model}, "quick": False,
                                "command": "afl repro x", "machine": machine, "execution": execution,
                                "resumed_runs": 0, "reused_runs": 0, "runs": runs} | extra))


def _rates(root: Path, *entries):
    (root / rates.RATES).parent.mkdir(parents=True, exist_ok=True)
    (root / rates.RATES).write_text(json.dumps({"rates": list(entries)}))


def test_rates_are_recomputed_from_their_sources(tmp_path):
    _result(tmp_path, "results/a/one.json", [10, 30], [100, 300])                       # one by one: 400 / 40
    _result(tmp_path, "results/a/fleet.json", [40, 39], [100, 300], "runs computed as one fleet of at most 64")
    (tmp_path / "results/b.jsonl").write_text(json.dumps({"model": "mlp32", "clients": 4, "engine_steps_per_s": 7.5})
                                              + "\n" + json.dumps({"model": "mlp32", "clients": 8,
                                                                   "engine_steps_per_s": 9.0}) + "\n")
    _rates(tmp_path, {"key": "mlp32", "machine": "cpu-2", "source": "results/a/one.json"},
           {"key": "favas-table2", "machine": "cpu-2", "source": "results/a/fleet.json"},
           {"key": "mlp32", "machine": "h100", "source": "results/b.jsonl", "where": {"clients": 8}})
    got = {(r.key, r.machine): r.value for r in rates.load(tmp_path)}
    assert got == {("mlp32", "cpu-2"): 10.0, ("favas-table2", "cpu-2"): 10.0, ("mlp32", "h100"): 9.0}
    measured = rates.load(tmp_path)
    assert rates.lookup(measured, ("favas-table2", "mlp32"), "cpu-2").key == "favas-table2"   # the experiment's own
    assert rates.lookup(measured, ("x", ("mlp32", "favas-table2")), "cpu-2").value == 10.0    # several: all measured
    assert rates.lookup(measured, (("mlp32", "lenet5"),), "cpu-2") is None     # one not measured: none
    assert rates.lookup(measured, ("mlp32",), "h200") is None


@pytest.mark.parametrize("case, match", [
    ("missing", "results/a/gone.json.*missing"),
    ("reused", "reused or resumed"),
    ("machine", "device cuda"),
    ("corrupt", "rates.json.*JSON list"),
    ("twice", "listed twice"),
    ("bench", "one line of afl bench"),
    ("bench-model", "a bench line of mlp32.*ran lenet5"),
    ("mime", "one mini-batch gradient a client step.*mimelitemom runs"),
    ("model", "runs train mlp32 alone .they train mlp200"),
    ("experiment", "a result of ghbm-table2 .it is one of favas-table2"),
])
def test_a_missing_damaged_or_mismatched_source_names_its_file(case, match, tmp_path):
    """The error names the file at fault (never an option nobody gave), for every later command alike; a source
    measures what its key names (a quick setting's replaced model is not the paper's)."""
    _result(tmp_path, "results/a/one.json", [10], [100], reused_runs=2 if case == "reused" else 0,
            model="mlp200" if case == "model" else "mlp32")
    if case == "mime":        # a method with more than one gradient a step prices nothing
        data = json.loads((tmp_path / "results/a/one.json").read_text())
        data["runs"][0]["method"] = "mimelitemom-dampened"        # a variant of GHBM's grid, by its base
        (tmp_path / "results/a/one.json").write_text(json.dumps(data))
    entry = {"key": "ghbm-table2" if case == "experiment" else "mlp32",
             "machine": "h100" if case == "machine" else "cpu-2", "source": "results/a/one.json"}
    if case == "missing":
        entry["source"] = "results/a/gone.json"
    if case in ("bench", "bench-model"):
        (tmp_path / "results/b.jsonl").write_text('{"model": "lenet5", "engine_steps_per_s": 1}\n')
        entry = {"key": "mlp32", "machine": "cpu-2", "source": "results/b.jsonl",
                 "where": {"model": "other"} if case == "bench" else {}}
    _rates(tmp_path, *([entry, entry] if case == "twice" else [entry]))
    if case == "corrupt":
        (tmp_path / rates.RATES).write_text('{"rates": [')
    with pytest.raises(ParameterError, match=match):
        rates.load(tmp_path)


# -- running under a time limit ---------------------------------------------------------------------------------------
TINY_FAVAS = Run("favas-table2", (("total_time", 20.0), ("eval_every", 10.0), ("splits", ("iid",)),
                                  ("methods", ("fedavg",))), seeds=1, out="results/favas/table2/tiny")


def test_a_job_runs_into_its_folder_and_is_passed_over_once_finished(tmp_path, capsys):
    job = plan.Job(TINY_FAVAS, ("c",), False, ("not run",))
    reports = plan.run([job], tmp_path, 300, root=ROOT)
    assert [r["state"] for r in reports] == ["finished"] and plan.done(job, tmp_path)
    result = json.loads((tmp_path / "favas/table2/tiny/favas-table2.json").read_text())
    assert result["command"].startswith("afl repro favas-table2 --seeds 1 --set total_time=20.0")
    assert plan.run([job], tmp_path, 300, root=ROOT) == []
    assert "is finished in" in capsys.readouterr().out


def test_a_plan_runs_each_job_in_the_processes_it_is_given(tmp_path, monkeypatch):
    """``afl plan run --processes N`` hands ``--processes N`` to every job's ``afl repro`` (where one engine leaves a
    CPU's cores idle), and names a count below 1 as the error."""
    commands = []
    monkeypatch.setattr(plan, "run_child", lambda cmd: commands.append(cmd) or 0)
    job = plan.Job(TINY_FAVAS, ("c",), False, ("not run",))
    plan.run([job], tmp_path, 300, root=ROOT, processes=2, say=lambda text: None)
    plan.run([job], tmp_path, 300, root=ROOT, say=lambda text: None)
    assert commands[0][-2:] == ["--processes", "2"] and "--processes" not in commands[1]
    with pytest.raises(ParameterError, match="--processes=0"):
        plan.run([job], tmp_path, 300, root=ROOT, processes=0)


def test_a_job_stops_at_the_time_limit_and_no_job_starts_without_time(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plan, "MIN_START_S", 5.0)
    long = plan.Job(Run("favas-table2", (("total_time", 1e6), ("splits", ("iid",)), ("methods", ("fedavg",))),
                        seeds=1, out="results/favas/table2/long"), ("c",), False, ("not run",))
    reports = plan.run([long], tmp_path, 12, root=ROOT)
    assert [(r["state"], r["exit_code"]) for r in reports] == [("stopped at the time limit", 3)]
    assert plan.run([long], tmp_path, plan.MIN_START_S - 1, root=ROOT) == []
    assert "wait for the next job" in capsys.readouterr().out


def test_a_job_reuses_the_runs_its_folder_already_holds_and_computes_and_prices_the_rest(tmp_path):
    """A row grown seed by seed: with one seed of two committed in its folder, the job's command reuses it, its cost
    counts the other seed alone, and the result it writes holds both with one reused; a committed result that
    predates a change of meaning, or holds another setting, is not reused."""
    results = tmp_path / "repo" / "results"
    one = plan.Job(TINY_FAVAS, ("c",), False, ("not run",))
    assert plan.reusing(one, Results(tmp_path / "repo")) == one                     # nothing committed yet
    assert [r["state"] for r in plan.run([one], results, 300, root=ROOT)] == ["finished"]
    held = "results/favas/table2/tiny/favas-table2.json"
    two = plan.reusing(replace(one, run=replace(TINY_FAVAS, seeds=2)), Results(tmp_path / "repo"))
    assert (two.reuse, two.reused) == (held, 1) and two.command.endswith(f" --reuse {held}")
    whole = estimate("favas-table2", seeds=2, **dict(TINY_FAVAS.overrides))
    assert two.work().client_steps == pytest.approx(whole.client_steps / 2) and two.work().runs == whole.runs - 1
    assert [r["state"] for r in plan.run([two], tmp_path / "out", 300, root=tmp_path / "repo")] == ["finished"]
    made = json.loads((tmp_path / "out/favas/table2/tiny/favas-table2.json").read_text())
    assert (len(made["runs"]), made["reused_runs"]) == (2, 1)
    assert f"--reuse {tmp_path / 'repo' / held}" in made["command"]
    (results / "provenance.json").write_text(json.dumps({held: {"commit": "c", "date": "d", "how": "recorded",
                                                                "predates": ["evaluation-after-step"]}}))
    fresh = replace(one, run=replace(TINY_FAVAS, seeds=2))
    assert plan.reusing(fresh, Results(tmp_path / "repo")) == fresh
    (results / "provenance.json").unlink()
    other = replace(one, run=replace(TINY_FAVAS, seeds=2, overrides=(("total_time", 30.0), *TINY_FAVAS.overrides[1:])))
    assert plan.reusing(other, Results(tmp_path / "repo")) == other


def test_a_plan_with_no_time_to_start_a_job_still_reports(tmp_path, capsys):
    out = tmp_path / "new"
    assert main(["plan", "run", "--out", str(out), "--time-limit", "5s", "--root", str(ROOT)]) == 0
    assert json.loads((out / "plan-report.json").read_text()) == [] and "wait for the next job" in \
        capsys.readouterr().out


def test_a_job_a_cpu_finishes_soon_is_left_to_it(tmp_path, monkeypatch, capsys):
    """``--leave-to-cpu H``: a GPU's job passes over what a measured CPU finishes within H hours, and runs the
    rest; without a CPU rate for it, a job is run."""
    job = plan.Job(TINY_FAVAS, ("c",), False, ("not run",))
    steps = job.work().client_steps
    cpu = rates.Rate("mlp32", "cpu-2", steps / 1800, "s", "w")              # 30 minutes on the CPU
    monkeypatch.setattr(plan.Job, "rate", lambda self, measured, machine: cpu if machine == "cpu-2" else None)
    monkeypatch.setattr(plan, "load", lambda root: [cpu])
    assert plan.cpu_minutes(job, [cpu]) == pytest.approx(30.0)
    assert plan.run([job], tmp_path, 300, root=ROOT, leave_to_cpu=1.0) == []
    assert "left to a CPU (30 min there, within --leave-to-cpu 1 h)" in capsys.readouterr().out
    reports = plan.run([job], tmp_path, 300, root=ROOT, leave_to_cpu=0.25)
    assert [r["state"] for r in reports] == ["finished"]
    with pytest.raises(ParameterError, match="--leave-to-cpu"):
        plan.run([job], tmp_path, 300, root=ROOT, leave_to_cpu=-1)


@pytest.mark.parametrize("experiment", ["favas-table2", "qafel-table1", "ghbm-table2", "fedast-fig2"])
def test_runs_on_rounds_and_on_event_clocks_keep_checkpoints(experiment):
    assert plan.Job(Run(experiment, (), seeds=1, out="x"), ("c",), False, ("not run",)).checkpoints()


# -- archives ---------------------------------------------------------------------------------------------------------
def _job_folder(out: Path, name: str, checkpoint_mb: float) -> None:
    (out / name / "x.checkpoints").mkdir(parents=True)
    (out / name / "x.partial.jsonl").write_text('{"run": 1}\n')
    (out / name / "x.checkpoints" / "run.ckpt").write_bytes(bytes(int(checkpoint_mb * 1e6)))


def test_archives_keep_to_the_callers_limits_and_go_back_in_place(tmp_path, capsys):
    out = tmp_path / "out"
    _job_folder(out, "a/small", 0.1)
    _job_folder(out, "b", 3.0)
    _job_folder(out, "c", 0.1)
    (out / "plan-report.json").write_text("[]")
    assert [p.name for p in plan.archive(out, tmp_path / "all", math.inf, 10, math.inf)] == [
        "plan.tar.gz", "a-small.tar.gz", "b.tar.gz", "c.tar.gz"]                     # no limit given: all of it
    (out / "plan-report.json").unlink()
    written = plan.archive(out, tmp_path / "to", max_file_mb=1.0, max_files=2, max_total_mb=64)
    assert [p.name for p in written] == ["a-small.tar.gz", "b.tar.gz"]
    said = capsys.readouterr().out
    assert "run.ckpt (3.0 MB) left out" in said and "c left out: 2 files at most" in said
    with tarfile.open(written[1]) as tar:
        assert tar.getnames() == ["b/x.partial.jsonl"]
    back = plan.unpack_results(written[0], tmp_path / "back")
    assert (back / "a/small/x.checkpoints/run.ckpt").stat().st_size == 100_000
    # a later folder's checkpoint that fits the limits goes in (the room left is counted in bytes, not MB minus bytes)
    roomy = plan.archive(out, tmp_path / "roomy", max_file_mb=4.0, max_files=10, max_total_mb=64)
    with tarfile.open(roomy[1]) as tar:
        assert sorted(tar.getnames()) == ["b/x.checkpoints/run.ckpt", "b/x.partial.jsonl"]
    assert "left out" not in capsys.readouterr().out


def test_a_missing_or_damaged_archive_is_an_error_naming_it(tmp_path):
    with pytest.raises(ParameterError, match="resume-from.*no such file"):
        plan.unpack_results(tmp_path / "gone.tar.gz", tmp_path / "out")
    (tmp_path / "bad.tar.gz").write_bytes(b"\x1f\x8b not really")
    with pytest.raises(ParameterError, match="bad.tar.gz.*intact archive"):
        plan.unpack_results(tmp_path / "bad.tar.gz", tmp_path / "out")
    assert main(["plan", "run", "--out", str(tmp_path / "o"), "--time-limit", "1m", "--resume-from",
                 str(tmp_path / "gone.tar.gz"), "--root", str(ROOT)]) == 2


# -- packed datasets --------------------------------------------------------------------------------------------------
def _packed(src: Path, rel: str, content: bytes, stamp: str | None = None) -> Path:
    import hashlib
    xz = src / f"{rel}.xz"
    xz.parent.mkdir(parents=True, exist_ok=True)
    xz.write_bytes(lzma.compress(content))
    if stamp != "none":
        xz.with_name(xz.name + ".md5").write_text((stamp or hashlib.md5(content).hexdigest()) + "\n")
    return xz


def test_pack_then_unpack_gives_the_files_back_md5_checked(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "toy").mkdir(parents=True)
    (data / "toy" / "a.bin").write_bytes(b"abc" * 1000)
    import hashlib
    md5 = hashlib.md5(b"abc" * 1000).hexdigest()
    monkeypatch.setattr(packing, "locate", lambda name, root=None, download=False: Located(name, data,
                                                                                           {"toy/a.bin": md5}))
    files = packing.pack(["toy"], tmp_path / "packed")
    assert [f.relative_to(tmp_path / "packed").as_posix() for f in files] == ["toy/a.bin.xz"]
    assert packing.unpack(tmp_path / "packed", tmp_path / "root") == tmp_path / "root"
    assert (tmp_path / "root" / "toy" / "a.bin").read_bytes() == b"abc" * 1000


@pytest.mark.parametrize("case, error, match", [
    ("no stamp", DataMissingError, "MD5 stamp of a.bin.xz is missing"),
    ("wrong stamp", ChecksumError, "unpacks to MD5"),
    ("bad stamp", ChecksumError, "32 hex digits"),
    ("damaged", ChecksumError, "damaged xz"),
    ("empty", DataMissingError, "no \\*.xz file"),
])
def test_a_damaged_pack_is_an_error_naming_the_file_and_leaves_nothing(case, error, match, tmp_path):
    src = tmp_path / "packed"
    src.mkdir()
    if case != "empty":
        xz = _packed(src, "toy/a.bin", b"hello", {"no stamp": "none", "wrong stamp": "0" * 32,
                                                  "bad stamp": "xyz"}.get(case))
        if case == "damaged":
            xz.write_bytes(xz.read_bytes()[:-9])
    with pytest.raises(error, match=match):
        packing.unpack(src, tmp_path / "root")
    assert not [p for p in (tmp_path / "root").rglob("*") if p.is_file()]


def test_unpacking_writes_nothing_through_a_symbolic_link(tmp_path):
    """A link planted in the data root (a folder or the file itself) pointing elsewhere: refused, the target kept."""
    src = tmp_path / "packed"
    _packed(src, "toy/a.bin", b"dataset bytes")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "a.bin").write_text("keep me")
    for planted in ("folder", "file"):
        root = tmp_path / f"root-{planted}"
        root.mkdir()
        if planted == "folder":
            (root / "toy").symlink_to(victim)
        else:
            (root / "toy").mkdir()
            (root / "toy" / "a.bin").symlink_to(victim / "a.bin")
        with pytest.raises(ParameterError, match="symbolic link"):
            packing.unpack(src, root)
        assert (victim / "a.bin").read_text() == "keep me"


def test_the_data_commands_need_their_folders(tmp_path, capsys):
    assert main(["data", "unpack", str(tmp_path)]) == 2
    assert "--to" in capsys.readouterr().err
    assert main(["data", "unpack", str(tmp_path / "nothing"), "--to", str(tmp_path / "root")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_a_terminated_plan_passes_the_signal_on_to_its_run(tmp_path):
    """``kill`` (SIGTERM) on a plan reaches the ``afl repro`` it runs (which saves its checkpoints and stops) and both
    end: no run is left computing behind (before, the run went on alone)."""
    import signal
    import subprocess
    import sys
    import time
    marker = tmp_path / "run"
    child = (f"import pathlib, signal, sys, time\nmark = pathlib.Path({str(marker)!r})\n"
             "def stop(*_):\n    mark.write_text('interrupted')\n    sys.exit(3)\n"
             "signal.signal(signal.SIGTERM, stop)\nmark.write_text('started')\ntime.sleep(60)\n")
    parent = f"import sys\nfrom afl.plan import run_child\nsys.exit(run_child([sys.executable, '-c', {child!r}]))"
    proc = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (marker.is_file() and marker.read_text() == "started") and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert marker.read_text() == "interrupted" and proc.returncode != 0
