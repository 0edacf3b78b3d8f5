"""The ``afl`` command line: parameter counts, benchmark keys, clear errors."""
import json
import os

import pytest

from afl.cli import build_parser, main
from afl.errors import ParameterError
from afl.models import build_model, count_parameters


def test_models_prints_parameter_counts(capsys):
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r["parameters"] for r in json.loads(capsys.readouterr().out)}
    assert rows["mlp32"] == 784 * 32 + 32 + 32 * 10 + 10
    assert rows["resnet20"] == count_parameters(build_model("resnet20"))


def test_algorithms_lists_every_registered_algorithm_with_its_defaults(capsys):
    assert main(["algorithms", "--json"]) == 0
    rows = {r["name"]: r["settings"] for r in json.loads(capsys.readouterr().out)}
    from afl.algorithms import REGISTRY
    assert set(rows) == set(REGISTRY) and {"fedavg", "favas", "qafel", "ghbm", "fedhbm", "mimemom"} <= set(rows)
    assert rows["ghbm"]["tau"] == 10 and rows["fedhbm"]["beta"] == 1.0
    assert rows["qafel"]["client_quantizer"] == "qsgd:4" and rows["qafel"]["hidden_state"] is True
    assert rows["fedbuff"]["Z"] == 10 and rows["fedbuff"]["concurrency"] is None
    assert rows["favas"]["reweighting"] == "literal"


