"""The ``afl`` command line: parameter counts, benchmark keys, clear errors."""
import json
import os

import pytest

from afl.cli import main
from afl.models import build_model, count_parameters


def test_models_prints_parameter_counts(capsys):
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r["parameters"] for r in json.loads(capsys.readouterr().out)}
    assert rows["mlp32"] == 784 * 32 + 32 + 32 * 10 + 10
    assert rows["resnet20"] == count_parameters(build_model("resnet20"))


def test_algorithms_lists_every_registered_algorithm_with_its_defaults(capsys):
    assert main(["algorithms", "--json"]) == 0
    rows = {r["name"]: r["settings"] for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"fedavg", "quafl", "fedbuff", "favas"}
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


@pytest.mark.skipif(not os.environ.get("AFL_DATA"), reason="AFL_DATA is not set: needs the MNIST mirror")
def test_data_verify(capsys):
    assert main(["data", "verify", "mnist"]) == 0
    assert "checksums verified" in capsys.readouterr().out
