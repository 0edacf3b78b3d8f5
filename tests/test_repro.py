"""FAVAS reproduction pipeline on a tiny federation: settings, JSON schema, tables, figures, the demo."""
import json

import pytest

from afl.data import make_synthetic
from afl.errors import ParameterError
from afl.repro import favas as fr

TINY = dict(n=8, s=2, Z=2, K=3, batch=8, total_time=40.0, eval_every=20.0, seeds=1)


def test_settings_follow_the_paper():
    paper = fr.setting("favas-table2", quick=False)
    assert (paper.n, paper.s, paper.K, paper.batch, paper.lr, paper.total_time, paper.Z) == (100, 20, 20, 128, 0.5,
                                                                                              5000.0, 10)
    assert paper.run_kwargs("fedbuff-quafl-code")["lr"] == pytest.approx(0.5 * 10 / 100)  # QuAFL code: lr Z / n
    assert paper.run_kwargs("fedbuff-quafl-code")["concurrency"] is None
    fedbuff = paper.run_kwargs("fedbuff")
    assert (fedbuff["lr"], fedbuff["concurrency"], fedbuff["staleness"]) == (0.5, 20, "sqrt")
    assert paper.run_kwargs("favas")["reweighting"] == "literal" and paper.run_kwargs("favas")["lr"] == 0.5
    assert paper.run_kwargs("favas-normalized")["reweighting"] == "normalized"
    assert paper.run_kwargs("quafl-lattice14")["quantizer"] == "lattice:14:1e-4"
    assert set(paper.methods) == {m for m, method in fr.METHODS.items() if method.in_paper}
    assert fr.reference("favas-mixing") is None and fr.reference("favas") is not None
    assert fr.reference("qafel") is None and fr.reference("fedasync") is None       # beyond the paper: no row
    ablation = fr.setting("favas-ablation", quick=False)
    assert ablation.run_kwargs("favas-noreweight")["reweighting"] == "none"
    assert ablation.run_kwargs("favas-mixing")["client_mixing"] is True
    assert fr.setting("favas-fig3a", quick=False).dataset == "cifar10-jpeg"         # never labelled CIFAR-10
    assert fr.setting("favas-table2", quick=True).total_time < paper.total_time
    with pytest.raises(ParameterError, match="experiment"):
        fr.setting("favas-table9")
    with pytest.raises(ParameterError, match="dataset='mnist2'.*one of 'mnist', 'fashion-mnist'"):    # before any run
        fr.setting("favas-table2", dataset="mnist2")
    for field, value in (("model", "vgg"), ("mode", "async"), ("concurrency", 0), ("concurrency", 101)):
        with pytest.raises(ParameterError, match=f"^{field}={value!r}"):
            fr.setting("favas-table2", **{field: value})


def test_runs_table_and_markdown():
    cfg = fr.setting("favas-table2", quick=True, dataset="mnist", **TINY)
    data = make_synthetic(400, 80, shape=(1, 28, 28), num_classes=10, seed=0)
    runs = [fr.compute_run(cfg, m, sp, 0, dataset=data) for sp in fr.SPLITS for m in fr.METHODS]
    for r in runs:
        assert {"client_steps", "wall_seconds", "client_steps_per_s", "final_accuracy", "curve", "settings"} <= set(r)
        assert r["curve"]["time"] == [0.0, 20.0, 40.0] and 0.0 <= r["final_accuracy"] <= 1.0
        assert r["algorithm"] == fr.METHODS[r["method"]].algorithm
    json.dumps(runs)                                               # every run is JSON as it is
    rows = fr.table2(runs)
    assert set(rows) == set(fr.METHODS) and set(rows["favas"]) == set(fr.SPLITS)
    cell = rows["favas"]["iid"]
    favas_iid = next(r for r in runs if r["method"] == "favas" and r["split"] == "iid")
    assert cell["per_seed"] == [100 * favas_iid["final_accuracy"]] and cell["std"] is None      # one seed: no spread
    md = fr.table2_markdown(rows)
    assert "iid (paper)" in md and "95.1 ± 0.1" in md            # the paper's FAVAS IID cell, as reference
    assert "± 0.0" not in md                                      # one seed: no spread to show


def test_run_experiment_writes_json_markdown_png(tmp_path):
    import os
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror")
    paths = fr.run_experiment("favas-table2", quick=True, out=tmp_path, progress=False, splits=("iid",), **TINY)
    assert [p.name for p in paths] == ["favas-table2.json", "favas-table2.md", "favas-table2.png"]
    result = json.loads(paths[0].read_text())
    table2 = {m for m, method in fr.METHODS.items() if method.in_paper}
    assert set(result["rows"]) == table2 and set(result["rows"]["fedavg"]) == {"iid"}
    assert {"mean", "std", "per_seed"} <= set(result["rows"]["favas"]["iid"])
    assert result["config"]["n"] == 8 and len(result["runs"]) == len(table2)
    assert "QUICK" in paths[1].read_text() and paths[2].stat().st_size > 0
    assert not (tmp_path / "favas-table2.partial.jsonl").exists()


def test_demo_writes_pictures(tmp_path, monkeypatch):
    import os
    if not os.environ.get("AFL_DATA"):
        pytest.skip("AFL_DATA is not set: needs the MNIST mirror")
    from afl import demo
    monkeypatch.setattr(demo, "demo_setting", lambda quick: fr.setting("favas-table2", quick=True, **TINY,
                                                                       methods=demo.DEMO_METHODS,
                                                                       splits=(demo.DEMO_SPLIT,)))
    paths = demo.run_demo(out=tmp_path, quick=True)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert len(json.loads(paths[2].read_text())["runs"]) == len(demo.DEMO_METHODS)


def test_a_favas_run_stopped_midway_goes_on_from_its_checkpoint(tmp_path, monkeypatch):
    """FAVAS's runs are on an event clock: the grid hands each its checkpoint file, and a run stopped by the time
    limit goes on from it to the run that never stopped."""
    from afl import deadline
    data = make_synthetic(200, 50, shape=(1, 28, 28), num_classes=10, seed=0)
    cfg = fr.setting("favas-table2", quick=True, dataset="mnist", **TINY)
    whole = fr.compute_run(cfg, "favas", "noniid_2of3_fast", 0, dataset=data)
    monkeypatch.setattr(deadline, "passed", lambda calls=iter(range(10 ** 6)): next(calls) >= 8)   # of 15 events
    with pytest.raises(deadline.TimeLimit):
        fr.compute_run(cfg, "favas", "noniid_2of3_fast", 0, dataset=data, checkpoints=tmp_path)
    assert [p.name for p in tmp_path.glob("*.ckpt")] == ["noniid_2of3_fast-favas-0.ckpt"]
    monkeypatch.setattr(deadline, "passed", lambda: False)
    resumed = fr.compute_run(cfg, "favas", "noniid_2of3_fast", 0, dataset=data, checkpoints=tmp_path)
    assert resumed.pop("resumed_at") and resumed["curve"] == whole["curve"]
    assert not any(tmp_path.iterdir())
