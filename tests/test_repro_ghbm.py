"""GHBM experiments: settings, splits, the result tables and files (on a synthetic stand-in), the quadratic."""
import json
import os
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

from afl.data import load_dataset, make_synthetic
from afl.errors import ParameterError
from afl.repro import ghbm
from afl.repro.runner import paper_difference

DATA = make_synthetic(n_train=400, n_test=100, shape=(1, 28, 28), num_classes=10, seed=2)
TINY = dict(rounds=6, eval_every=2, last=2, clients=10, participation=0.2)


@pytest.fixture
def synthetic(monkeypatch):
    monkeypatch.setattr(ghbm, "load_task", lambda cfg, root=None, device="cpu": DATA)


def test_settings_follow_the_paper_and_switch_dataset_presets():
    cfg = ghbm.setting("ghbm-table2", quick=False)
    assert (cfg.dataset, cfg.model, cfg.local_steps, cfg.batch, cfg.rounds, cfg.seeds) == (
        "cifar10-jpeg", "cnn-cifar", 8, 64, 20000, 5)
    algorithm, kw = cfg.run_kwargs("ghbm")
    assert algorithm == "ghbm" and kw["tau"] == 10 and kw["s"] == 10 and kw["weight_decay"] == 1e-3
    algorithm, kw = cfg.run_kwargs("fedcm-full")
    assert algorithm == "fedcm" and kw["s"] == 100 and kw["alpha"] == 0.1
    for c in (cfg, ghbm.setting("ghbm-table2", quick=False, dataset="shakespeare")):   # the code's forms: same rates
        for variant, method, field, form in (
                ("fedcm-code", "fedcm", "momentum", "code"), ("mimemom-dampened", "mimemom", "momentum", "dampened"),
                ("mimelitemom-dampened", "mimelitemom", "momentum", "dampened"),
                ("scaffold-code", "scaffold", "controls", "code"), ("adabest-code", "adabest", "elapsed", "code"),
                ("adabest-beta-0", "adabest", "beta", 0.0), ("fedavgm-server-lr-1", "fedavgm", "server_lr", 1.0)):
            algorithm, kw = c.run_kwargs(variant)
            assert algorithm == method and kw == c.run_kwargs(method)[1] | {field: form}
            assert variant not in cfg.methods                                      # not a row of the paper
    sh = ghbm.setting("ghbm-table2", quick=False, dataset="shakespeare")
    assert (sh.model, sh.hyper, sh.local_steps, sh.batch, sh.rounds) == ("char-lstm", "shakespeare", 20, 100, 250)
    assert sh.run_kwargs("fedavg")[1]["lr"] == 1.0 and sh.run_kwargs("fedprox")[1]["mu"] == 1e-4
    assert ghbm.setting("ghbm-table2", quick=False, dataset="shakespeare", rounds=500).rounds == 500
    probe = ghbm.setting("ghbm-table2", quick=False, dataset="shakespeare", retune=("fedcm.server_lr=1", "fedcm.alpha=0.2"))
    assert probe.run_kwargs("fedcm")[1] | {"server_lr": 0.1, "alpha": 0.1} == sh.run_kwargs("fedcm")[1]
    assert (probe.run_kwargs("fedcm")[1]["server_lr"], probe.run_kwargs("fedcm")[1]["alpha"]) == (1.0, 0.2)
    assert probe.run_kwargs("fedcm-full")[1] == sh.run_kwargs("fedcm-full")[1]
    assert sh.run_kwargs("mime")[1]["weighting"] == "size"                  # the paper's text
    uniform = ghbm.setting("ghbm-table2", quick=False, dataset="shakespeare", weighting="uniform")
    assert uniform.run_kwargs("mime")[1] == sh.run_kwargs("mime")[1] | {"weighting": "uniform"}
    tau = ghbm.setting("ghbm-tau", quick=False)
    assert tau.taus == (1, 2, 5, 10, 20, 40) and tau.splits == ("noniid",)


