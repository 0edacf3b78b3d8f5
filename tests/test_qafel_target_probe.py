"""tools/qafel_target_probe.py: the target that puts QAFeL's substitute at the paper's load, by a rule fixed first."""
import json
import math
import sys
from pathlib import Path

import numpy as np

from afl.scoreboard import qafel as board

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import qafel_target_probe as probe  # noqa: E402


def test_a_target_is_reached_at_the_first_validation_at_or_above_it():
    curve = {"uploads": [0, 500, 1000, 1500], "accuracy": [0.5, 0.91, 0.89, 0.93]}
    assert probe.first_reach(curve, 0.91) == 500
    assert probe.first_reach(curve, 0.92) == 1500
    assert probe.first_reach(curve, 0.95) is None


def test_the_rule_takes_the_target_every_seed_reached_nearest_the_paper_in_log_ratio():
    candidates = [{"target": 0.90, "uploads": [13_000, 13_000]},      # 0.50x: |log| 0.69
                  {"target": 0.91, "uploads": [40_000, 50_000]},      # 1.72x: |log| 0.54
                  {"target": 0.92, "uploads": [26_000, None]}]        # nearest, but one seed never reached it
    assert probe.choose(candidates, reference_k=26.1) == 0.91
    assert probe.choose(candidates[2:], reference_k=26.1) is None
    # log ratio, not difference: 13 k is nearer 26.1 k than 50 k is in thousands (13.1 against 23.9), not in ratio
    assert probe.choose([{"target": 0.9, "uploads": [13_000]}, {"target": 0.91, "uploads": [50_000]}]) == 0.91


def test_the_committed_probe_follows_its_rule_from_its_curves():
    result = json.loads((ROOT / "results/qafel/target-probe/target-probe.json").read_text())
    best = [max(c["accuracy"]) for c in result["curves"]]
    targets = [c["target"] for c in result["candidates"]]
    assert targets == [p / 100 for p in range(85, math.floor(100 * min(best)) + 1)]
    for c in result["candidates"]:
        assert c["uploads"] == [probe.first_reach(curve, c["target"]) for curve in result["curves"]]
    assert result["chosen"] == probe.choose(result["candidates"], result["paper_fedbuff_k"])
    chosen = next(c for c in result["candidates"] if c["target"] == result["chosen"])
    assert 0.5 < np.mean(chosen["uploads"]) / 1000 / result["paper_fedbuff_k"] < 2


def test_the_scoreboards_paper_load_probe_runs_at_the_committed_probes_target():
    """The scoreboard's Table 1 at the paper's load is computed at the target this probe chose, not one typed apart."""
    result = json.loads((ROOT / "results/qafel/target-probe/target-probe.json").read_text())
    assert dict(board.LOAD_RUN.overrides)["target"] == result["chosen"]
