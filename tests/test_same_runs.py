"""tools/same_runs.py: two results compute the same runs when every field but the timing agrees, run by run."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import same_runs  # noqa: E402


def result(path: Path, runs: list[dict]) -> str:
    path.write_text(json.dumps({"runs": runs}))
    return str(path)


def test_runs_that_differ_only_in_timing_or_a_newer_field_are_the_same(tmp_path, capsys):
    one = {"method": "fedbuff", "seed": 0, "curve": {"accuracy": [0.5, 0.7]}, "wall_seconds": 3.0}
    other = dict(one, wall_seconds=9.0, resumed_at=[4.0], target_reached_accuracy=0.7)
    assert same_runs.main([result(tmp_path / "a.json", [one]), result(tmp_path / "b.json", [other])]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 paired runs the same" in out and "not compared: target_reached_accuracy" in out


def test_a_run_whose_curve_moved_differs_and_is_named(tmp_path, capsys):
    runs = [{"method": m, "seed": s, "curve": {"accuracy": [0.5, 0.7]}} for m in ("fedbuff", "qafel") for s in (0, 1)]
    moved = json.loads(json.dumps(runs))
    moved[3]["curve"]["accuracy"][1] = 0.7000001
    extra = dict(runs[0], seed=2)
    assert same_runs.main([result(tmp_path / "a.json", runs + [extra]), result(tmp_path / "b.json", moved)]) == 1
    out = capsys.readouterr().out
    assert "method=qafel, seed=1: differs in .curve.accuracy[1]" in out and "3 of 4 paired runs the same" in out
    assert "only in a: method=fedbuff, seed=2" in out