@pytest.mark.parametrize("kw, name", [(dict(splits=("mixed",)), "splits"), (dict(splits=("alpha=-1",)), "splits"),
                                      (dict(methods=("fedsgd",)), "methods"), (dict(participation=0.0), "participation"),
                                      (dict(taus=(0,)), "taus"), (dict(dataset="cifar100"), "dataset"),
                                      (dict(eval_every=0), "eval_every"), (dict(no_such=1), "setting field"),
                                      (dict(retune=("fedcm.server_lr",)), "retune"),
                                      (dict(retune=("fedcm.mu=1",)), "retune.*'mu'"),
                                      (dict(retune=("fedsgd.lr=1",)), "retune"),
                                      (dict(retune=("fedcm.lr=fast",)), "retune"),
                                      (dict(weighting="by-size"), "weighting"),
                                      (dict(iid_alpha=-2.0), "iid_alpha=-2"), (dict(model="vgg"), "model='vgg'")])
def test_bad_settings_name_the_parameter(kw, name):
    with pytest.raises(ParameterError, match=name):
        ghbm.setting("ghbm-table2", quick=True, **kw)


def test_splits_one_class_per_client_and_rebalanced_iid():
    cfg = ghbm.setting("ghbm-table2", quick=True, **TINY)
    noniid = ghbm.client_parts(cfg, DATA, "noniid", seed=0)
    assert len(noniid) == 10 and all(len(p) == 40 for p in noniid)
    assert all(len(torch.unique(DATA.train_y[p])) == 1 for p in noniid)
    iid = ghbm.client_parts(cfg, DATA, "iid", seed=0)
    assert all(len(p) == 40 for p in iid) and np.mean([len(torch.unique(DATA.train_y[p])) for p in iid]) > 8
    assert len(torch.unique(torch.cat(iid))) == 400
    # classes too unequal for n / clients samples of one class each (as MNIST's fives): the largest size that is
    uneven = replace(DATA, train_y=torch.cat([torch.zeros(30, dtype=torch.int64), DATA.train_y[30:]]))
    parts = ghbm.client_parts(cfg, uneven, "noniid", seed=0)
    counts = torch.bincount(uneven.train_y)
    size = max(t for t in range(1, 41) if int((counts // t).sum()) >= 10)
    assert size < 40 and all(len(p) == size for p in parts)
    assert all(len(torch.unique(uneven.train_y[p])) == 1 for p in parts)


def test_final_accuracy_is_the_mean_over_the_last_rounds():
    curve = {"time": [0, 10, 20, 30], "accuracy": [0.1, 0.2, 0.5, 0.7]}
    assert ghbm.final_accuracy(curve, 30, 10) == pytest.approx(0.6)
    assert ghbm.final_accuracy(curve, 30, 0) == pytest.approx(0.7)


def test_table_experiment_writes_rows_by_method_and_split(synthetic, tmp_path):
    paths = ghbm.run_experiment("ghbm-table2", quick=True, out=tmp_path, progress=False,
                                methods=("fedavg", "fedhbm", "ghbm"), splits=("noniid", "iid"), **TINY)
    result = json.loads(paths[0].read_text())
    assert set(result["rows"]) == {"fedavg", "fedhbm", "ghbm tau=5"}
    for row in result["rows"].values():
        for split in ("noniid", "iid"):
            cell = row[split]
            assert cell["mean"] == pytest.approx(np.mean(cell["per_seed"])) and len(cell["per_seed"]) == 1
    fedavg = result["rows"]["fedavg"]["noniid"]["to_fedavg"]
    assert fedavg["reached"] == 1 and fedavg["rounds"] <= 6          # FedAvg reaches its own final accuracy
    ghbm_run = next(r for r in result["runs"] if r["method"] == "ghbm")
    assert ghbm_run["settings"]["tau"] == 5 and ghbm_run["bytes_down"] == 2 * ghbm_run["bytes_up"]
    assert "paper" in result and paths[2].stat().st_size > 10000 and "| FedHBM |" in paths[1].read_text()
    as_cifar = dict(result, config=dict(result["config"], dataset="cifar10-jpeg"))       # with the paper's column
    text = ghbm.table_markdown(as_cifar)
    assert "| 81.7 / 83.8 |" in text and "| GHBM τ=5 |" in text and "| – |" in text
    assert "runs from" not in text                                     # one source: no column
    elsewhere = {"machine": "an H100", "command": "afl repro ghbm-table2 --set methods=fedhbm"}
    merged = dict(result, runs=[r | {"source": elsewhere} if r["method"] == "fedhbm" else r for r in result["runs"]])
    text = ghbm.table_markdown(merged)
    assert "runs from |" in text and "| FedHBM |" in text
    assert [line.rsplit("|", 2)[1].strip() for line in text.splitlines() if line.startswith("| Fed")] == ["a", "b"]
    bars = ghbm.figure(result).axes[-1]          # two splits: a grey legend of shades, beside the coloured bars
    assert bars.get_legend().get_title().get_text() == "split (shade)"
    one = dict(result, config=dict(result["config"], splits=["iid"]), runs=[r for r in result["runs"]
                                                                            if r["split"] == "iid"])
    bars = ghbm.figure(one).axes[-1]             # one split: named in the title, no grey swatch
    assert bars.get_legend() is None and bars.get_title().startswith("final accuracy on iid")


def test_report_says_fedcm_full_contacts_every_client(synthetic, tmp_path):
    paths = ghbm.run_experiment("ghbm-table2", quick=True, out=tmp_path, progress=False,
                                methods=("fedavg", "fedcm-full"), splits=("noniid",), **TINY)
    run = next(r for r in json.loads(paths[0].read_text())["runs"] if r["method"] == "fedcm-full")
    assert run["settings"]["s"] == TINY["clients"]
    assert "C = 0.2 (uniform sampling; FedCM, full participation: every client)" in paths[1].read_text()
    alone = ghbm.run_experiment("ghbm-table2", quick=True, out=tmp_path / "fedavg", progress=False,
                                methods=("fedavg",), splits=("noniid",), **TINY)
    assert "C = 0.2 (uniform sampling), J" in alone[1].read_text()


def test_report_names_what_differs_from_the_papers_setting():
    """Against the paper's setting on the result's dataset (CIFAR-10 for a dataset the paper does not use)."""
    def note(**kw):
        cfg = ghbm.setting("ghbm-table2", quick=False, **kw)
        fresh = {"experiment": "ghbm-table2", "config": asdict(cfg)}          # as a run writes it: tuples
        saved = {"experiment": "ghbm-table2", "config": json.loads(json.dumps(asdict(cfg)))}   # as read back
        texts = {paper_difference(ghbm.paper_setting(r), r["config"], ghbm.SELECTION) for r in (fresh, saved)}
        assert len(texts) == 1, texts
        return texts.pop()
    assert note(dataset="shakespeare") == ""                                          # the paper's own scale
    assert note(dataset="shakespeare", rounds=150, seeds=1) == ("Differs from the paper setting: rounds = 150 "
                                                                "(paper: 250), seeds = 1 (paper: 5).")
    assert "dataset = fashion-mnist (paper: cifar10-jpeg), model = mlp200 (paper: cnn-cifar)" in note(
        dataset="fashion-mnist")


def test_tau_experiment_rows_are_keyed_by_tau(synthetic, tmp_path):
    paths = ghbm.run_experiment("ghbm-tau", quick=True, out=tmp_path, progress=False, taus=(1, 5), **TINY)
    result = json.loads(paths[0].read_text())
    assert set(result["rows"]) == {"1", "5"} and result["config"]["participation"] == 0.2
    assert {"mean", "std", "per_seed"} <= set(result["rows"]["5"])


def test_cost_to_reach_reads_the_first_evaluation_at_target():
    run = {"curve": {"time": [0, 5, 10], "accuracy": [0.1, 0.6, 0.8], "bytes_up": [0, 10, 20],
                     "bytes_down": [0, 10, 20], "client_steps": [0, 50, 100]}}
    assert ghbm.cost_to_reach(run, 0.6) == {"rounds": 5, "bytes": 20, "client_steps": 50}
    assert ghbm.cost_to_reach(run, 0.9) is None


def test_quadratic_without_momentum_in_full_participation_is_gradient_descent():
    cfg = ghbm.QuadraticSetting(rounds=30)
    A, b, f, f_star = ghbm.quadratic_problem(cfg)
    x = np.zeros(cfg.dim)
    for _ in range(30):
        x = x - cfg.round_lr * np.mean(A * (x - b), axis=0)
    assert ghbm.quadratic_run(cfg, J=1, tau=1, per_round=cfg.clients, momentum="none")[-1] == \
        pytest.approx(f(x) - f_star, rel=1e-12)


@pytest.mark.parametrize("J, per_round", [(1, 2), (3, 2), (4, 10)])
def test_quadratic_window_momentum_with_tau_one_is_fedcm(J, per_round):
    cfg = ghbm.QuadraticSetting(rounds=40)
    np.testing.assert_allclose(ghbm.quadratic_run(cfg, J, 1, per_round, "window"),
                               ghbm.quadratic_run(cfg, J, 1, per_round, "heavy-ball"), rtol=1e-9, atol=1e-9)


def test_practical_ghbm_ends_on_fedavgs_cycle():
    """On a cycle of period tau, x^{t-1} = x^{t-tau-1}: eq. (7)'s momentum vanishes, so GHBM's limit cycle is
    cyclic FedAvg's, and the analysed form (eq. 4) is the one that reaches full participation."""
    cfg = ghbm.QuadraticSetting(rounds=1200, steps=(5,))
    ghbm_run, fedavg = (ghbm.quadratic_run(cfg, 5, 5, 2, m)[-10:] for m in ("heavy-ball", "none"))
    np.testing.assert_allclose(ghbm_run, fedavg, rtol=1e-6)
    assert ghbm.quadratic_run(cfg, 5, 1, 2)[-1] > 50 * ghbm.quadratic_run(cfg, 5, 5, 2, "window")[-1]


def test_quadratic_experiment_reproduces_figure_9s_ordering(tmp_path):
    paths = ghbm.run_experiment("ghbm-quadratic", out=tmp_path, steps=[1, 5])
    result = json.loads(paths[0].read_text())
    for J in ("1", "5"):
        c = result["curves"][J]
        reached = max(c["ghbm-eq4"][-1], c["fedcm-full"][-1])
        assert abs(c["ghbm-eq4"][-1] - c["fedcm-full"][-1]) < 1e-3 * c["fedcm"][-1]
        assert min(c["fedcm"][-1], c["ghbm"][-1], c["fedavg"][-1]) > 30 * reached
    assert result["config"]["tau"] == 5 and "--set steps=1,5" in result["command"]


def probe_run(taus, server_lr, every=1, rounds=12):
    """FedAvg on 10 equal clients, 2 per round cyclically, each local step a full batch (float64)."""
    from afl.algorithms import make_federation, run_algorithm
    parts = [torch.arange(40 * i, 40 * (i + 1)) for i in range(10)]
    fed = make_federation(DATA, "mlp32", 10, batch_size=40, seed=0, parts=parts, dtype=torch.float64)
    out = run_algorithm("fedavg", fed, total_time=rounds, eval_every=rounds, K=2, lr=0.05, s=2, timing="rounds",
                        sampling="cyclic", weighting="size", server_lr=server_lr,
                        learner_class=ghbm.deviation_probe(taus, every))
    return out["learner"].deviation


def test_deviation_vanishes_at_tau_one_over_c_when_the_model_stands_still():
    """Corollary 4.5: with cyclic participation the last 1/C rounds hold every client once, so (no lag: the
    server does not move) their mean pseudo-gradient is all clients' exactly; one round's is far from it."""
    dev = probe_run((1, 5), server_lr=1e-12)
    assert dev["round"] == list(range(5, 13))
    assert max(dev["tau"]["5"]) < 1e-18 and min(dev["tau"]["1"]) > 0.05


def test_deviation_with_a_moving_model_has_a_lag():
    dev = probe_run((1, 5, 10), server_lr=1.0, every=2)
    assert dev["round"] == [10, 12]                  # every 2 rounds, once the last 10 pseudo-gradients exist
    assert all(1e-6 < d < 10 for d in dev["tau"]["5"])


def test_probe_learner_must_extend_the_algorithms_learner():
    from afl.algorithms import make_federation, run_algorithm
    fed = make_federation(DATA, "mlp32", 10, batch_size=40, seed=0)
    with pytest.raises(ParameterError, match="learner_class"):
        run_algorithm("ghbm", fed, total_time=2, eval_every=1, learner_class=ghbm.deviation_probe((1,), 1))


def test_fig1_experiment_rows_by_split_and_tau(synthetic, tmp_path):
    paths = ghbm.run_experiment("ghbm-fig1", quick=True, out=tmp_path, progress=False, probe_taus=(1, 2),
                                **TINY)
    result = json.loads(paths[0].read_text())
    assert set(result["rows"]) == {"noniid", "iid"} and set(result["rows"]["iid"]) == {"1", "2"}
    run = result["runs"][0]
    assert run["deviation"]["round"] == [2, 4, 6] and len(run["deviation"]["tau"]["2"]) == 3
    assert "Lemma 4.4" in paths[1].read_text() and paths[2].stat().st_size > 10000
    # fewer rounds than the first measurement (round 40 for tau = 40) would leave every row empty: refused
    with pytest.raises(ParameterError, match="rounds=30.*at least 40 with probe_taus up to 40"):
        ghbm.setting("ghbm-fig1", quick=True, rounds=30, eval_every=10)
    assert ghbm.setting("ghbm-fig1", quick=True, rounds=42, eval_every=4).rounds == 42          # round 40 measures
    with pytest.raises(ParameterError, match="at least 44"):
        ghbm.setting("ghbm-fig1", quick=True, rounds=43, eval_every=11)
    with pytest.raises(ParameterError, match="methods"):
        ghbm.setting("ghbm-fig1", quick=True, methods=("ghbm",))


def test_a_bf16_result_says_so_in_its_report_and_title():
    from afl.repro.runner import heading, title_tag
    cfg = json.loads(json.dumps(asdict(ghbm.setting("ghbm-table2", quick=True, precision="bf16"))))
    result = {"experiment": "ghbm-table2", "command": "c", "machine": "m", "execution": "e", "quick": True,
              "config": cfg}
    assert "bfloat16 mixed precision" in "\n".join(heading(result)) and title_tag(result) == " (QUICK setting, bf16)"
    fp32 = result | {"config": cfg | {"precision": "fp32"}, "quick": False}
    assert "bfloat16" not in "\n".join(heading(fp32)) and title_tag(fp32) == ""
    with pytest.raises(ParameterError, match="precision"):
        ghbm.setting("ghbm-table2", quick=True, precision="fp16")


def test_a_fleet_trains_a_round_of_every_method_in_one_engine_call(synthetic):
    """The methods' different correction hooks (none, momentum, control variates, FedHBM's pull) share the engine:
    one call a round for the whole grid, against one per run and round alone (``afl bench fleet``)."""
    from afl.bench import bench_fleet
    methods = ("fedavg", "fedcm", "scaffold", "fedhbm")
    row = bench_fleet("ghbm-table2", overrides=dict(TINY, methods=methods, splits=("noniid",)))
    assert row["runs"] == len(methods) and row["failed_runs"] == 0
    assert row["sequential_engine_calls"] == len(methods) * TINY["rounds"]
    assert row["fleet_engine_calls"] == TINY["rounds"]
    assert row["max_final_accuracy_gap"] < 0.05
    assert 0 < row["sequential_engine_s"] < row["sequential_s"] and 0 < row["fleet_engine_s"] < row["fleet_s"]
    assert row["engine_only_speedup"] == pytest.approx(row["sequential_s"] / row["fleet_engine_s"])


def test_bench_fleet_names_the_grids_it_can_run():
    from afl.bench import bench_fleet
    with pytest.raises(ParameterError, match="grid"):
        bench_fleet("ghbm-quadratic")


def test_the_shakespeare_federation_is_the_papers():
    """App. C.1 / Table 6: 100 clients of 2,000 windows each, each one role (non-IID), or 200,000 windows of every
    role spread over the clients (IID); one federation for every seed (the authors' pre-sampled files), each role's
    windows a contiguous run, and FedDyn's test set of 400 windows per chosen role. afl's earlier readings stay
    available by name, each one setting (issue 52)."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the Shakespeare mirror")
    cfg = ghbm.setting("ghbm-table2", dataset="shakespeare")
    data = ghbm.load_task(cfg)
    noniid, iid = (ghbm.client_parts(cfg, data, split, 0) for split in ("noniid", "iid"))
    for parts in (noniid, iid):
        assert len(parts) == 100 and all(len(p) == 2000 for p in parts)
    roles = [int(data.train_groups[p].unique()) for p in noniid]                 # one role each
    assert len(set(roles)) == 100 and all(len(data.train_groups[p].unique()) == 1 for p in noniid)
    assert all(bool((p.diff() == 1).all()) for p in noniid)                      # a contiguous run of windows
    every_role = set(data.train_groups[torch.cat(iid)].unique().tolist())
    assert len(every_role) > 300 and not set(roles) >= every_role                # IID: windows of every role
    for part_a, part_b in zip(noniid, ghbm.client_parts(cfg, data, "noniid", 7)):
        assert torch.equal(part_a, part_b)                                       # the same federation every seed
    test = ghbm.test_view(cfg, data, 0)
    assert set(test.test_groups.unique().tolist()) == set(roles) and len(test.test_y) <= 100 * ghbm.TEST_PER_ROLE
    # the earlier readings, each by name
    first = ghbm.client_parts(replace(cfg, crop="first"), data, "noniid", 0)
    for p in first:                                                             # a role's first 2,000 windows
        assert torch.equal(p, torch.nonzero(data.train_groups == data.train_groups[p[0]]).flatten()[:2000])
    assert not all(torch.equal(p, q) for p, q in zip(first, noniid))
    per_seed = [int(data.train_groups[p[0]]) for p in ghbm.client_parts(replace(cfg, roles="per-seed"), data,
                                                                         "noniid", 7)]
    assert set(per_seed) != set(roles)
    chosen = ghbm.client_parts(replace(cfg, iid_pool="chosen-roles"), data, "iid", 0)
    assert torch.equal(torch.cat(chosen).sort().values, torch.cat(noniid).sort().values)
    assert ghbm.test_view(replace(cfg, test_set="all-roles"), data, 0) is data
    earlier = ghbm.client_parts(replace(cfg, federation="any-roles"), data, "noniid", 0)
    assert sum(map(len, earlier)) < 200000 and min(map(len, earlier)) < 2000


def test_the_estimates_training_sizes_are_the_datasets():
    """A full pass over a client's data (MIME's) is priced from :data:`ghbm.TRAIN_SAMPLES` without loading it:
    each is its dataset's training set; the paper's CIFAR protocol puts 500 images on a client, 8 batches of 64."""
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the datasets")
    assert {name: load_dataset(name).n_train for name in ghbm.TRAIN_SAMPLES} == ghbm.TRAIN_SAMPLES
    cifar = ghbm.setting("ghbm-table2", quick=False, methods=("mime",))
    assert cifar.client_samples() == 500
    assert cifar.work().gradients == cifar.rounds * 10 * (2 * 8 + 8)
