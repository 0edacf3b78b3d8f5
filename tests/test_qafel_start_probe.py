"""tools/qafel_start_probe.py: QAFeL's 2-bit clients started from x, from a lagged x or from a displaced x."""
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from afl.data import make_synthetic
from afl.errors import ParameterError
from afl.repro import qafel as qr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import qafel_probe  # noqa: E402
import qafel_start_probe as probe  # noqa: E402

CFG = qr.setting("qafel-table1", quick=True, users=100, max_size=2, validation=None, max_uploads=200, eval_every=50,
                 lr=0.001, server_lr=1.0, batch=8, target=1.0, methods=("qafel_c2_s8",))


@pytest.fixture(scope="module")
def data():
    return make_synthetic(300, 60, shape=(3, 32, 32), num_classes=2, seed=0, noise=3.0)


def curve(data, learner, method="qafel_c2_s8"):
    c = qr.compute_run(CFG, method, None, 0, dataset=data, learner_class=learner)["curve"]
    return {k: c[k] for k in ("accuracy", "loss", "uploads", "upload_error")}


def test_a_start_from_x_ignores_the_servers_bits_and_size_zero_is_that_start(data):
    exact = curve(data, probe.ExactStart)
    assert curve(data, probe.ExactStart, "qafel_c2_s2") == exact               # the broadcast no longer matters
    assert curve(data, probe.starting("lagged", 0.0)) == exact
    assert curve(data, probe.starting("displaced", 0.0)) == exact
    assert curve(data, None) != exact                                          # x_hat is not x


def test_a_lagged_start_is_the_server_model_of_that_many_steps_ago(data):
    seen = []

    class Watched(probe.starting("lagged", 1.5)):
        def start_model(self):
            start = super().start_model()
            seen.append((start, list(self.models)))
            return start

        def after_step(self):
            super().after_step()
            self.models.append(self.w)

        def __init__(self, fed, history, cfg):
            super().__init__(fed, history, cfg)
            self.models = [self.w]                                            # x_0, x_1, ...

    qr.compute_run(CFG, "qafel_c2_s8", None, 0, dataset=data, learner_class=Watched)
    late = [(start, models) for start, models in seen if len(models) >= 3]
    assert late
    for start, models in late:
        assert torch.allclose(start, 0.5 * models[-2] + 0.5 * models[-3], atol=1e-7)


def test_a_displaced_start_lies_its_radius_of_server_steps_from_x(data):
    seen = []

    class Watched(probe.starting("displaced", 1.4)):
        def after_step(self):
            before = self.w_before_step
            super().after_step()
            seen.append((float(self.offset.norm()), float((self.w - before).norm())))

        def step(self, *args):
            self.w_before_step = self.w
            super().step(*args)

    qr.compute_run(CFG, "qafel_c2_s8", None, 0, dataset=data, learner_class=Watched)
    assert len(seen) > 5 and all(math.isclose(o, 1.4 * s, rel_tol=1e-4) for o, s in seen)


def watched_starts(data, start):
    """Per server step of a residual start's 2/2 run: the start it made, the server model and the hidden state."""
    seen = []

    class Watched(probe.starting(start, 1.0)):
        def after_step(self):
            super().after_step()
            seen.append((self.start_model(), self.w, self.hidden))

    qr.compute_run(CFG, probe.row_of(start), None, 0, dataset=data, learner_class=Watched)
    assert len(seen) > 5
    return seen


def test_a_flipped_start_reflects_the_residual_through_x(data):
    for start, w, hidden in watched_starts(data, "flipped"):
        assert torch.allclose(start - w, -(hidden - w), atol=1e-7) and (hidden != w).any()


def test_a_shuffled_start_permutes_the_residual_within_each_tensor(data):
    sizes = [math.prod(s) for s in qr.qafel_shapes()]
    moved = 0
    for start, w, hidden in watched_starts(data, "shuffled"):
        for a, b in zip((start - w).split(sizes), (hidden - w).split(sizes)):
            assert torch.allclose(a.sort().values, b.sort().values, atol=1e-7)     # the same values, per tensor
        moved += not torch.allclose(start - w, hidden - w)
    assert moved > 5                                                               # in another order


def test_residual_starts_run_the_2_2_row_and_the_others_the_2_8_row():
    assert [probe.row_of(s) for s in probe.STARTS] == ["qafel_c2_s8"] * 3 + ["qafel_c2_s2"] * 2


def test_bad_starts_and_sizes_are_errors_that_name_them():
    with pytest.raises(ParameterError, match="starts"):
        probe.starting("ahead", 1.0)
    with pytest.raises(ParameterError, match="size"):
        probe.starting("lagged", -1.0)


def test_the_default_size_is_the_committed_2_2_runs_rms_gap():
    size = probe.measured_gap()
    windows = next(r for r in json.loads(probe.HIDDEN_STATE.read_text())["rows"]
                   if r["method"] == "qafel_c2_s2")["windows"]["gap_steps"]
    assert min(w for w in windows if w) <= size <= max(w for w in windows if w)


@pytest.mark.parametrize("folder", ["start-probe", "start-probe/residual", "start-probe/seeds-1-2",
                                    "start-probe/seeds-1-2-shuffled", "start-probe/seeds-1-2-lag-displacement"])
def test_the_committed_probe_follows_from_its_curves(folder):
    out = ROOT / "results/qafel" / folder
    result = json.loads((out / "start-probe.json").read_text())
    seeds = sorted({r["seed"] for r in result["rows"]})
    args = qafel_probe.recorded(probe.arguments(), result["command"])
    against = probe.committed_rows([ROOT / path for path in args.against], seeds)
    runs = [dict(start=r["start"], seed=r["seed"], uploads_to_target=r["reached_at_uploads"], curve=r["curve"])
            for r in result["rows"] if r["curve"] is not None]
    assert [r["start"] for r in runs] == [s for seed in seeds for s in args.starts]
    assert probe.summary(runs, against, result["window"], result["uploads"]) == result["rows"]
    assert result["size"] == probe.measured_gap()
    assert (out / "start-probe.md").read_text() == probe.markdown(result)
