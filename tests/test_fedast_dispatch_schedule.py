"""tools/fedast_dispatch_schedule.py: FedAST's first requests under the cap or at once, in the schedule alone."""
import json
import sys
from dataclasses import replace
from pathlib import Path

from afl.repro import fedast as fr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import fedast_dispatch_schedule as tool  # noqa: E402


def test_the_cap_drops_only_the_later_tasks_first_requests_and_at_once_drops_none():
    """Fig. 5's 384 requests under a cap of 300 busy clients: sent task by task, the first task's 192 all go out
    and the second's start short; sent at once, none is dropped. Arrivals only grow with time."""
    cfg = fr.EXPERIMENTS["fedast-fig5"][0]
    capped = tool.schedule_row(cfg, "mnist*2", 0, True, [10.0, 30.0])
    at_once = tool.schedule_row(cfg, "mnist*2", 0, False, [10.0, 30.0])
    assert capped["dropped_first"][0] == 0 and capped["dropped_first"][1] > 0
    assert at_once["dropped_first"] == [0, 0]
    for row in (capped, at_once):
        early, late = row["arrivals_by"]["10.0"], row["arrivals_by"]["30.0"]
        assert all(0 <= a <= b for a, b in zip(early, late)) and sum(late) > 0
    roomy = tool.schedule_row(replace(cfg, caps=(1000,)), "mnist*2", 0, True, [30.0])
    assert roomy["dropped_first"] == [0, 0]          # a cap above the requests drops nothing


def test_the_tool_writes_both_dispatches_per_seed_beside_the_trained_times(tmp_path):
    runs = [{"method": "fedast-static", "seed": s, "tasks": [{"reached": 10.0 + s}, {"reached": None}]}
            for s in range(2)] + [{"method": "sync-st", "seed": 0, "tasks": []}]
    for name in ("capped", "once"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"runs": runs}))
    out = tmp_path / "out"
    assert tool.main(["--taskset", "mnist*2", "--seeds", "2", "--times", "5,10", "--against",
                      str(tmp_path / "capped.json"), str(tmp_path / "once.json"), "--out", str(out)]) == 0
    rows = json.loads((out / "dispatch-schedule.json").read_text())["rows"]
    assert [(r["seed"], r["dispatch"]) for r in rows] == [(0, "capped"), (0, "at once"), (1, "capped"), (1, "at once")]
    assert rows[2]["reached"] == [11.0, None]
    assert "| 1 | capped |" in (out / "dispatch-schedule.md").read_text() and "11.0, never" in (
        out / "dispatch-schedule.md").read_text()
