"""The scoreboard (afl.scoreboard, `afl report`): the committed board is what afl report writes, every cell of the
papers' main tables is on it, statuses come from hand-made results as the rules say, and bad data stops it with an
error naming the file, never a traceback and never a write outside the repository."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from afl import claims as c
from afl import scoreboard as sb
from afl.scoreboard import ghbm as ghbm_board, qafel as qafel_board
from afl.cli import main
from afl.papers import PAPERS
from afl.repro import EXPERIMENTS, PAPER_FOLDERS, canonical_out, committed, repo_root
from committed import commit

ROOT = repo_root(Path(__file__).parent)
T2 = ROOT / "results/favas/table2/favas-table2.json"
#: the papers' folders under results/ (an experiment's first word)


def test_the_committed_scoreboard_is_what_afl_report_writes():
    """results/README.md and the README's summary lines, rebuilt from the committed JSON, byte for byte."""
    assert sb.stale(ROOT) == [], "run `afl report` and commit what it writes"
    assert main(["report", "--check", "--root", str(ROOT)]) == 0


def test_every_cell_of_the_main_tables_and_every_statement_is_a_claim():
    claims = [x for cs in sb.papers().values() for x in cs]
    ids = [x.id for x in claims]
    assert len(ids) == len(set(ids))
    numbers = {id(x.rule.number) for x in claims if hasattr(x.rule, "number")}
    tables = {"FAVAS": ("TABLE2",), "GHBM": ("TABLE2", "TABLE3", "TABLE4", "TABLE8", "TABLE9"),
              "QAFeL": ("TABLE1", "TABLE2")}
    for paper, names in tables.items():
        for name in names:
            missing = [n.where for n in getattr(PAPERS[paper], name) if id(n) not in numbers]
            assert missing == [], f"{paper} {name}"
    quotes = {x.quote for x in claims}
    for paper, module in PAPERS.items():
        stated = [s.quote for s in vars(module).values() if isinstance(s, c.Statement)]
        assert stated and set(stated) <= quotes, paper
    for x in claims:                                       # each claim is computable, or says why afl cannot
        assert bool(x.unsupported) != bool(x.measure and x.result and x.run), x.id
        assert x.run is None or x.run.experiment in EXPERIMENTS


def test_afl_report_json_gives_every_field_of_a_claim(capsys):
    assert main(["report", "--json", "--root", str(ROOT)]) == 0
    board = json.loads(capsys.readouterr().out)
    rows = [r for p in board["papers"].values() for r in p["claims"]]
    assert len(rows) == sum(len(x) for x in sb.papers().values())
    for r in rows:
        assert {"paper", "id", "source", "paper_value", "paper_pm", "paper_seeds", "rule", "status", "afl"} <= set(r)
        assert r["status"] in c.STATUSES + c.EXACT_STATUSES
        if r["afl"] is not None:
            assert {"value", "low", "high", "seeds"} <= set(r["afl"]) and "fields" in r["scale"]
        elif r["status"] == c.NOT_RUN:
            assert (r["command"] or "").startswith("afl repro ") and "client steps" in r["cost"] or r["why"]
    table2 = next(r for r in rows if r["id"] == "favas-t2-fedavg-iid")
    assert table2["paper_pm"] == 0.3 and table2["paper_seeds"] == 10 and table2["afl"]["seeds"] == 10


# ---------------------------------------------------------------------------------------------- hand-made results
def _repo(tmp_path, runs, config=None, readme=True):
    """A repository holding one FAVAS Table 2 result made of ``runs`` (method, split, seed -> final accuracy)."""
    saved = json.loads(T2.read_text())
    result = {"experiment": "favas-table2", "command": "afl repro favas-table2 --seeds 10", "quick": False,
              "machine": saved["machine"], "config": saved["config"] | (config or {}),
              "runs": [{"method": m, "split": s, "seed": seed, "final_accuracy": a}
                       for (m, s, seed), a in runs.items()]}
    (tmp_path / "results/favas/table2").mkdir(parents=True)
    (tmp_path / "results/favas/table2/favas-table2.json").write_text(json.dumps(result))
    if readme:
        (tmp_path / "README.md").write_text(f"# x\n\n{sb.BEGIN}\nold\n{sb.END}\n\nrest\n")
    return tmp_path


def _verdicts(root) -> dict:
    return {r["id"]: r for p in sb.board(root)["papers"].values() for r in p["claims"]}


def _table(seeds: int, favas=0.95, fedavg=0.934, normalized=0.95):
    out = {}
    for s in range(seeds):
        wobble = 0.001 * (s % 3 - 1)
        out[("favas", "iid", s)] = favas + wobble
        out[("favas-normalized", "iid", s)] = normalized + wobble
        out[("fedavg", "iid", s)] = fedavg + wobble / 2
    return out