def test_unknown_experiment_is_a_clear_error(capsys):
    assert main(["repro", "favas-table9"]) == 2
    err = capsys.readouterr().err
    assert "experiment='favas-table9'" in err and "favas-table2" in err


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the MNIST mirror")
def test_bench_reports_every_key(capsys):
    assert main(["bench", "local-sgd", "--models", "mlp32", "--clients", "2", "--steps", "2", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    keys = {"model", "device", "strategy", "clients", "steps", "batch", "reference_steps_per_s", "engine_steps_per_s",
            "speedup", "peak_gflops", "engine_gflops"}
    assert keys <= set(row) and row["model"] == "mlp32" and row["clients"] == 2 and row["batch"] == 128
    assert row["strategy"] == "mlp"                                   # the engine's choice for an MLP
    # forward + weight gradients of both layers, input gradient of the second only (the data needs none)
    assert row["flops_per_client_step"] == 2 * 128 * (2 * 784 * 32 + 3 * 32 * 10)
    assert row["speedup"] == pytest.approx(row["engine_steps_per_s"] / row["reference_steps_per_s"])
    assert row["precision"] == "fp32" and row["memory_basis"] == "estimated" and row["chunk"] >= 1


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the Shakespeare mirror")
def test_bench_trains_the_shakespeare_lstm_both_ways(capsys):
    """Token windows reach the reference loop as tensors (not images), at the GHBM paper's batch of 100."""
    assert main(["bench", "local-sgd", "--models", "char-lstm", "--clients", "1", "--steps", "1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (row["model"], row["dataset"], row["batch"]) == ("char-lstm", "shakespeare", 100)
    assert row["strategy"] == "lstm-loop"                             # the engine's choice on a CPU
    assert row["reference_steps_per_s"] > 0 and row["engine_steps_per_s"] > 0


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the Fashion-MNIST mirror")
def test_bench_trains_lenet5_on_fashion_mnist_at_fedasts_batch(capsys):
    """The model FedAST's paper trains on Fashion-MNIST (one input channel), so the plan can price its jobs."""
    assert main(["bench", "local-sgd", "--models", "lenet5", "--clients", "2", "--steps", "1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (row["model"], row["dataset"], row["batch"]) == ("lenet5", "fashion-mnist", 32)
    assert row["reference_steps_per_s"] > 0 and row["engine_steps_per_s"] > 0


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the MNIST mirror")
def test_bench_times_engines_side_by_side_in_processes(capsys):
    """--processes N: N engines, each in its own process with 1/N of the threads, timed over one window; their
    client-steps per second add up (what afl repro --processes gains on this CPU)."""
    from afl.bench import bench_local_sgd
    [row] = bench_local_sgd(["mlp32"], clients=2, steps=2, reference=False, processes=2, seconds=0.5)
    assert row["processes"] == 2 and row["threads_per_process"] == max(1, row["threads"] // 2)
    assert row["processes_engine_steps_per_s"] > 0
    assert row["one_process_engine_steps_per_s"] > 0
    assert row["processes_speedup"] == pytest.approx(row["processes_engine_steps_per_s"]
                                                     / row["one_process_engine_steps_per_s"])
    assert main(["bench", "local-sgd", "--models", "mlp32", "--processes", "0"]) == 2
    assert "processes=0" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the MNIST mirror")
def test_bench_runs_the_engine_in_bf16_and_checks_the_precision(capsys):
    argv = ["bench", "local-sgd", "--models", "mlp32", "--clients", "2", "--steps", "2", "--json", "--no-reference"]
    assert main(argv + ["--precision", "bf16"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["precision"] == "bf16" and row["engine_steps_per_s"] > 0
    assert main(argv + ["--precision", "fp16"]) == 2
    assert "precision='fp16'" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the MNIST mirror")
def test_data_verify(capsys):
    assert main(["data", "verify", "mnist"]) == 0
    assert "mnist: ok" in capsys.readouterr().out


# ------------------------------------------------------------------ no tracebacks: every bad argument is named

@pytest.mark.parametrize("argv, name", [
    (["repro", "favas-table2", "--quick", "--device", "cuda"], "device='cuda'"),
    (["repro", "favas-table2", "--quick", "--device", "gpu"], "device='gpu'"),
    (["repro", "favas-table2", "--quick", "--seeds", "0"], "seeds=0"),
    (["bench", "local-sgd", "--device", "cuda"], "device='cuda'"),
    (["bench", "local-sgd", "--clients", "0"], "clients=0"),
    (["bench", "local-sgd", "--clients", "-3"], "clients=-3"),
    (["bench", "local-sgd", "--steps", "0"], "steps=0"),
    (["bench", "local-sgd", "--models", "vgg"], "model='vgg'"),
    (["repro", "favas-table2", "--quick", "--fresh", "--resume"], "--fresh"),
    (["repro", "qafel-table1", "--quick", "--set", "bits=3"], "setting field='bits'"),
    (["repro", "qafel-table1", "--quick", "--set", "target=1.5"], "target=1.5"),
    (["repro", "qafel-table1", "--quick", "--set", "=0.8"], "--set='=0.8'"),
    (["repro", "favas-table2", "--quick", "--set", "n=-1"], "n=-1"),
])
def test_bad_arguments_are_errors_not_tracebacks(argv, name, capsys, tmp_path, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)        # the same on a machine with a GPU
    assert main(argv + (["--out", str(tmp_path / "out")] if argv[0] == "repro" else [])) == 2
    err = capsys.readouterr().err
    assert err.startswith("afl: error: ") and name in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()                                  # nothing created before the checks


def test_unwritable_output_folder_is_an_error(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["repro", "favas-table2", "--quick", "--out", str(blocker / "x")]) == 2
    err = capsys.readouterr().err
    assert "out=" in err and "a directory afl can create" in err


def test_help_names_the_experiments_and_has_no_markup(capsys):
    with pytest.raises(SystemExit):
        main(["repro", "--help"])
    text = capsys.readouterr().out
    assert "favas-table2" in text and "favas-fig2" in text and "--fresh" in text and "resume" in text
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out


# ------------------------------------------------------------------ saved runs are never lost

TINY = dict(n=8, s=2, Z=2, K=3, batch=8, total_time=40.0, eval_every=20.0, seeds=1, splits=("iid",),
            methods=("fedavg", "favas"))


@pytest.fixture
def tiny_experiment(monkeypatch):
    """favas-table2 on 8 synthetic clients: seconds, no dataset needed."""
    from afl.data import make_synthetic
    from afl.repro import favas as fr
    data = make_synthetic(200, 40, shape=(1, 28, 28), num_classes=10, seed=0)
    monkeypatch.setattr(fr, "load_dataset", lambda *a, **k: data)
    real = fr.setting
    monkeypatch.setattr(fr, "setting", lambda name, quick=None, **kw: real(name, quick=quick, **{**TINY, **kw}))
    return fr


@pytest.mark.parametrize("fleet", [True, False])
def test_interrupted_run_keeps_its_runs_and_says_how_to_resume(tiny_experiment, monkeypatch, tmp_path, capsys,
                                                               fleet):
    fr = tiny_experiment
    real, saved = fr.PartialRuns.append, []

    def ctrl_c_after_two(self, run):          # Ctrl-C reaches the main thread while later runs are unfinished
        real(self, run)
        saved.append(run)
        if len(saved) == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr(fr.PartialRuns, "append", ctrl_c_after_two)
    out = tmp_path / "res"
    argv = ["repro", "favas-table2", "--seeds", "2", "--out", str(out)] + ([] if fleet else ["--no-fleet"])
    assert main(argv) == 130
    err = capsys.readouterr().err
    partial = out / "favas-table2.partial.jsonl"
    assert "2 finished run(s) are saved" in err and str(partial) in err and "--fresh" in err
    assert "Traceback" not in err and len(partial.read_text().splitlines()) == 2
    # the same command again, without --resume: the saved runs are kept and not recomputed
    monkeypatch.setattr(fr.PartialRuns, "append", real)
    assert main(argv) == 0
    result = json.loads((out / "favas-table2.json").read_text())
    assert result["resumed_runs"] == 2 and len(result["runs"]) == 4 and not partial.exists()
    printed = capsys.readouterr().out
    assert "| fedavg |" in printed and "wrote " in printed                 # the result table, then the files


def test_saved_runs_of_another_setting_are_not_mixed_in(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "res"
    partial = out / "favas-table2.partial.jsonl"
    out.mkdir()
    partial.write_text(json.dumps({"method": "fedavg", "split": "iid", "seed": 0, "setting_key": "other"}) + "\n")
    assert main(["repro", "favas-table2", "--out", str(out)]) == 2
    assert "--fresh" in capsys.readouterr().err and partial.read_text()    # refused, and the file kept
    assert main(["repro", "favas-table2", "--out", str(out), "--fresh"]) == 0


def test_a_bad_setting_leaves_a_saved_result_intact(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--seeds", "2", "--out", str(out)]) == 0
    saved = (out / "favas-table2.json").read_bytes()
    for bad in ("methods=()", "splits=()", "methods=[]"):
        assert main(["repro", "favas-table2", "--out", str(out), "--set", bad]) == 2
        err = capsys.readouterr().err
        assert f"{bad.split('=')[0]}=" in err and "at least one value" in err and "Traceback" not in err
    assert (out / "favas-table2.json").read_bytes() == saved


def test_a_result_holding_other_runs_is_replaced_only_with_fresh(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--seeds", "2", "--out", str(out)]) == 0
    saved = (out / "favas-table2.json").read_bytes()
    for narrower in (["--seeds", "1"], ["--set", "methods=fedavg"], ["--set", "total_time=20"]):
        assert main(["repro", "favas-table2", "--out", str(out), *narrower]) == 2
        assert "--fresh" in capsys.readouterr().err
        assert (out / "favas-table2.json").read_bytes() == saved          # nothing written, nothing created
        assert not (out / "favas-table2.partial.jsonl").exists()
    assert main(["repro", "favas-table2", "--seeds", "3", "--out", str(out)]) == 0   # holds the 4 runs, and 2 more
    assert len(json.loads((out / "favas-table2.json").read_text())["runs"]) == 6
    assert main(["repro", "favas-table2", "--seeds", "1", "--out", str(out), "--fresh"]) == 0
    assert len(json.loads((out / "favas-table2.json").read_text())["runs"]) == 2


def test_set_seeds_is_the_seeds_flag(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--set", "seeds=2", "--out", str(out)]) == 0
    assert len(json.loads((out / "favas-table2.json").read_text())["runs"]) == 4
    assert main(["repro", "favas-table2", "--seeds", "1", "--set", "seeds=2", "--out", str(tmp_path / "b")]) == 2
    assert "--set seeds=2" in capsys.readouterr().err


def test_a_torn_line_loses_no_run_across_two_interruptions(tiny_experiment, monkeypatch, tmp_path, capsys):
    fr = tiny_experiment
    real, count = fr.PartialRuns.append, [0]

    def ctrl_c_after(n):
        def append(self, run):
            real(self, run)
            count[0] += 1
            if count[0] == n:
                raise KeyboardInterrupt
        return append
    out = tmp_path / "res"
    argv = ["repro", "favas-table2", "--seeds", "2", "--out", str(out), "--no-fleet"]
    partial = out / "favas-table2.partial.jsonl"
    monkeypatch.setattr(fr.PartialRuns, "append", ctrl_c_after(2))
    assert main(argv) == 130
    with open(partial, "a") as f:                       # what a write killed midway leaves: half a line
        f.write('{"method": "fedavg", "spl')
    monkeypatch.setattr(fr.PartialRuns, "append", ctrl_c_after(3))
    with pytest.warns(UserWarning, match="line 3: not a saved run"):
        assert main(argv) == 130
    lines = partial.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[3])["setting_key"]      # the new run on a line of its own
    monkeypatch.setattr(fr.PartialRuns, "append", real)
    with pytest.warns(UserWarning, match="line 3"):
        assert main(argv) == 0
    result = json.loads((out / "favas-table2.json").read_text())
    assert result["resumed_runs"] == 3 and len(result["runs"]) == 4
    partial.write_text('[1, 2]\n{"setting_key": 5}\n')             # JSON that is not a run: skipped, no traceback
    from afl.results import PartialRuns
    with pytest.warns(UserWarning, match="line 1: not a saved run"):
        with pytest.raises(ParameterError, match="another setting"):
            PartialRuns(partial, "key").load()


def test_a_second_command_on_one_out_is_refused_while_the_first_runs(tiny_experiment, tmp_path, capsys):
    from afl.repro.runner import OutputLock
    out = tmp_path / "res"
    out.mkdir()
    held = OutputLock(out, "favas-table2")                 # as the first command holds it while it runs
    assert main(["repro", "favas-table2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"process {os.getpid()} is" in err and "another --out" in err
    assert main(["repro", "favas-table2", "--out", str(out / "elsewhere")]) == 0    # another folder: free
    held.release()
    assert main(["repro", "favas-table2", "--out", str(out)]) == 0
    assert not (out / ".favas-table2.lock").exists()


def test_bad_paths_are_named_before_anything_is_created(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "res"
    (tmp_path / "not-json").write_text("hello")
    (tmp_path / "no-config.json").write_text('{"runs": []}')
    cases = [(["--reuse", str(tmp_path / "not-json")], "reuse="), (["--reuse", str(tmp_path / "no-config.json")],
             "reuse="), (["--root", str(tmp_path / "missing")], "--root="), (["--out", ""], "--out=''")]
    for extra, named in cases:
        argv = ["repro", "favas-table2", "--out", str(out), *extra] if "--out" not in extra else \
            ["repro", "favas-table2", *extra]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"afl: error: {named}" in err and "Traceback" not in err, (extra, err)
        assert not out.exists() and not (tmp_path / "missing").exists()
    assert main(["repro", "favas-table2", "--out", str(out)]) == 0
    (out / "favas-table2.json").write_text((out / "favas-table2.json").read_text().replace(
        '"experiment": "favas-table2"', '"experiment": "ghbm-tau"'))
    assert main(["repro", "favas-table2", "--replot", "--out", str(out)]) == 2
    assert "it holds ghbm-tau's result" in capsys.readouterr().err


# ------------------------------------------------------------------ afl data verify

@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the MNIST mirror")
def test_verify_reports_every_dataset_and_recomputes_md5(tmp_path, monkeypatch, capsys):
    import shutil
    from pathlib import Path
    monkeypatch.setenv("AFL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AFL_DOWNLOAD", "0")
    root = tmp_path / "root"
    (root / "MNIST" / "raw").mkdir(parents=True)
    for f in (Path(os.environ["AFL_DATA"]) / "MNIST" / "raw").glob("*.gz"):
        shutil.copy(f, root / "MNIST" / "raw" / f.name)
    assert main(["data", "verify", "tinyimagenet", "mnist", "nope", "--root", str(root)]) == 2
    out = capsys.readouterr()
    assert "tinyimagenet: FAILED" in out.out and "mnist: ok" in out.out and "nope: FAILED" in out.out
    assert "afl data download" in out.out and "2 of 3" in out.err
    # flip one byte, restore size and mtime: a remembered MD5 would pass it; verify recomputes
    f = root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz"
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[200] ^= 0x01
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert main(["data", "verify", "mnist", "--root", str(root)]) == 2
    assert "mnist: FAILED" in capsys.readouterr().out


def test_reuse_takes_identical_runs_and_replot_computes_nothing(tiny_experiment, monkeypatch, tmp_path, capsys):
    fr = tiny_experiment
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--out", str(out)]) == 0
    table = out / "favas-table2.json"
    monkeypatch.setattr(fr, "compute_run", lambda *a, **k: pytest.fail("a reused run was computed again"))
    assert main(["repro", "favas-fig1", "--out", str(out), "--reuse", str(table)]) == 0
    fig1 = json.loads((out / "favas-fig1.json").read_text())
    assert fig1["reused_runs"] == len(fig1["runs"]) == 2 and "--reuse" in fig1["command"]
    (out / "favas-fig1.md").unlink()
    runs = json.loads((out / "favas-fig1.json").read_text())["runs"]
    assert main(["repro", "favas-fig1", "--out", str(out), "--replot"]) == 0
    assert json.loads((out / "favas-fig1.json").read_text())["runs"] == runs        # every run kept as it was
    assert (out / "favas-fig1.md").read_text().startswith("# favas-fig1")
    assert "2 of the 2 runs taken from the --reuse results" in (out / "favas-fig1.md").read_text()
    assert "--reuse results" not in (out / "favas-table2.md").read_text()
    assert main(["repro", "favas-fig2", "--out", str(tmp_path / "empty"), "--replot"]) == 2
    # each reused run names the invocation and the afl commit that computed it, and the report lists them (a merged
    # table's sources)
    table_result = json.loads(table.read_text())
    assert table_result["afl_commit"]["commit"] or table_result["afl_commit"]["version"]
    assert all(r["source"] == {"machine": table_result["machine"], "command": table_result["command"],
                               "afl_commit": table_result["afl_commit"]} for r in runs)
    assert f"- (a) 2 runs: `{table_result['command']}` on {table_result['machine']}" in \
        (out / "favas-fig1.md").read_text()
    assert "Where the runs were computed" not in (out / "favas-table2.md").read_text()


def test_more_seeds_grow_a_result_in_place_from_its_own_runs(tiny_experiment, monkeypatch, tmp_path):
    """docs/running.md: a job too short for every seed commits the seeds it finished; ``--seeds 2 --reuse`` of that
    result into the same folder computes the second seed only, and its first seed's runs are the ones saved."""
    fr = tiny_experiment
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--seeds", "1", "--out", str(out)]) == 0
    first = json.loads((out / "favas-table2.json").read_text())["runs"]
    real, computed = fr.compute_run, []
    monkeypatch.setattr(fr, "compute_run", lambda *a, **k: computed.append(1) or real(*a, **k))
    argv = ["repro", "favas-table2", "--seeds", "2", "--out", str(out), "--reuse", str(out / "favas-table2.json")]
    assert main(argv + ["--no-fleet"]) == 0
    grown = json.loads((out / "favas-table2.json").read_text())
    assert grown["reused_runs"] == len(first) == len(computed) and len(grown["runs"]) == 2 * len(first)
    kept = [r for r in grown["runs"] if "source" in r]
    assert [{k: v for k, v in r.items() if k != "source"} for r in kept] == first


def test_set_changes_the_setting_and_is_recorded_in_the_command(tiny_experiment, tmp_path):
    out = tmp_path / "r"
    argv = ["repro", "favas-table2", "--out", str(out), "--set", "total_time=20.0", "--set", "K=2", "--set",
            "methods=fedavg,favas"]
    assert main(argv) == 0
    result = json.loads((out / "favas-table2.json").read_text())
    assert result["config"]["total_time"] == 20.0 and result["config"]["K"] == 2
    assert result["command"] == "afl repro favas-table2 --set total_time=20.0 --set K=2 --set methods=fedavg,favas"
    assert main(result["command"].split()[1:] + ["--out", str(tmp_path / "again")]) == 0      # the same command
    assert json.loads((tmp_path / "again" / "favas-table2.json").read_text())["rows"] == result["rows"]


def test_a_result_names_the_commit_its_runs_started_from(tiny_experiment, tmp_path, monkeypatch):
    """A commit made while the runs compute is not the code that computed them: the result records the checkout
    as it was when the command started."""
    from afl.repro import runner
    checkout = {"commit": "at-start", "date": "", "dirty": False}
    real = runner.compute

    def compute_then_commit(*args, **kw):
        runs = real(*args, **kw)
        checkout["commit"] = "committed-meanwhile"
        return runs
    monkeypatch.setattr(runner, "compute", compute_then_commit)
    monkeypatch.setattr(runner, "afl_commit", lambda: dict(checkout))
    assert main(["repro", "favas-table2", "--out", str(tmp_path), "--set", "methods=fedavg"]) == 0
    assert json.loads((tmp_path / "favas-table2.json").read_text())["afl_commit"]["commit"] == "at-start"


@pytest.mark.parametrize("module, experiment, field, value", [
    ("favas", "favas-table2", "methods", "favas"), ("ghbm", "ghbm-table2", "splits", "noniid"),
    ("ghbm", "ghbm-tau", "taus", 10), ("qafel", "qafel-table1", "methods", "fedbuff"),
    ("fedast", "fedast-fig7", "methods", "fedast-static")])
def test_one_value_for_a_list_setting_is_a_list_of_one(module, experiment, field, value):
    """``--set splits=noniid`` means the one split, not its letters (the CLI reads a lone word as a string)."""
    import importlib
    from afl.cli import _override
    name, parsed = _override(f"{field}={value}")
    cfg = importlib.import_module(f"afl.repro.{module}").setting(experiment, quick=True, **{name: parsed})
    assert getattr(cfg, field) == (value,)


@pytest.mark.parametrize("value, parsed", [("True", True), ("true", True), ("FALSE", False), ("none", None),
                                           ("None", None), ("0.5", 0.5), ("trueish", "trueish")])
def test_set_reads_booleans_and_none_in_any_case(value, parsed):
    from afl.cli import _override
    assert _override(f"normalize={value}") == ("normalize", parsed)


def test_reuse_given_twice_keeps_every_file():
    """``--reuse A --reuse B C`` takes the runs of all three (a second ``--reuse`` once silently replaced the first,
    and the runs of A were computed again)."""
    args = build_parser().parse_args(["repro", "favas-table2", "--reuse", "a.json", "--reuse", "b.json", "c.json"])
    assert args.reuse == ["a.json", "b.json", "c.json"]
    assert build_parser().parse_args(["repro", "favas-table2"]).reuse == []


def test_a_changed_method_definition_is_not_reused(tiny_experiment, tmp_path):
    from dataclasses import replace
    fr = tiny_experiment
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--out", str(out)]) == 0
    runs = json.loads((out / "favas-table2.json").read_text())["runs"]
    cfg = fr.setting("favas-table2")
    assert all(fr.same_run(r, cfg) for r in runs)
    changed = replace(fr.METHODS["favas"], settings=lambda c: fr._clocked(c, reweighting="normalized"))
    fr.METHODS["favas"], original = changed, fr.METHODS["favas"]
    try:
        assert [fr.same_run(r, cfg) for r in runs] == [r["method"] != "favas" for r in runs]
    finally:
        fr.METHODS["favas"] = original


def test_a_setting_added_since_a_run_was_saved_counts_as_its_default(tiny_experiment, tmp_path):
    fr = tiny_experiment
    out = tmp_path / "res"
    assert main(["repro", "favas-table2", "--out", str(out), "--set", "methods=quafl,favas"]) == 0
    runs = json.loads((out / "favas-table2.json").read_text())["runs"]
    cfg = fr.setting("favas-table2")
    older = [{**r, "settings": {k: v for k, v in r["settings"].items() if k != "client_mixing"}} for r in runs]
    assert all(fr.same_run(r, cfg) for r in older)                      # recorded before client_mixing existed
    mixing = [{**r, "method": "favas-mixing"} for r in older if r["method"] == "favas"]
    assert mixing and not any(fr.same_run(r, cfg) for r in mixing)      # favas-mixing wants client_mixing=True
    extra = [{**r, "settings": {**r["settings"], "gone": 1}} for r in runs]
    assert not any(fr.same_run(r, cfg) for r in extra)                   # a setting the algorithm no longer has
    assert not any(fr.same_run({k: v for k, v in r.items() if k != "settings"}, cfg) for r in runs)  # no record


def test_an_output_folder_that_stops_taking_files_loses_no_run(tiny_experiment, monkeypatch, tmp_path, capsys):
    """The partial file becomes unwritable after the first run (a directory in its place: unwritable even for
    root), then the result file: every run is kept, the command says where, and resumes from there."""
    import afl.results as results
    monkeypatch.setattr(results.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    fr = tiny_experiment
    real, count = fr.PartialRuns.append, [0]
    out = tmp_path / "res"

    def block_after_first(self, run):
        real(self, run)
        count[0] += 1
        if count[0] == 1:
            self.path.unlink()
            self.path.mkdir()                                   # the next append cannot write the file
            (out / ".favas-table2.part.json").mkdir()           # nor can the result be written
    monkeypatch.setattr(fr.PartialRuns, "append", block_after_first)
    with pytest.warns(UserWarning, match="cannot write .*favas-table2.partial.jsonl"):
        code = main(["repro", "favas-table2", "--seeds", "2", "--out", str(out), "--no-fleet"])
    assert code == 2
    err = capsys.readouterr().err
    rescue = tmp_path / "tmp" / f"afl-rescue-{os.getpid()}"
    assert f"all 4 runs, is in {rescue / 'favas-table2.json'}" in err and "--replot" in err
    assert len(json.loads((rescue / "favas-table2.json").read_text())["runs"]) == 4
    assert len((rescue / "favas-table2.partial.jsonl").read_text().splitlines()) == 3    # runs 2-4 went there
    monkeypatch.setattr(fr.PartialRuns, "append", real)
    assert main(["repro", "favas-table2", "--replot", "--out", str(rescue)]) == 0
