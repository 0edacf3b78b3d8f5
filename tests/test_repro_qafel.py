"""QAFeL reproduction pipeline: the rows' message sizes (the paper's, to the byte), uploads to target, the
stop at the target, the JSON/markdown/figure and resuming, on a tiny synthetic federation."""
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from afl.algorithms import make_federation, run_algorithm
from afl.cli import main
from afl.compress import make_quantizer
from afl.data import make_synthetic
from afl.errors import ParameterError
from afl.repro import qafel as qr
from afl.repro.runner import reduced_fields
from test_checkpoint import stop_at_time_limit

TINY = dict(users=24, max_size=8, validation=None, max_uploads=120, eval_every=20, seeds=1, lr=0.05,
            server_lr=1.0, batch=8)


def synthetic(cfg):
    return make_synthetic(300, 60, shape=(3, 32, 32), num_classes=2, seed=0, noise=3.0)


@pytest.mark.parametrize("experiment", ["qafel-table1", "qafel-table2"])
def test_every_row_sends_the_papers_bytes(experiment):
    """kB/upload and kB/download of every Table 1 and Table 2 row on the QAFeL model, as the paper prints them."""
    cfg = qr.setting(experiment, quick=False)
    shapes = qr.qafel_shapes()
    d = sum(math.prod(s) for s in shapes)
    for method in cfg.methods:
        if method.startswith("nohidden"):
            continue
        _, kw = cfg.run_kwargs(method)
        up, down = (make_quantizer(kw.get(k, "identity"), shapes=shapes).bits(d) / 8000
                    for k in ("client_quantizer", "server_quantizer"))
        assert (round(up, 3), round(down, 3)) == qr.PAPER_KB[method], method


def test_settings_follow_the_paper():
    cfg = qr.setting("qafel-table1", quick=False)
    algorithm, kw = cfg.run_kwargs("qafel_c4_s2")
    assert algorithm == "qafel" and kw["client_quantizer"] == "scalar:4" and kw["server_quantizer"] == "scalar:2"
    assert (kw["lr"], kw["server_lr"], kw["server_momentum"], kw["Z"], kw["K"]) == (4.7e-6, 1000.0, 0.3, 10, 1)
    assert (kw["reducer"], kw["staleness"], kw["arrival_rate"], kw["server_time"]) == ("sum", "none", 100.0, 0.0)
    assert cfg.run_kwargs("nohidden_c2_s2")[1]["hidden_state"] is False
    assert cfg.run_kwargs("fedbuff")[0] == "fedbuff"
    fig3 = qr.setting("qafel-fig3", quick=False)
    assert [round(fig3.arrival_rate(c)) for c in fig3.concurrencies] == [125, 627, 1253]    # App. D
    assert fig3.run_kwargs("qafel_c4_s4", 500)[1]["staleness"] == "sqrt-flsim"                # FLSim's weight
    assert qr.setting("qafel-fig3", staleness="sqrt").run_kwargs("qafel_c4_s4", 500)[1]["staleness"] == "sqrt"
    assert fig3.dropout == 0.1                                                                     # App. D
    assert qr.setting("qafel-table1", quantizer="qsgd").run_kwargs("qafel_c8_s2")[1]["client_quantizer"] == "qsgd:8"
    assert qr.setting("qafel-table2").run_kwargs("qafel_c2_stopk")[1]["server_quantizer"] == "topk-mask:0.1"


@pytest.mark.parametrize("overrides, name", [
    (dict(methods=("qafel_c3_s4",)), "methods"),
    (dict(methods=("fedavg",)), "methods"),
    (dict(quantizer="lattice"), "quantizer"),
    (dict(dataset="mnist"), "dataset"),
    (dict(concurrencies=(5000,)), "concurrencies"),
    (dict(target=1.5), "target"),
    (dict(eval_every=0), "eval_every"),
    (dict(lr=-1.0), "lr"),
    (dict(server_momentum=1.0), "server_momentum"),
    (dict(Z=0), "Z"),
])
def test_bad_settings_name_the_parameter(overrides, name):
    with pytest.raises(ParameterError, match=rf"^{name}="):
        qr.setting("qafel-table1", **overrides)