def test_a_level_at_the_papers_scale_and_seeds_is_reproduced(tmp_path):
    v = _verdicts(_repo(tmp_path, _table(10)))
    assert v["favas-t2-fedavg-iid"]["status"] == c.REPRODUCED and v["favas-t2-favas-iid"]["status"] == c.REPRODUCED
    assert v["favas-t2-fedavg-iid"]["scale"]["reduced"] is False
    assert v["favas-t2-fedbuff-iid"]["status"] == c.NOT_RUN        # a row the result lacks is not run, with its cost
    assert v["favas-t2-fedbuff-iid"]["command"].startswith("afl repro favas-table2 --seeds 10")


def test_one_seed_or_a_reduced_field_is_never_reproduced(tmp_path):
    one = _verdicts(_repo(tmp_path / "one", _table(1)))
    assert one["favas-t2-favas-iid"]["status"] == c.CONSISTENT
    assert one["favas-t2-favas-iid"]["scale"]["seeds"] == 1 and one["favas-t2-favas-iid"]["scale"]["paper_seeds"] == 10
    reduced = _verdicts(_repo(tmp_path / "reduced", _table(10), config={"total_time": 1000.0}))
    row = reduced["favas-t2-favas-iid"]
    assert row["status"] == c.CONSISTENT and row["scale"]["fields"] == {"total_time": {"afl": 1000.0, "paper": 5000.0}}
    measured = _verdicts(_repo(tmp_path / "measured", _table(10), config={"eval_every": 50.0}))
    assert measured["favas-t2-favas-iid"]["status"] == c.REPRODUCED    # how often it is evaluated is no reduction
    assert measured["favas-t2-favas-iid"]["scale"]["measured_every"]["eval_every"]["afl"] == 50.0


def test_a_wide_interval_does_not_hold_an_effect(tmp_path):
    runs = _table(3, favas=0.95, fedavg=0.90)
    runs[("favas", "iid", 1)] = runs[("favas-normalized", "iid", 1)] = 0.85      # one seed reverses the ordering
    row = _verdicts(_repo(tmp_path, runs))["favas-beats-fedavg-iid"]
    assert row["afl"]["value"] > 0 and row["afl"]["low"] < 0 and row["status"] == c.OPEN
    assert row["probe"]["judgement"] == c.FAILS                           # its probe has the same wide interval


def test_a_comparison_reads_its_methods_as_their_cells_probes_do(tmp_path):
    """FAVAS beats FedAvg: where FAVAS as written (1/alpha) fails the paper's gain, its probe is the same
    comparison with FAVAS read as its cells' probe variant (favas-normalized), FedAvg as it is."""
    held = _verdicts(_repo(tmp_path / "held", _table(10, favas=0.913, fedavg=0.944, normalized=0.962)))
    row = held["favas-beats-fedavg-iid"]
    assert row["afl"]["value"] == pytest.approx(-3.1, abs=0.05) and row["status"] == c.EXPLAINED
    assert row["probe"]["judgement"] == c.HOLDS and row["probe"]["afl"].startswith("1.8 points")
    failed = _verdicts(_repo(tmp_path / "failed", _table(10, favas=0.913, fedavg=0.944, normalized=0.945)))
    assert failed["favas-beats-fedavg-iid"]["status"] == c.OPEN             # +0.1 is not half the paper's +1.7
    assert failed["favas-beats-fedavg-iid"]["probe"]["judgement"] == c.FAILS
    reproduced = _verdicts(_repo(tmp_path / "reproduced", _table(10, favas=0.951, fedavg=0.934, normalized=0.90)))
    assert reproduced["favas-beats-fedavg-iid"]["status"] == c.REPRODUCED   # a probe is read only where a claim fails
    assert reproduced["favas-beats-fedavg-iid"]["probe"] is None


def test_a_probe_explains_only_where_its_own_rule_holds(tmp_path):
    held = _verdicts(_repo(tmp_path / "held", _table(10, favas=0.913, normalized=0.951)))["favas-t2-favas-iid"]
    assert held["status"] == c.EXPLAINED and held["probe"]["judgement"] == c.HOLDS
    failed = _verdicts(_repo(tmp_path / "failed", _table(10, favas=0.913, normalized=0.932)))["favas-t2-favas-iid"]
    assert failed["status"] == c.OPEN and failed["probe"]["judgement"] == c.FAILS
    assert failed["probe"]["closes"] == pytest.approx((93.2 - 91.3) / (95.1 - 91.3), abs=0.01)
    text, _ = sb.scoreboard(tmp_path / "failed")
    assert "closing 50 % of the gap" in text


