"""tools/qafel_hidden_state.py: QAFeL's hidden state tested beside its server model, the run it watches unchanged."""
import json
import math
import sys
from pathlib import Path

import pytest

from afl.data import make_synthetic
from afl.repro import qafel as qr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import qafel_hidden_state as probe  # noqa: E402
import qafel_probe  # noqa: E402

@pytest.fixture(scope="module")
def tiny():
    """A 2/2 row on a tiny synthetic federation, run plain and watched (the hidden state tested at every grid
    point)."""
    cfg = qr.setting("qafel-table1", quick=True, users=24, max_size=8, validation=None, max_uploads=120,
                     eval_every=20, lr=0.05, server_lr=1.0, batch=8, target=1.0, methods=("qafel_c2_s2",))
    data = make_synthetic(300, 60, shape=(3, 32, 32), num_classes=2, seed=0, noise=3.0)
    plain = qr.compute_run(cfg, "qafel_c2_s2", None, 0, dataset=data)
    watched = qr.compute_run(cfg, "qafel_c2_s2", None, 0, dataset=data, learner_class=probe.HiddenStateProbe)
    return plain, watched


def test_testing_the_hidden_state_changes_no_number_of_the_run(tiny):
    plain, watched = tiny
    assert watched["curve"] == plain["curve"]


def test_the_hidden_state_is_tested_where_the_server_model_is_and_as_it_holds_there(tiny):
    _, watched = tiny
    learner = watched["learner"]
    run = probe.with_hidden(dict(watched, curve=dict(watched["curve"])))
    c = run["curve"]
    assert len(c["hidden_accuracy"]) == len(c["time"])
    assert c["hidden_loss"][0] == c["loss"][0]                             # x_hat = x at the start
    assert c["hidden_loss"] != c["loss"]                                   # a 2-bit server leaves x_hat behind x
    # the last grid point (the run's end) tested the hidden state the learner holds at the end
    assert c["hidden_loss"][-1] == pytest.approx(learner.queue.evaluate(learner.hidden).value()["loss"], rel=1e-6)


def test_summary_windows_both_accuracies_and_their_difference_and_checks_the_committed_run():
    curve = dict(time=[0.0, 1.0, 2.0, 3.0], uploads=[0, 10, 20, 30], accuracy=[0.5, 0.6, 0.7, 0.8],
                 loss=[1.0, 0.9, 0.8, 0.7], hidden_accuracy=[0.5, 0.55, 0.6, 0.8], upload_error=[0, 1, 2, 3],
                 buffer_error=[0, 1, 2, 3], server_steps=[0, 1, 2, 3], hidden_gap=[0, 4.0, 13.0, 22.0])
    run = dict(method="qafel_c2_s2", seed=0, curve=curve, uploads_to_target=None)
    committed = dict(curve={k: v[:3] + [v[3] + 1] if k == "loss" else v for k, v in curve.items()})
    row = probe.summary([run], {("qafel_c2_s2", 0): committed}, width=20)[0]
    assert row["windows"]["accuracy"] == [pytest.approx(0.65), pytest.approx(0.8)]
    assert row["windows"]["hidden_accuracy"] == [pytest.approx(0.575), pytest.approx(0.8)]
    assert row["windows"]["lead"] == [pytest.approx(0.075), pytest.approx(0.0)]
    assert row["windows"]["gap_steps"] == [pytest.approx(math.sqrt(6.5)), 3.0]      # sqrt of the mean squared gap
    assert row["against_committed"]["same"] is False and row["against_committed"]["first_different_uploads"] == 30
    text = probe.markdown(dict(command="c", machine="m", setting="s", window=20, rows=[row]))
    assert "| 0–20 | 65.00 / 57.50 / +7.50 / 2.55 |" in text and "parts at 30 uploads" in text


@pytest.mark.parametrize("folder", ["hidden-state", "hidden-state/seed-1"])
def test_the_committed_probe_follows_from_its_curves(folder):
    out = ROOT / "results/qafel" / folder
    result = json.loads((out / "hidden-state.json").read_text())
    paths = qafel_probe.recorded(probe.arguments(), result["command"]).against
    against = qafel_probe.committed_runs([ROOT / path for path in paths])
    runs = [dict(method=r["method"], seed=r["seed"], curve=r["curve"], uploads_to_target=r["reached_at_uploads"])
            for r in result["rows"]]
    assert probe.summary(runs, against, result["window"]) == result["rows"]
    assert all(r["against_committed"]["same"] for r in result["rows"])        # the probe changed no number
    assert (out / "hidden-state.md").read_text() == probe.markdown(result)