def test_substitute_users_are_leaf_like_and_disjoint():
    cfg = qr.setting("qafel-table1", quick=True, **TINY)
    data = synthetic(cfg)
    parts = qr.user_parts(cfg, data, seed=3)
    sizes = [len(p) for p in parts]
    assert len(parts) == 24 and min(sizes) >= 1 and max(sizes) <= 8
    flat = np.concatenate([p.numpy() for p in parts])
    assert len(np.unique(flat)) == len(flat)
    assert [len(p) for p in qr.user_parts(cfg, data, seed=3)] == sizes          # seeded


def test_a_target_stops_the_run_where_the_full_run_first_reaches_it():
    data = make_synthetic(300, 60, shape=(1, 8, 8), num_classes=2, seed=0, noise=2.0)
    kw = dict(total_time=30.0, eval_every=1.0, K=1, lr=0.05, Z=4, arrival_rate=10.0, server_time=0.0)

    def run(target=None):
        fed = make_federation(data, "mlp32", 20, "iid", batch_size=8, seed=1, model_kw=dict(in_features=64))
        return run_algorithm("fedbuff", fed, target=target, **kw)

    full = run()
    acc = full["curve"]["accuracy"]
    target = float(np.quantile(acc, 0.6))
    first = next(i for i, a in enumerate(acc) if a >= target)
    stopped = run(target)
    assert stopped["target_reached_at"] == full["curve"]["time"][first]
    assert stopped["curve"]["accuracy"][-1] == acc[first]
    assert stopped["curve"]["time"][-1] == full["curve"]["time"][first]
    assert stopped["curve"]["uploads"] == full["curve"]["uploads"][:first + 1]
    assert stopped["uploads"] < full["uploads"] and full["target_reached_at"] is None


def test_runs_table_and_uploads_to_target():
    cfg = qr.setting("qafel-table1", quick=True, methods=("fedbuff", "qafel_c4_s4", "nohidden_c2_s2"), target=0.99,
                     **TINY)
    data = synthetic(cfg)
    runs = [qr.compute_run(cfg, m, None, 0, dataset=data) for m in cfg.methods]
    easy = qr.compute_run(qr.setting("qafel-table1", quick=True, target=0.01, **TINY), "fedbuff", None, 0,
                          dataset=data)
    json.dumps(runs)
    assert easy["uploads_to_target"] == 0 and easy["uploads"] == 0          # the initial model is already there
    for r in runs:
        assert r["uploads_to_target"] is None and r["curve"]["uploads"][-1] <= 120
        assert r["dataset"] == "synthetic" and r["concurrency"] is None
    rows = qr.table(runs + [dict(easy, method="qafel_c8_s8")])
    assert rows["fedbuff"]["reached"] == 0 and rows["fedbuff"]["uploads_to_target"]["mean"] is None
    assert rows["qafel_c8_s8"]["uploads_to_target"] == {"mean": 0.0, "std": None, "per_seed": [0.0]}
    assert rows["qafel_c4_s4"]["kb_per_upload"] < rows["fedbuff"]["kb_per_upload"]
    md = qr.table_markdown(rows, qr.PAPER_TABLE1)
    assert "| fedbuff | – | 0/1 | 26.1 ± 6.7 |" in md


def test_channel_errors_are_window_means_and_the_server_channels_where_recorded():
    curve = dict(uploads=[0, 10, 10, 30], server_steps=[0, 1, 1, 3], upload_error=[0, 2.0, 2.0, 5.0],
                 buffer_error=[0, 0.5, 0.5, 0.9])
    old = qr.channel_errors(dict(curve=curve))
    assert old == {"uploads": [10, 30], "upload": [0.2, 0.15], "buffer": [0.5, pytest.approx(0.2)]}
    new = qr.channel_errors(dict(curve=dict(curve, broadcast_error=[0, 0.1, 0.1, 0.7], hidden_gap=[0, 4, 4, 10])))
    assert new["broadcast"] == [0.1, pytest.approx(0.3)] and new["gap"] == [4, 3] and "lag" not in new
    lagged = qr.channel_errors(dict(curve=dict(curve, broadcast_error=[0, 0.1, 0.1, 0.7], hidden_gap=[0, 4, 4, 10],
                                               hidden_lag=[0, 1.5, 1.5, 0.5])))
    assert lagged["lag"] == [1.5, -0.5] and lagged["gap"] == [4, 3]
    with pytest.raises(ParameterError, match="fedbuff"):
        qr.channel_errors(dict(method="fedbuff", curve={k: curve[k] for k in ("uploads", "server_steps")}))