def test_a_claim_reads_its_paper_scale_folder_where_committed_else_the_earlier_result(tmp_path):
    """GHBM's Shakespeare cells read each method's 5-seed folder (runs/<method>-<split>) and, until it is
    committed or where it does not cover the claim, the earlier one-seed table."""
    shk = "results/ghbm/shakespeare"
    (tmp_path / shk).mkdir(parents=True)
    (tmp_path / shk / "ghbm-table2.json").write_text((ROOT / shk / "ghbm-table2.json").read_text())
    ids = ("ghbm-t2-fedhbm-shakespeare-non-iid", "ghbm-t2-fedavg-shakespeare-non-iid",
           "ghbm-shakespeare-fedhbm-beats-fedavg-noniid", "ghbm-table4-fedhbm-overhead")

    def read() -> dict:
        v = _verdicts(tmp_path)
        return {i: (v[i]["result"].removeprefix(shk + "/"), v[i]["afl"]["seeds"]) for i in ids}

    assert set(read().values()) == {("ghbm-table2.json", 1)}
    gains = []
    for method in ("fedhbm", "fedavg"):
        folder = tmp_path / shk / "runs" / f"{method}-noniid"
        folder.mkdir(parents=True)
        source = ROOT / shk / "runs" / f"{method}-noniid/ghbm-table2.json"
        (folder / "ghbm-table2.json").write_text(source.read_text())
        seen = read()
        assert seen[f"ghbm-t2-{method}-shakespeare-non-iid"] == (f"runs/{method}-noniid/ghbm-table2.json", 5)
        gains.append((seen["ghbm-shakespeare-fedhbm-beats-fedavg-noniid"], seen["ghbm-table4-fedhbm-overhead"]))
    # FedHBM's gain and its bytes against FedAvg's need both folders: with FedHBM's alone they read the earlier table
    assert gains == [(("ghbm-table2.json", 1),) * 2, (("runs/fedhbm-noniid/ghbm-table2.json", 5),) * 2]


def test_a_method_the_one_seed_table_lacks_reads_its_one_seed_history_run(tmp_path):
    """MIME is in neither the five-seed folders nor the one-seed table: its cells read its one-seed run at the
    paper's protocol under history/, and stay "not run" without it."""
    shk = "results/ghbm/shakespeare"
    (tmp_path / shk).mkdir(parents=True)
    (tmp_path / shk / "ghbm-table2.json").write_text((ROOT / shk / "ghbm-table2.json").read_text())
    assert _verdicts(tmp_path)["ghbm-t2-mime-shakespeare-non-iid"]["status"] == c.NOT_RUN
    history = "history/250-rounds-mime/ghbm-table2.json"
    (tmp_path / shk / history).parent.mkdir(parents=True)
    (tmp_path / shk / history).write_text((ROOT / shk / history).read_text())
    row = _verdicts(tmp_path)["ghbm-t2-mime-shakespeare-non-iid"]
    expected = json.loads((ROOT / shk / history).read_text())
    final = [r["final"] for r in expected["runs"] if r["method"] == "mime" and r["split"] == "noniid"]
    assert row["result"] == f"{shk}/{history}" and row["afl"]["seeds"] == 1
    assert row["afl"]["value"] == pytest.approx(100 * final[0]) and row["status"] == c.OPEN
    # MimeMom's bytes a round (Table 4): its history run against FedAvg's five-seed folder, paired on seed 0
    assert _verdicts(tmp_path)["ghbm-table4-mimemom-overhead"]["status"] == c.NOT_RUN
    for path in ("history/250-rounds-mimemom/ghbm-table2.json", "runs/fedavg-noniid/ghbm-table2.json"):
        (tmp_path / shk / path).parent.mkdir(parents=True)
        (tmp_path / shk / path).write_text((ROOT / shk / path).read_text())
    row = _verdicts(tmp_path)["ghbm-table4-mimemom-overhead"]
    assert row["result"] == f"{shk}/history/250-rounds-mimemom/ghbm-table2.json" and row["afl"]["seeds"] == 1
    assert row["afl"]["value"] == pytest.approx(2.5)      # x, m and c down, the full gradient and Delta up: 5 / 2


def test_fedcms_shakespeare_probe_reads_ghbm_at_tau_1_only(tmp_path):
    """FedCM's and FedADC's Shakespeare rows are labelled "GHBM tau = 1": their probe reads GHBM's runs at tau = 1
    in its own folder, and a GHBM run at another tau there is not that probe."""
    shk = "results/ghbm/shakespeare"
    (tmp_path / shk / "probes/ghbm-tau-1-noniid").mkdir(parents=True)
    (tmp_path / shk / "ghbm-table2.json").write_text((ROOT / shk / "ghbm-table2.json").read_text())
    probe = json.loads((ROOT / shk / "runs/ghbm-noniid/ghbm-table2.json").read_text())
    assert {r["tau"] for r in probe["runs"]} == {10}
    (tmp_path / shk / "probes/ghbm-tau-1-noniid/ghbm-table2.json").write_text(json.dumps(probe))
    for method in ("fedcm", "fedadc"):
        row = _verdicts(tmp_path)[f"ghbm-t2-{method}-shakespeare-non-iid"]
        assert row["status"] == c.OPEN and row["probe"]["judgement"].startswith("not run")   # tau = 10 is not it
    for r in probe["runs"]:
        r["tau"], r["final"] = 1, 0.490 + 0.001 * r["seed"]
    (tmp_path / shk / "probes/ghbm-tau-1-noniid/ghbm-table2.json").write_text(json.dumps(probe))
    for method in ("fedcm", "fedadc"):
        row = _verdicts(tmp_path)[f"ghbm-t2-{method}-shakespeare-non-iid"]
        assert row["status"] == c.EXPLAINED and row["probe"]["judgement"] == c.HOLDS
        assert row["probe"]["afl"].startswith("49.2 %")


