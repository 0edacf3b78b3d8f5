"""tools/qafel_server_channel.py: QAFeL's server channel beside its client channel, from a run's counters."""
import json
import math
import sys
from pathlib import Path

import pytest

from afl.repro import qafel as qr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import qafel_probe  # noqa: E402
import qafel_server_channel as probe  # noqa: E402


def run(accuracy, upload_error, method="qafel_c2_s2"):
    """A hand-made run: 2 evaluation windows of 10 uploads and 1 server step each."""
    curve = dict(time=[0.0, 1.0, 2.0], accuracy=accuracy, uploads=[0, 10, 20], server_steps=[0, 1, 2],
                 upload_error=upload_error, buffer_error=[0, 0.5, 1.5], broadcast_error=[0, 0.7, 1.3],
                 hidden_gap=[0, 4.0, 13.0])
    return dict(method=method, seed=0, curve=curve)


def test_windows_give_the_mean_errors_and_the_gap_in_server_steps():
    w = probe.windows(qr.channel_errors(run([0.4, 0.6, 0.7], [0, 2.0, 5.0])))
    assert [x["uploads"] for x in w] == [10, 20]
    assert [x["upload"] for x in w] == [0.2, pytest.approx(0.3)]
    assert [x["broadcast"] for x in w] == [0.7, pytest.approx(0.6)]
    assert [x["gap_steps"] for x in w] == [2.0, 3.0]
    row = probe.summary([run([0.4, 0.6, 0.7], [0, 2.0, 5.0])], {})[0]
    assert row["mean"]["gap_steps"] == pytest.approx(math.sqrt(6.5)) and row["against_committed"] is None


def test_the_gaps_part_along_the_last_step_is_a_column_where_every_run_recorded_it():
    lagged = run([0.4, 0.6, 0.7], [0, 2.0, 5.0])
    lagged["curve"]["hidden_lag"] = [0, 1.5, 1.0]
    rows = probe.summary([lagged, run([0.4, 0.5, 0.6], [0, 1.0, 2.0], method="qafel_c2_s4")], {})
    assert [w["lag_steps"] for w in rows[0]["windows"]] == [1.5, -0.5] and rows[0]["mean"]["lag_steps"] == 0.5
    assert "lag_steps" not in rows[1]["mean"] and "lag_steps" not in rows[1]["windows"][0]
    result = dict(command="c", machine="m", setting="s", rows=rows)
    assert "along the last step" not in probe.markdown(result)          # not every run recorded it
    both = probe.markdown(dict(result, rows=rows[:1]))
    assert "| 0 | 0.250 | 0.750 | 0.65 | 2.55 | 0.5 | – |" in both and "| 10 | 0.7 / 2 / 1.5 |" in both


@pytest.mark.parametrize("folder", ["server-channel", "server-channel/lag", "server-channel/lag/seed-1",
                                    "server-channel/lag/seed-2"])
def test_the_committed_probe_follows_from_its_curves(folder):
    result = json.loads((ROOT / "results/qafel" / folder / "server-channel.json").read_text())
    paths = qafel_probe.recorded(probe.arguments(), result["command"]).against
    against = qafel_probe.committed_runs([ROOT / path for path in paths])
    rows = probe.summary([dict(method=r["method"], seed=r["seed"], curve=r["curve"]) for r in result["rows"]],
                         against)
    assert rows == result["rows"]
    assert (ROOT / "results/qafel" / folder / "server-channel.md").read_text() == probe.markdown(result)
