"""tools/qafel_late_race.py: QAFeL's rows near the target, window by window, and the CPU kind each run records."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import qafel_late_race as probe  # noqa: E402
import qafel_probe  # noqa: E402

INTEL = ("Linux x86_64 (Intel(R) Xeon(R) Processor; AVX512 kernels), 2 CPU cores, torch 2.14.1+cu130, 2 threads, "
         "CPU denormals flushed, device cpu")
AMD = "Linux x86_64 (AMD EPYC; AVX2 kernels), 2 CPU cores, torch 2.14.1+cu130, 1 thread, device cpu"
OLD = "Linux x86_64, 2 CPU cores, torch 2.14.1+cu130, 2 threads, CPU denormals flushed, device cpu"


def test_fingerprints_group_a_seeds_runs_by_first_loss_with_the_kinds_recorded():
    def run(seed, loss, machine):
        return {"seed": seed, "machine": machine, "curve": {"loss": [loss, 0.5]}}
    runs = [run(0, 0.82, AMD), run(0, 0.82, OLD), run(0, 0.83, INTEL), run(1, 0.70, OLD)]
    assert probe.fingerprints(runs) == [
        {"seed": 0, "first_loss": 0.82, "runs": 2, "recorded_kinds": ["AMD EPYC; AVX2 kernels"]},
        {"seed": 0, "first_loss": 0.83, "runs": 1, "recorded_kinds": ["Intel(R) Xeon(R) Processor; AVX512 kernels"]},
        {"seed": 1, "first_loss": 0.70, "runs": 1, "recorded_kinds": []}]


def test_the_committed_probe_follows_from_the_results_it_read():
    out = ROOT / "results/qafel/late-race"
    result = json.loads((out / "late-race.json").read_text())
    args = qafel_probe.recorded(probe.arguments(), result["command"])
    assert result["windows"] == [args.start, args.stop, args.window]
    runs = [r for p in args.results for r in probe.runs_of(ROOT / p, args.methods)]
    assert result["rows"] == probe.summary(runs, *result["windows"])
    assert result["fingerprints"] == probe.fingerprints(runs)
    assert (out / "late-race.md").read_text() == probe.markdown(result)