def test_fedasts_code_probe_reads_its_task_sets_run_where_committed_else_the_quick_figure(tmp_path):
    """Fig. 5's probe (the task set as the authors' code runs it: its dispatch of the first requests,
    cap_first=False) reads its task set at the paper's targets beside the claim's own run where that is committed,
    else the quick figure's; a claim that holds (six MNIST tasks, the growth from two to six) has none."""
    for name in ("fedast/fig5/fedast-fig5", "fedast/fig5/code-dispatch/fedast-fig5", "fedast/fig5/mnist*2/fedast-fig5",
                 "fedast/fig5/mnist*6/fedast-fig5"):
        commit(tmp_path, name)

    def probes() -> dict:
        v = _verdicts(tmp_path)
        return {i: (v[i]["probe"] or {}).get("result") for i in ("fedast-fig5-mnist*2", "fedast-fig5-mnist*6",
                                                                 "fedast-fig5-grows-mnist")}

    quick = "results/fedast/fig5/code-dispatch/fedast-fig5.json"
    assert probes() == {"fedast-fig5-mnist*2": quick, "fedast-fig5-mnist*6": None, "fedast-fig5-grows-mnist": None}
    # a stand-in: the task set's own run copied where its probe goes (the test asks which file is read)
    commit(tmp_path, "fedast/fig5/mnist*2/fedast-fig5", "fedast/fig5/mnist*2/code-dispatch/fedast-fig5")
    two = "results/fedast/fig5/mnist*2/code-dispatch/fedast-fig5.json"
    assert probes()["fedast-fig5-mnist*2"] == two
    row = _verdicts(tmp_path)["fedast-fig5-mnist*2"]
    assert row["probe"]["afl"] == row["afl"]["text"]                      # the stand-in is the claim's own run


def test_fedasts_fig2_probe_reads_the_figure_run_with_both_of_the_codes_readings(tmp_path):
    """Fig. 2's probe reads the figure run with the authors' code's first requests (cap_first=False,
    first_wave=code), which turns the quick figure's -5 % into a gain, so the difference is explained; where the
    probe's folder held the default's runs (a stand-in) it would fail and leave the claim open."""
    run = sb.fedast.CLAIMS[[x.id for x in sb.fedast.CLAIMS].index("fedast-fig2-faster")].probe.run
    assert dict(run.overrides) == {"first_wave": "code", "cap_first": False} and run.out == "results/fedast/fig2/code"
    commit(tmp_path, "fedast/fig2/fedast-fig2")
    commit(tmp_path, "fedast/fig2/code/fedast-fig2")
    row = _verdicts(tmp_path)["fedast-fig2-faster"]
    assert row["status"] == c.EXPLAINED and row["probe"]["afl"].startswith("14.9 % sooner")
    commit(tmp_path, "fedast/fig2/fedast-fig2", "fedast/fig2/code/fedast-fig2")
    row = _verdicts(tmp_path)["fedast-fig2-faster"]
    assert row["status"] == c.OPEN and row["probe"]["judgement"] == c.FAILS


def test_the_baselines_beyond_the_papers_quote_their_abstracts_and_read_the_async_family():
    from afl.papers import beyond
    statements = [v for v in vars(beyond).values() if isinstance(v, c.Statement)]
    assert len(statements) == 3
    for s in statements:
        where, sentence = beyond.ABSTRACTS[s.paper]
        assert s.source == where and s.quote in sentence
    rows = sb.board(ROOT)["papers"][sb.BEYOND]["claims"]
    assert len(rows) == 6 and {r["result"] for r in rows} == {"results/async-family/async-family.json"}
    assert all(r["afl"]["seeds"] == 5 and r["scale"]["data"] and r["status"] != c.REPRODUCED for r in rows)


def test_afl_report_writes_and_checks_a_repository(tmp_path, capsys):
    root = _repo(tmp_path, _table(10))
    assert main(["report", "--check", "--root", str(root)]) == 1
    assert "results/README.md is stale" in capsys.readouterr().err
    assert main(["report", "--root", str(root)]) == 0
    readme = (root / "README.md").read_text()
    assert "old" not in readme and readme.endswith("\n\nrest\n") and "- **FAVAS**: 27 claims: 3 reproduced" in readme
    assert "**reproduced**" in (root / "results/README.md").read_text()
    assert main(["report", "--check", "--root", str(root)]) == 0
    (root / "README.md").write_text("# no markers\n")
    assert main(["report", "--root", str(root)]) == 2


