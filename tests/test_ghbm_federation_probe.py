"""tools/ghbm_federation_probe.py: each detail of GHBM's Shakespeare federation paired with the paper's reading."""
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import ghbm_federation_probe as probe  # noqa: E402

PAPER = {"roles": "fixed", "crop": "offset", "iid_pool": "all-roles", "test_set": "chosen-roles", "rounds": 100}


def run(accuracies, split="noniid", seed=0, method="fedavg"):
    """A run whose evaluations every 10 rounds, from round 0, have these accuracies."""
    return {"curve": {"time": [10.0 * i for i in range(len(accuracies))], "accuracy": list(accuracies)},
            "split": split, "seed": seed, "method": method}


def write(root: Path, folder: str, runs, command="afl repro ghbm-table2 ...", **config):
    path = root / folder / "ghbm-table2.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"command": command, "config": PAPER | config, "runs": runs}))


@pytest.fixture
def root(tmp_path):
    probes, seeds = tmp_path / probe.PROBES, tmp_path / probe.FIVE_SEEDS
    write(probes, "paper-noniid", [run([0.0] * 5 + [0.40] * 6), run([0.0] * 5 + [0.38] * 6, seed=1)],
          command="paper")
    write(probes, "crop-first-noniid", [run([0.0] * 5 + [0.43] * 6)], command="crop", crop="first")
    write(probes, "test-set-all-roles-noniid", [run([0.0] * 5 + [0.45] * 5 + [0.51])], command="test",
          test_set="all-roles")
    # five seeds of 250 rounds: only rounds 50-100 count (0.40 + seed / 100 there, 0.9 after)
    write(seeds, "fedavg-noniid", [run([0.0] * 5 + [0.40 + s / 100] * 6 + [0.9] * 15, seed=s) for s in range(5)],
          rounds=250)
    return tmp_path


def test_each_run_is_paired_with_the_papers_reading_of_its_seed_on_rounds_50_to_100(root):
    rows = {r["field"]: r for r in probe.rows(root)}
    assert set(rows) == {"crop", "test_set"}
    std = math.sqrt(sum((s / 100 - 0.02) ** 2 for s in range(5)) / 4)           # 0.40 .. 0.44, ddof 1
    crop = rows["crop"]
    assert (crop["value"], crop["paper_value"], crop["split"]) == ("first", "offset", "noniid")
    assert crop["paper"] == pytest.approx(0.40) and crop["changed"] == pytest.approx(0.43)
    assert crop["five_seeds_mean"] == pytest.approx(0.42) and crop["five_seeds_std"] == pytest.approx(std)
    assert crop["difference"] == pytest.approx(0.03) and not crop["moves"]     # 0.03 < 2 sqrt(2) 0.0158 = 0.0447
    test = rows["test_set"]
    assert test["changed"] == pytest.approx((5 * 0.45 + 0.51) / 6) and test["moves"]   # +0.06 > 0.0447
    assert (test["command"], test["paper_command"]) == ("test", "paper")
    text = probe.markdown(probe.rows(root))
    assert "| crop: first (offset) | noniid | 0 | 40.00 | 43.00 | +3.00 | 42.00 ± 1.58 | no (bound 4.47) |" in text
    assert f"- `paper --out {probe.PROBES}/paper-noniid`" in text
    assert f"- `crop --out {probe.PROBES}/crop-first-noniid`" in text
    assert probe.with_out("afl repro x --out there", "crop-first-noniid") == "afl repro x --out there"


def test_a_probe_of_two_seeds_gives_a_row_per_seed(root):
    write(root / probe.PROBES, "roles-per-seed-noniid", [run([0.0] * 5 + [0.40] * 6), run([0.0] * 5 + [0.44] * 6,
                                                                                           seed=1)], roles="per-seed")
    rows = [r for r in probe.rows(root) if r["field"] == "roles"]
    assert [(r["seed"], round(r["paper"], 9), round(r["difference"], 9)) for r in rows] == [(0, 0.4, 0.0),
                                                                                             (1, 0.38, 0.06)]
    assert [r["moves"] for r in rows] == [False, True]
    assert "seed 0's draw, so that seed's row is the same federation twice" in probe.markdown(probe.rows(root))
    assert "same federation twice" not in probe.markdown([r for r in probe.rows(root) if r["field"] != "roles"])


def test_a_probe_without_its_pair_or_changing_two_fields_is_refused(root):
    probes = root / probe.PROBES
    write(probes, "iid-pool-chosen-roles-iid", [run([0.4] * 11, split="iid")], iid_pool="chosen-roles")
    with pytest.raises(ValueError, match="no paper-iid run"):
        probe.rows(root)
    (probes / "iid-pool-chosen-roles-iid/ghbm-table2.json").unlink()
    write(probes, "two-fields-noniid", [run([0.4] * 11)], crop="first", roles="per-seed")
    with pytest.raises(ValueError, match="one field"):
        probe.rows(root)
    (probes / "two-fields-noniid/ghbm-table2.json").unlink()
    write(probes, "roles-per-seed-noniid", [run([0.4] * 11, seed=2)], roles="per-seed")
    with pytest.raises(ValueError, match="no run of seed 2"):
        probe.rows(root)


def test_the_committed_summary_follows_from_the_committed_runs():
    committed = ROOT / probe.PROBES / "federation.md"
    assert committed.read_text() == probe.markdown(probe.rows())
    assert json.loads((ROOT / probe.PROBES / "federation.json").read_text()) == json.loads(json.dumps(probe.rows()))
