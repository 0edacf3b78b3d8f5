"""The scoreboard (afl.scoreboard, `afl report`) and the results' layout by paper."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from afl import scoreboard as sb
from afl.cli import main
from afl.repro import EXPERIMENTS, canonical_out, committed, repo_root

ROOT = repo_root(Path(__file__).parent)


def test_the_committed_scoreboard_is_what_afl_report_writes():
    """results/README.md and the README's summary lines, rebuilt from the committed JSON, byte for byte."""
    assert sb.stale(ROOT) == [], "run `afl report` and commit what it writes"
    assert main(["report", "--check", "--root", str(ROOT)]) == 0


def test_every_paper_has_six_claims_or_more_each_with_a_computed_status():
    claims = sb.papers()
    assert list(claims) == ["FAVAS", "GHBM", "QAFeL", "FedAST"]
    ids = [c.id for cs in claims.values() for c in cs]
    assert len(ids) == len(set(ids))
    for paper, cs in claims.items():
        assert len(cs) >= 6, paper
        for c in cs:
            v = sb.verdict(c, ROOT)
            assert v["status"] in sb.STATUSES
            if c.probe:                                   # an explanation is a committed file
                assert (ROOT / c.probe).is_file(), c.probe
            if v["status"] == sb.NOT_RUN:                 # not run: what to run and what it costs
                assert v["command"].startswith("afl ") and "client steps" in v["cost"]
            else:
                assert v["afl"] != "–" and v["device"] and v["scale"]


def _claim(**kw):
    base = dict(id="t", text="FAVAS beats FedAvg", paper="88.9 against 38.7 %", result="favas/table2/favas-table2",
                measure=sb.Difference(("rows", "favas", "iid", "mean"), ("rows", "fedavg", "iid", "mean")),
                rule=sb.Above(0), unit="points")
    return sb.Claim(**(base | kw))


@pytest.fixture
def root(tmp_path):
    """A repository of one result: FAVAS 91, FedAvg 94 on IID (two seeds each), computed on a CPU."""
    rows = {"favas": {"iid": {"mean": 91.0, "std": 0.1, "per_seed": [91.0, 91.0]}},
            "fedavg": {"iid": {"mean": 94.0, "std": 0.1, "per_seed": [94.0, 94.0]}}}
    config = json.loads((ROOT / "results/favas/table2/favas-table2.json").read_text())["config"]
    result = {"experiment": "favas-table2", "command": "afl repro favas-table2 --seeds 2", "quick": False,
              "machine": "Linux x86_64, 2 CPU cores, device cpu", "config": config | {"seeds": 2}, "rows": rows,
              "runs": [{"method": "favas"}]}
    folder = tmp_path / "results/favas/table2"
    folder.mkdir(parents=True)
    (folder / "favas-table2.json").write_text(json.dumps(result))
    (tmp_path / "probe.md").write_text("why")
    return tmp_path


def test_a_status_is_computed_from_the_result_and_the_rule(root):
    assert sb.verdict(_claim(), root)["status"] == sb.OPEN                     # -3 points: above 0 does not hold
    assert sb.verdict(_claim(probe="probe.md"), root)["status"] == sb.EXPLAINED
    assert sb.verdict(_claim(probe="missing.md"), root)["status"] == sb.OPEN    # a probe must be committed
    flipped = sb.Difference(("rows", "fedavg", "iid", "mean"), ("rows", "favas", "iid", "mean"))
    v = sb.verdict(_claim(measure=flipped), root)
    assert v["status"] == sb.REPRODUCED and v["afl"] == "3.0 points"
    assert v["scale"] == "the paper's" and v["device"] == "CPU, 2 CPU cores" and v["seeds"] == "2 (paper 10)"
    assert v["command"] == "afl repro favas-table2 --seeds 2"                    # the canonical folder: no --out
    absent = sb.verdict(_claim(result="favas/fig3a/favas-fig3a"), root)
    assert absent["status"] == sb.NOT_RUN and absent["command"] == "afl repro favas-fig3a"
    assert re.search(r"client steps and \d+ evaluations \(7 runs\)", absent["cost"])