def test_run_experiment_writes_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(qr, "load_task", lambda cfg, root=None, device="cpu": synthetic(cfg))
    kw = dict(quick=True, out=tmp_path, progress=False, methods=("fedbuff", "qafel_c4_s4"), target=0.99, **TINY)
    paths = qr.run_experiment("qafel-table1", **kw)
    assert [p.name for p in paths] == ["qafel-table1.json", "qafel-table1.md", "qafel-table1.png"]
    result = json.loads(paths[0].read_text())
    assert set(result["rows"]) == {"fedbuff", "qafel_c4_s4"} and result["dataset"] == "synthetic"
    assert {"uploads_to_target", "kb_per_upload", "kb_per_download"} <= set(result["rows"]["fedbuff"])
    assert "synthetic" in paths[1].read_text() and "QUICK" in paths[1].read_text()
    partial = tmp_path / "qafel-table1.partial.jsonl"                 # an interrupted invocation saved one run
    partial.write_text(json.dumps(result["runs"][0] | {"setting_key": qr.grid(
        qr.setting("qafel-table1", **{k: v for k, v in kw.items() if k not in ("out", "progress")}),
        name="qafel-table1").setting_key}) + "\n")
    again = json.loads(qr.run_experiment("qafel-table1", **kw)[0].read_text())
    assert again["resumed_runs"] == 1 and again["rows"] == result["rows"]


def test_a_reduced_paper_setting_says_what_was_reduced():
    cfg = json.loads(json.dumps(dataclasses.asdict(qr.setting("qafel-table1", quick=False, users=2500, target=0.8,
                                                              max_uploads=6000, seeds=1, methods=("fedbuff",)))))
    table1, selection = qr.EXPERIMENTS["qafel-table1"][0], ("seeds", "methods")
    assert reduced_fields(table1, cfg, selection) == {"target": 0.8, "max_uploads": 6000}
    result = {"experiment": "qafel-table1", "command": "c", "machine": "m", "execution": "e", "quick": False,
              "dataset": "cifar10-jpeg vehicles vs animals",
              "config": cfg, "runs": [], "rows": {}}
    assert ("Differs from the paper setting: target = 0.8 (paper: 0.85), max_uploads = 6000 (paper: 150000), seeds = 1 "
            "(paper: 3).") in qr.report(result)
    paper = json.loads(json.dumps(dataclasses.asdict(qr.setting("qafel-table1", quick=False))))
    assert reduced_fields(table1, paper, selection) == {} and "Differs" not in qr.report(
        result | {"config": paper})


def test_a_dropout_run_is_the_same_alone_and_in_a_fleet_of_three(tmp_path, monkeypatch):
    """Issue 52's probe at a tiny scale: QAFeL 4/4 with the paper's dropout, alone and beside FedBuff and QAFeL 8/8
    in one fleet, gives the same curve and channel errors."""
    monkeypatch.setattr(qr, "load_task", lambda cfg, root=None, device="cpu": synthetic(cfg))
    kw = dict(quick=True, progress=False, target=0.99, dropout=0.1, **TINY)
    alone = qr.run_experiment("qafel-table1", out=tmp_path / "alone", methods=("qafel_c4_s4",), **kw)[0]
    fleet = qr.run_experiment("qafel-table1", out=tmp_path / "fleet", fleet_size=3,
                              methods=("fedbuff", "qafel_c4_s4", "qafel_c8_s8"), **kw)[0]
    a, = json.loads(alone.read_text())["runs"]
    b, = [r for r in json.loads(fleet.read_text())["runs"] if r["method"] == "qafel_c4_s4"]
    assert a["curve"] == b["curve"] and a["upload_error"] == b["upload_error"] > 0