# ------------------------------------------------------------------------------------------ bad data cannot fool it
def _report(root, capsys) -> tuple[int, str]:
    code = main(["report", "--root", str(root)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("bad, expected", [
    ("Infinity", "is not valid JSON"), ("NaN", "is not valid JSON"), ('"91.3"', "a number, not the string '91.3'"),
    ("null", "a number, not null"), ("[0.9]", "a number, not a list")])
def test_a_bad_value_stops_the_board_naming_file_and_key(tmp_path, capsys, bad, expected):
    root = _repo(tmp_path, _table(3))
    path = root / "results/favas/table2/favas-table2.json"
    text = path.read_text().replace('"final_accuracy": 0.949', f'"final_accuracy": {bad}', 1)
    assert text != path.read_text()
    path.write_text(text)
    code, err = _report(root, capsys)
    assert code == 2 and err.startswith("afl: error: results/favas/table2/favas-table2.json") and expected in err
    assert "Traceback" not in err and not (root / "results/README.md").exists()


def test_damaged_files_stop_the_board_naming_them(tmp_path, capsys):
    root = _repo(tmp_path, _table(3))
    path = root / "results/favas/table2/favas-table2.json"
    good = path.read_text()
    path.write_text(good[: len(good) // 2])                          # truncated
    code, err = _report(root, capsys)
    assert code == 2 and "results/favas/table2/favas-table2.json: is not valid JSON" in err
    path.write_text(json.dumps({"experiment": "favas-table2", "config": [], "runs": json.loads(good)["runs"]}))
    code, err = _report(root, capsys)
    assert code == 2 and "favas-table2.json: experiment/config/runs" in err and "Traceback" not in err
    path.write_text(json.dumps(json.loads(good) | {"runs": {"0": 1}}))
    code, err = _report(root, capsys)
    assert code == 2 and "favas-table2.json: runs: a list of runs" in err
    path.unlink()
    path.symlink_to(path.name)                                        # a link to itself
    code, err = _report(root, capsys)
    assert code == 2 and "favas-table2.json: cannot be followed" in err
    path.unlink()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text(good)
    path.symlink_to(outside)
    code, err = _report(root, capsys)
    assert code == 2 and "links outside the repository" in err


def test_afl_report_never_writes_through_a_link(tmp_path, capsys):
    root = _repo(tmp_path / "repo", _table(3))
    victim = tmp_path / "victim.md"
    victim.write_text("keep me\n")
    (root / "results/README.md").symlink_to(victim)
    code, err = _report(root, capsys)
    assert code == 2 and "results/README.md is a symbolic link" in err and victim.read_text() == "keep me\n"
    (root / "results/README.md").unlink()
    readme = root / "README.md"
    victim.write_text(readme.read_text())
    readme.unlink()
    readme.symlink_to(victim)
    code, err = _report(root, capsys)
    assert code == 2 and "README.md is a symbolic link" in err and "old" in victim.read_text()


def tracked_results() -> list[Path]:
    """The JSON files under results/ that git tracks: the committed results (a newcomer's ``make demo`` writes the
    git-ignored ``results/demo/``, an uncommitted ``afl repro --out results/...`` its own)."""
    listed = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True, check=True)
    tracked = [ROOT / p for p in listed.stdout.split() if p.endswith(".json")]
    assert len(tracked) > 20
    return tracked


def test_the_provenance_of_every_committed_result_is_recorded():
    """results/provenance.json (tools/provenance.py) names the commit of every committed result and what it predates;
    the board reads it."""
    provenance = json.loads((ROOT / "results/provenance.json").read_text())
    for path in tracked_results():
        data = json.loads(path.read_text())
        if "experiment" in data:
            entry = provenance[str(path.relative_to(ROOT))]
            assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"]) and entry["how"] in ("recorded", "committed")
    assert provenance["results/qafel/table1/paired-10-seeds/qafel-table1.json"]["predates"] == [
        "dropout-seeding", "dropout-per-run"]


# ---------------------------------------------------------------------------------------------- results' layout
def folder(experiment: str) -> str:
    """The folder of results/ an experiment's results live in: its paper's, or its own beyond the papers."""
    paper = experiment.split("-")[0]
    return paper if paper in PAPER_FOLDERS else experiment


def test_results_are_laid_out_by_paper():
    """Every committed result lives in results/<paper>/...; each experiment's default --out is its paper's folder.
    Committed: tracked by git (``make demo`` writes the git-ignored ``results/demo/`` of a newcomer's clone)."""
    tracked = tracked_results()
    assert not [p for p in tracked if p.parent == ROOT / "results" and p.name != "provenance.json"]
    for path in tracked:
        if "measurements" in path.parts or path.name == "provenance.json":
            continue
        data = json.loads(path.read_text())
        paper = folder(data["experiment"]) if "experiment" in data else None     # a tool's probe: any paper's
        assert path.relative_to(ROOT / "results").parts[0] in ({paper} if paper else set(PAPER_FOLDERS)), path
    for name in EXPERIMENTS:
        out = canonical_out(name)
        assert out == f"results/{name}" if folder(name) == name else out.startswith(f"results/{folder(name)}/")
    assert canonical_out("async-family") == "results/async-family"              # beyond the papers: its own folder
    assert canonical_out("ghbm-table2", dataset="shakespeare") == "results/ghbm/shakespeare"
    assert canonical_out("ghbm-table2", quick=True) == "results/ghbm/fashion-mnist"
    assert committed("favas-table2")["experiment"] == "favas-table2"
    assert committed("ghbm/shakespeare/ghbm-table2")["config"]["dataset"] == "shakespeare"


def test_a_missing_result_names_the_command_that_makes_it(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "afl").mkdir()
    assert committed("fedast-fig9", root=tmp_path) is None
    assert "run `afl repro fedast-fig9 --out results/fedast/fig9`" in capsys.readouterr().out


QUICKSTART_LINE = re.compile(r"(\S+) +([\d.]+) % test accuracy at simulated time 2000 "
                             r"\((\d+) server steps, ([\d,]+) client")


def test_the_readme_quickstart_runs_as_written():
    """It prints the README's lines: the steps exactly (the delay schedule's, on any CPU), each accuracy within the
    float32 rounding another thread count or CPU brings (3.0 points at most among the figures the README gives), and
    FAVAS with ᾱ/α far above the other two, as the README reads them."""
    readme = (ROOT / "README.md").read_text()
    code, printed = re.search(r"## Quickstart.*?```python\n(.*?)```.*?```\n(.*?)```", readme, re.S).groups()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=1800,
                         env={**os.environ, "AFL_THREADS": "2"})   # two threads, as the README; the timeout
    # guards against a hang, not a slow CPU: about 4 min alone on 2 cores, more beside another job
    assert out.returncode == 0, out.stderr
    ours, theirs = (QUICKSTART_LINE.findall(text) for text in (out.stdout, printed))
    assert len(ours) == len(theirs) == len(out.stdout.splitlines()) == 3
    assert [(m, s, c) for m, _, s, c in ours] == [(m, s, c) for m, _, s, c in theirs]
    acc = {m: float(a) for m, a, _, _ in ours}
    assert all(abs(acc[m] - float(a)) <= 5.0 for m, a, _, _ in theirs), (acc, theirs)
    assert acc["favas-normalized"] - max(acc["fedavg"], acc["favas"]) >= 30.0
    assert len(readme.splitlines()) <= 220


def test_every_relative_link_of_the_markdown_pages_resolves():
    """The README, the course map, the data notes, docs/ and every results README: no moved page left a dead link;
    the board's links to a result's settings land on their anchors."""
    pages = [ROOT / "README.md", ROOT / "notebooks/README.md", ROOT / "data/README.md", *ROOT.glob("docs/*.md"),
             *(ROOT / "results").rglob("README.md")]
    dead = [f"{page.relative_to(ROOT)}: {target}" for page in pages
            for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text())
            if not re.match(r"[a-z]+:|#", target) and not (page.parent / target.split("#")[0]).exists()]
    assert dead == []
    board = (ROOT / "results/README.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', board))
    assert {t[1:] for t in re.findall(r"\]\((#r-[^)]+)\)", board)} <= anchors


NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.py")) + sorted((ROOT / "notebooks/exercises").glob("*.py"))


def test_a_notebook_without_afl_says_how_to_install_it():
    """The first code cell of every notebook (the same in all): silent where afl imports, one line on how to get it
    where it does not (a hosted JupyterHub or Colab with a bare kernel)."""
    firsts = {re.split(r"^# %%\n", p.read_text(), flags=re.M)[1].split("\n# %%")[0].strip() for p in NOTEBOOKS}
    assert len(NOTEBOOKS) >= 16 and len(firsts) == 1
    first = firsts.pop()
    assert "import afl" in first and "raise SystemExit" in first
    ok = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout == ok.stderr == ""
    bare = subprocess.run([sys.executable, "-c", "import sys; sys.modules['afl'] = None\n" + first],
                          capture_output=True, text=True, cwd=ROOT)
    assert bare.returncode == 1 and bare.stderr.startswith("afl is not installed in this kernel: `pip install afl-")
    assert "afl data download mnist" in bare.stderr and "Traceback" not in bare.stderr


def test_any_afl_command_turns_an_unexpected_error_into_one_line(monkeypatch, capsys):
    """An OSError names its file; anything else unexpected is one line with its kind (AFL_TRACEBACK=1 re-raises)."""
    import afl.cli as cli

    def unreadable(args):
        raise PermissionError(13, "Permission denied", "results/x.json")
    monkeypatch.setattr(cli, "_report", unreadable)
    assert main(["report"]) == 2
    assert capsys.readouterr().err == "afl: error: results/x.json: Permission denied\n"

    def broken(args):
        raise TypeError("list indices must be integers")
    monkeypatch.setattr(cli, "_report", broken)
    assert main(["report"]) == 2
    assert capsys.readouterr().err.startswith("afl: error: TypeError: list indices must be integers")
    monkeypatch.setenv("AFL_TRACEBACK", "1")
    with pytest.raises(TypeError):
        main(["report"])


def _tau_sweep(root, dest: str, lead: dict) -> None:
    """The committed τ sweep at ``dest`` (under results/, no .json), ``lead[tau]`` added to every seed's final
    accuracy at that τ."""
    sweep = json.loads(commit(root, "ghbm/tau/ghbm-tau", dest=dest).read_text())
    for run in sweep["runs"]:
        run["final"] += lead.get(run["tau"], 0.0)
    (root / f"results/{dest}.json").write_text(json.dumps(sweep))


def test_a_failing_tau_claim_is_probed_by_its_own_rule_on_the_longer_sweep(tmp_path):
    """Fig. 2's τ claims read the 300-round sweep; their probe is the claims' own measure and rule on the
    1,000-round sweep (``TAU_LONG``): not run until it is committed; where τ = 10 leads every seed there, it explains
    them; where τ = 1 does, they stay open."""
    _tau_sweep(tmp_path, "ghbm/tau/ghbm-tau", {1: 0.05})              # τ = 1 best in every seed: both fail
    v = _verdicts(tmp_path)
    for id_ in ("ghbm-tau-crucial", "ghbm-best-tau"):
        assert v[id_]["status"] == c.OPEN and v[id_]["probe"]["judgement"].startswith("not run")
    _tau_sweep(tmp_path, ghbm_board.TAU_LONG, {10: 0.05})
    v = _verdicts(tmp_path)
    for id_ in ("ghbm-tau-crucial", "ghbm-best-tau"):
        assert v[id_]["status"] == c.EXPLAINED and v[id_]["probe"]["judgement"] == "holds"
        assert v[id_]["result"] == "results/ghbm/tau/ghbm-tau.json"           # the claim still reads 300 rounds
        assert v[id_]["probe"]["result"] == f"results/{ghbm_board.TAU_LONG}.json"
    _tau_sweep(tmp_path, ghbm_board.TAU_LONG, {1: 0.05})
    v = _verdicts(tmp_path)
    for id_ in ("ghbm-tau-crucial", "ghbm-best-tau"):
        assert v[id_]["status"] == c.OPEN and v[id_]["probe"]["judgement"].startswith("fails")


def _qafel_table1(root, *names, rows=None):
    """Commit QAFeL Table 1 results ``names`` (paths under results/qafel/table1, no .json) into ``root``, keeping
    only the runs of ``rows`` where given."""
    for name in names:
        commit(root, f"qafel/table1/{name}", methods=rows)


def test_a_qafel_cell_reads_its_rows_paper_protocol_run_where_committed(tmp_path):
    """QAFeL's Table 1 cells read a row's own run at the paper's protocol (table1/paper/<method>) where it is
    committed, else the 2,500-user table: FedBuff's from its paper run, 4/4 QAFeL's (no paper run) from the other."""
    _qafel_table1(tmp_path, "2500-users/qafel-table1", "paper/fedbuff/qafel-table1")
    v = _verdicts(tmp_path)
    fedbuff, qafel = v["qafel-t1-fedbuff-uploads"], v["qafel-t1-qafel_c4_s4-uploads"]
    assert fedbuff["result"] == "results/qafel/table1/paper/fedbuff/qafel-table1.json"
    assert fedbuff["scale"]["fields"] == {} and fedbuff["afl"]["seeds"] == 3      # the paper's setting but its data
    assert v["qafel-t1-fedbuff-kb_per_upload"]["result"] == fedbuff["result"]
    assert qafel["result"] == "results/qafel/table1/2500-users/qafel-table1.json" and qafel["scale"]["fields"]


def test_qafel_claims_between_rows_read_the_merged_paper_table_only_where_it_holds_their_rows(tmp_path):
    """The merged paper-protocol Table 1 (table1/paper, FedBuff and 4/4 QAFeL): FedBuff against 4/4 reads it; 2/2
    against FedBuff (2/2 not in it) reads the 2,500-user table; a claim on every QAFeL row is not judged on the one
    row it holds: it reads the quick table, which holds them all."""
    _qafel_table1(tmp_path, "qafel-table1", "2500-users/qafel-table1", "paper/fedbuff/qafel-table1",
                  "paper/qafel_c4_s4/qafel-table1")
    _qafel_table1(tmp_path, "paper/qafel-table1", rows=("fedbuff", "qafel_c4_s4"))   # the merged table with two rows
    v = _verdicts(tmp_path)
    assert v["qafel-fig4-same-speed-7x"]["result"] == "results/qafel/table1/paper/qafel-table1.json"
    assert v["qafel-fig4-same-speed-7x"]["scale"]["fields"] == {}
    assert v["qafel-2-2-more-uploads"]["result"] == "results/qafel/table1/2500-users/qafel-table1.json"
    for claim in ("qafel-fig4-saves-upload", "qafel-fig4-saves-broadcast"):
        assert v[claim]["result"] == "results/qafel/table1/qafel-table1.json"
        assert "not in the result" not in v[claim]["afl"]["text"]


def _at_load(root, name: str, dest: str, method: str, times: float) -> None:
    """Commit ``name``'s FedBuff and ``method`` runs as the table at the paper's load ``dest``, ``method``'s uploads
    ``times`` as many."""
    path = commit(root, name, dest=dest, methods=("fedbuff", method))
    load = json.loads(path.read_text())
    for run in load["runs"]:
        run["uploads_to_target"] *= times if run["method"] == method else 1.0
    path.write_text(json.dumps(load))


def test_a_failing_qafel_table1_claim_is_probed_at_the_papers_load_by_its_own_rule(tmp_path):
    """Table 1 at the paper's load (table1/paper-load, the 91 % target) probes a failing claim with the claim's own
    measure and rule: 2/2 at 3.6× FedBuff's uploads there explains the 85 % table's smaller ratio; a claim whose rows
    the load table lacks is probed as not run; exact message sizes have no probe."""
    _qafel_table1(tmp_path, "paper/qafel-table1")
    v = _verdicts(tmp_path)
    assert v["qafel-2-2-more-uploads"]["status"] == c.OPEN
    assert v["qafel-2-2-more-uploads"]["probe"]["judgement"].startswith("not run")
    _at_load(tmp_path, "qafel/table1/paper/qafel-table1", "qafel/table1/paper-load/qafel-table1", "qafel_c2_s2", 3.6)
    v = _verdicts(tmp_path)
    two = v["qafel-2-2-more-uploads"]
    assert two["result"] == "results/qafel/table1/paper/qafel-table1.json"     # the claim still reads 85 %
    assert two["status"] == c.EXPLAINED and two["probe"]["judgement"] == "holds"
    assert two["probe"]["result"] == "results/qafel/table1/paper-load/qafel-table1.json"
    assert v["qafel-more-uploads-s4"]["probe"]["judgement"].startswith("not run")      # 2/4 and 4/4 not in it
    from_table1 = [k for k in qafel_board.CLAIMS if k.id.startswith("qafel-t1-") or k.result == qafel_board.T1_PAPER]
    assert {k.probe is None for k in from_table1 if k.exact} == {True}                # message sizes: none
    assert {k.probe.result for k in from_table1 if not k.exact} == {qafel_board.T1_LOAD}


def test_a_failing_qafel_table2_cell_is_probed_at_the_papers_load(tmp_path):
    """Table 2's uploads cells, 3-8x below CelebA's at 85 %, are probed as Table 1's are: the same level at the 91 %
    target (table2/paper-load); a 2-bit client at 8x its 85 % uploads there is explained; message sizes have none."""
    for row in ("fedbuff", "qafel_c8_stopk", "qafel_c2_stopk"):
        commit(tmp_path, f"qafel/table2/paper/{row}/qafel-table2")
    v = _verdicts(tmp_path)
    cell = "qafel-t2-qafel_c2_stopk-uploads"
    assert v[cell]["status"] == c.OPEN and v[cell]["probe"]["judgement"].startswith("not run")
    _at_load(tmp_path, "qafel/table2/paper/qafel-table2", "qafel/table2/paper-load/qafel-table2", "qafel_c2_stopk", 8.0)
    v = _verdicts(tmp_path)
    assert v[cell]["result"] == "results/qafel/table2/paper/qafel_c2_stopk/qafel-table2.json"    # still 85 %
    assert v[cell]["status"] == c.EXPLAINED and v[cell]["probe"]["judgement"] == "holds"
    assert v["qafel-t2-fedbuff-uploads"]["probe"]["judgement"] != "holds"              # FedBuff at 85 %'s uploads
    assert v["qafel-t2-qafel_c8_stopk-uploads"]["probe"]["judgement"].startswith("not run")   # not in the load table
    table2 = [k for k in qafel_board.CLAIMS if k.id.startswith("qafel-t2-")]
    assert {k.probe is None for k in table2 if k.exact} == {True}
    assert {k.probe.result for k in table2 if not k.exact} == {qafel_board.T2_LOAD}