def test_rules_and_measures():
    m = sb.Measured
    assert sb.Within(4.0, 1.5).holds(m(5.5)) and not sb.Within(4.0, 1.5).holds(m(5.6))
    assert sb.Within.accuracy(88.9, 0.9) == sb.Within(88.9, 1.8) and sb.Within.accuracy(47.3) == sb.Within(47.3, 1.5)
    assert sb.Above(0).holds(m(0.01)) and not sb.Above(0).holds(m(0.0))
    assert sb.Between(1, 1.5).holds(m(1.5)) and not sb.Between(1, 1.5).holds(m(0.99))
    assert sb.Covers(1.07).holds(m(1.16, 0.91, 1.49)) and not sb.Covers(1.07).holds(m(1.16))
    result = {"rows": {"1": {"mean": 70.0, "x": [1.0, 2.0, 4.0]}, "10": {"mean": 79.0, "x": [2.0, 4.0, 8.0]},
                       "40": {"mean": 75.0, "x": {"a": 1.0, "b": 3.0}}}}
    assert sb.Best(("rows",), ("mean",)).of(result).value == 10.0
    assert sb.Value(("rows", sb.FIRST, "mean")).of(result).value == 70.0
    assert sb.Mean(("rows", sb.LAST, "x")).of(result).value == 2.0
    assert sb.Ratio(("rows", "10", "mean"), sb.Value(("rows", "1", "mean"))).of(result).value == pytest.approx(79 / 70)
    paired = sb.PairedRatio(("rows", "10", "x"), ("rows", "1", "x")).of(result)
    assert paired.value == pytest.approx(2.0) and paired.low == pytest.approx(2.0)      # no spread


def test_afl_report_writes_and_checks_a_repository(tmp_path, capsys):
    (tmp_path / "README.md").write_text(f"# x\n\n{sb.BEGIN}\nold\n{sb.END}\n\nrest\n")
    assert main(["report", "--check", "--root", str(tmp_path)]) == 1
    assert "results/README.md is stale" in capsys.readouterr().err
    (tmp_path / "results").mkdir()
    assert main(["report", "--root", str(tmp_path)]) == 0
    readme = (tmp_path / "README.md").read_text()
    assert "old" not in readme and readme.endswith("\n\nrest\n") and "- **FAVAS**: 0/8 claims reproduced" in readme
    assert "**not run**" in (tmp_path / "results/README.md").read_text()
    assert main(["report", "--check", "--root", str(tmp_path)]) == 0
    (tmp_path / "README.md").write_text("# no markers\n")
    assert main(["report", "--root", str(tmp_path)]) == 2


def test_results_are_laid_out_by_paper():
    """Every committed result lives in results/<paper>/...; each experiment's default --out is its paper's folder."""
    assert not list((ROOT / "results").glob("*.json"))
    for path in (ROOT / "results").rglob("*.json"):
        if "gpu-visits" in path.parts:
            continue
        experiment = json.loads(path.read_text()).get("experiment", path.stem)
        assert path.relative_to(ROOT / "results").parts[0] == experiment.split("-")[0], path
    for name in EXPERIMENTS:
        assert canonical_out(name).startswith(f"results/{name.split('-')[0]}/")
    assert canonical_out("ghbm-table2", dataset="shakespeare") == "results/ghbm/shakespeare"
    assert canonical_out("ghbm-table2", quick=True) == "results/ghbm/fashion-mnist"
    assert committed("favas-table2")["experiment"] == "favas-table2"
    assert committed("ghbm/shakespeare/ghbm-table2")["config"]["dataset"] == "shakespeare"


def test_a_missing_result_names_the_command_that_makes_it(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "afl").mkdir()
    assert committed("fedast-fig9", root=tmp_path) is None
    assert "run `afl repro fedast-fig9 --out results/fedast/fig9`" in capsys.readouterr().out


def test_the_readme_quickstart_runs_as_written():
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"## Quickstart.*?```python\n(.*?)```", readme, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == ["fedavg", "favas"]
    assert len(readme.splitlines()) <= 220


def test_every_relative_link_of_the_markdown_pages_resolves():
    """The README, the course map, the data notes, docs/ and every results README: no moved page left a dead link."""
    pages = [ROOT / "README.md", ROOT / "notebooks/README.md", ROOT / "data/README.md", *ROOT.glob("docs/*.md"),
             *(ROOT / "results").rglob("README.md")]
    dead = [f"{page.relative_to(ROOT)}: {target}" for page in pages
            for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text())
            if not re.match(r"[a-z]+:|#", target) and not (page.parent / target.split("#")[0]).exists()]
    assert dead == []


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