def test_the_baselines_beyond_the_paper_take_fedbuffs_server_step():
    """On QAFeL's protocol CA2FL's rate is Z x FedBuff's (it averages its buffer where FedBuff sums it): with every
    cache still empty, CA2FL's first server step is FedBuff's, to float rounding; FedAsync's clients take FedBuff's
    step lr x server_lr, and FADAS's too (its rate is fadas_lr); every method runs on the arrivals protocol with one
    local step."""
    from afl.sim import HalfNormal
    from afl.sim.speeds import SpeedProfile
    cfg = qr.setting("qafel-async-family", quick=True, **TINY)
    data = synthetic(cfg)
    parts = qr.user_parts(cfg, data, 0)
    T = 0.5                 # simulated time: one server step by then (seed 0's arrivals and durations)

    def first_step(method):
        algorithm, kw = cfg.run_kwargs(method)
        profile = SpeedProfile(["all"], np.zeros(len(parts), dtype=int), [HalfNormal(cfg.duration)])
        fed = make_federation(data, qr.MODEL, len(parts), batch_size=cfg.batch, profile=profile, seed=0,
                              parts=parts, model_kw=dict(variant="fedbuff", dropout=0.0), dtype=torch.float64)
        out = run_algorithm(algorithm, fed, total_time=T, eval_every=T, **kw)
        assert out["server_steps"] == 1 and kw["K"] == 1 and kw["arrival_rate"] == cfg.rate
        return out["model"] - fed.init

    torch.testing.assert_close(first_step("ca2fl"), first_step("fedbuff"), rtol=1e-12, atol=1e-15)
    assert cfg.run_kwargs("fedasync")[1]["lr"] == cfg.lr * cfg.server_lr
    fadas = cfg.run_kwargs("fadas")[1]
    assert fadas["server_lr"] == cfg.fadas_lr and fadas["lr"] == cfg.lr * cfg.server_lr


@pytest.mark.parametrize("fleet", [False, True])
def test_a_time_limit_inside_the_runs_and_the_same_command_goes_on_from_their_checkpoints(fleet, tmp_path,
                                                                                         monkeypatch, capsys):
    """QAFeL's runs are event-driven: stopped by ``--time-limit`` with clients in flight (dropout on), each saves
    its state and the same command goes on from it to the runs that never stopped."""
    monkeypatch.setattr(qr, "load_task", lambda cfg, root=None, device="cpu": synthetic(cfg))
    monkeypatch.setenv("AFL_CHECKPOINT_EVERY", "3600")
    argv = ["repro", "qafel-table1", "--quick", "--set", "methods=fedbuff,qafel_c4_s4", "--set", "target=0.99",
            "--set", "dropout=0.1"] + [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")] + (
        [] if fleet else ["--no-fleet"])
    stop_at_time_limit(monkeypatch, argv + ["--out", str(tmp_path / "a")], checks=40)
    assert "stopped run(s) have checkpoints" in capsys.readouterr().err
    kept = sorted(p.name for p in (tmp_path / "a" / "qafel-table1.checkpoints").glob("*.ckpt"))
    # in a fleet every live run goes on to its own next event and saves there; one by one, the second never began
    assert kept == (["None-fedbuff-0.ckpt", "None-qafel_c4_s4-0.ckpt"] if fleet else ["None-fedbuff-0.ckpt"])
    for out in ("a", "b"):
        assert main(argv + ["--out", str(tmp_path / out)]) == 0
    resumed, whole = ({r["method"]: r for r in json.loads((tmp_path / o / "qafel-table1.json").read_text())["runs"]}
                      for o in "ab")
    assert sum("resumed_at" in r for r in resumed.values()) == len(kept)
    for method, run in whole.items():
        assert resumed[method]["curve"] == run["curve"]
        assert resumed[method].get("upload_error") == run.get("upload_error")
    assert not (tmp_path / "a" / "qafel-table1.checkpoints").exists()


def test_a_first_signal_stops_every_run_at_its_next_event_with_its_checkpoint(tmp_path, monkeypatch, capsys):
    """SIGTERM (a scheduler ending the job; Ctrl-C alike) during ``afl repro``: the run stops at its next event,
    saved, and the command says so (exit 128 + 15); the same command goes on from there."""
    import signal

    from afl import deadline
    from afl.sim import schedule
    monkeypatch.setattr(qr, "load_task", lambda cfg, root=None, device="cpu": synthetic(cfg))
    monkeypatch.setenv("AFL_CHECKPOINT_EVERY", "3600")
    real, steps = schedule.ClientClock.server_step, []

    def signal_at_the_first_step(self, *a, **kw):
        steps.append(1)
        if len(steps) == 1:
            signal.raise_signal(signal.SIGTERM)
        return real(self, *a, **kw)
    monkeypatch.setattr(schedule.ClientClock, "server_step", signal_at_the_first_step)
    argv = ["repro", "qafel-table1", "--quick", "--no-fleet", "--set", "methods=fedbuff", "--set", "target=0.99",
            "--out", str(tmp_path)] + [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert main(argv) == 128 + signal.SIGTERM
    finally:
        deadline.clear()
    assert "stopped by SIGTERM at every run's next round or event" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "qafel-table1.checkpoints").glob("*.ckpt")] == ["None-fedbuff-0.ckpt"]
    assert signal.getsignal(signal.SIGTERM) is before                     # the command put it back
    monkeypatch.setattr(schedule.ClientClock, "server_step", real)
    assert main(argv) == 0
    run, = json.loads((tmp_path / "qafel-table1.json").read_text())["runs"]
    assert len(run["resumed_at"]) == 1


def test_a_second_signal_stops_at_once_and_an_ignored_ctrl_c_stays_ignored():
    import signal

    from afl import deadline
    try:
        with deadline.stop_on_signals():
            signal.raise_signal(signal.SIGTERM)
            assert deadline.passed() and deadline.stopped_by() == signal.SIGTERM
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGTERM)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)          # a shell's background job
        try:
            with deadline.stop_on_signals():
                assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        deadline.clear()
    assert not deadline.passed() and deadline.stopped_by() is None


def test_windows_average_the_evaluations_inside_each_and_say_where_the_run_had_stopped():
    curve = {"uploads": [0, 400, 900, 1400, 1900], "accuracy": [0.1, 0.5, 0.7, 0.8, 0.9]}
    assert qr.window_means(curve, 0, 3000, 1000) == [pytest.approx(0.6), pytest.approx(0.85), None]
    assert qr.window_means(curve, 400, 1400, 500) == [0.7, 0.8]        # a window is (a, a + width]


def test_a_run_agrees_with_the_committed_one_up_to_its_end_or_says_where_they_part():
    curve = dict(time=[0.0, 1.0, 2.0], accuracy=[0.4, 0.6, 0.7], uploads=[0, 10, 20], upload_error=[0, 2.0, 5.0])
    mine = dict(curve=curve)
    longer = dict(curve={k: v + [v[-1]] for k, v in curve.items()})
    keys = ("accuracy", "uploads", "upload_error")
    assert qr.curve_agreement(mine, longer, keys) == {"same": True, "points": 3}
    assert qr.curve_agreement(longer, mine, keys)["same"] is False              # the committed run stops earlier
    other = dict(curve=dict(curve, upload_error=[0, 2.0, 5.1]))                 # the same accuracies, another error
    assert qr.curve_agreement(mine, other) == {"same": True, "points": 3}        # not compared by default
    parted = qr.curve_agreement(mine, other, keys, shown=("accuracy", "upload_error"))
    assert parted == {"same": False, "first_different_uploads": 20, "accuracy": [0.7, 0.7],
                      "upload_error": [5.0, 5.1]}
    assert qr.curve_agreement(mine, None) is None


def test_probe_runs_give_each_run_in_order_with_its_learner_or_raise_the_first_failure(monkeypatch):
    from afl.algorithms.qafel import QAFeL

    class Marked(QAFeL):
        pass

    monkeypatch.setattr(qr, "load_task", lambda cfg, root=None, device="cpu": synthetic(cfg))
    cfg = qr.setting("qafel-table1", quick=True, methods=("fedbuff", "qafel_c4_s4"), **TINY)
    runs = qr.probe_runs(cfg, [("a", "qafel_c4_s4", 1, Marked), ("b", "fedbuff", 0, None)])
    assert [(r["method"], r["seed"]) for r in runs] == [("qafel_c4_s4", 1), ("fedbuff", 0)]
    assert isinstance(runs[0]["learner"], Marked) and "learner" not in runs[1]
    with pytest.raises(ParameterError, match="learner_class"):
        qr.probe_runs(cfg, [("a", "qafel_c4_s4", 0, dict)])        # not QAFeL's learner
