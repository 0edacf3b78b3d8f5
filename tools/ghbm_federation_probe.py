"""GHBM's Shakespeare federation, one detail at a time (issue 52, item 2): what each reading of App. C.1 that afl
once took moves.

The paper's federation (``afl.repro.ghbm``: ``roles="fixed"``, ``crop="offset"``, ``iid_pool="all-roles"``,
``test_set="chosen-roles"``) against the same federation with one field at afl's earlier reading, FedAvg, 100
rounds, seed 0 (and seed 1 for ``roles``: the fixed federation is seed 0's draw), each an ``afl repro ghbm-table2``
result in ``results/ghbm/shakespeare/probes/federation/<name>/``
(``paper-<split>``: the paper's reading; every other folder: one field changed, its recorded command says which).
Each run is paired with the paper's reading on the same seed, split and machine; the measure is the mean test
accuracy over rounds 50-100 (the evaluations every 10 rounds), and the yardstick the spread of FedAvg's five seeds
over the same rounds (``runs/fedavg-<split>``, the paper's federation; sample std, ddof 1). The rule, set before
the runs: a detail moves FedAvg where its difference exceeds 2 * sqrt(2) of that std, the 95 % width of the
difference of two single seeds (for ``test_set`` the training is the same run's and only the test windows differ,
so its difference is the test set's alone).

    python tools/ghbm_federation_probe.py            # print the table
    python tools/ghbm_federation_probe.py --write    # and write federation.{json,md} beside the runs
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.repro.ghbm import FEDERATION_SEED, GhbmSetting  # noqa: E402
from afl.stats import mean_std  # noqa: E402

PROBES = Path("results/ghbm/shakespeare/probes/federation")
FIVE_SEEDS = Path("results/ghbm/shakespeare/runs")
#: the details of the paper's federation and the readings afl took before it (GhbmSetting's fields)
DETAILS = ("roles", "crop", "iid_pool", "test_set")
START, STOP = 50, 100
#: the rule's multiple of the five seeds' std: the 95 % width of a difference of two single seeds
WIDTH = 2 * math.sqrt(2)


def window_mean(curve: dict, start: float = START, stop: float = STOP) -> float:
    """Mean test accuracy over the evaluations at rounds ``start`` to ``stop`` (both included)."""
    acc = [a for t, a in zip(curve["time"], curve["accuracy"]) if start - 1e-9 <= t <= stop + 1e-9]
    if not acc:
        raise ValueError(f"no evaluation between rounds {start} and {stop}")
    return sum(acc) / len(acc)


def five_seeds(root: Path, method: str, split: str) -> tuple[float, float, int]:
    """The mean and std (ddof 1) over the committed seeds of ``method`` on ``split`` of :func:`window_mean`, and
    their count."""
    runs = json.loads((root / FIVE_SEEDS / f"{method}-{split}/ghbm-table2.json").read_text())["runs"]
    return (*mean_std(window_mean(r["curve"]) for r in runs), len(runs))


def changed(config: dict) -> dict:
    """The fields of :data:`DETAILS` in which ``config`` differs from the paper's federation."""
    paper = GhbmSetting()
    return {f: config[f] for f in DETAILS if config.get(f, getattr(paper, f)) != getattr(paper, f)}


def rows(root: Path = ROOT) -> list[dict]:
    """One row per run of a probe with a field changed: the paper's reading on the same seed and the changed one,
    their difference, and the five seeds' mean and std over the same rounds."""
    results = {p.parent.name: json.loads(p.read_text()) for p in sorted((root / PROBES).glob("*/ghbm-table2.json"))}
    out, yardsticks = [], {}                       # (method, split) -> five_seeds(), read once a call
    for name, result in results.items():
        diff = changed(result["config"])
        if not diff:
            continue
        if len(diff) != 1:
            raise ValueError(f"{name}: a probe changes one field, not {diff}")
        (field, value), = diff.items()
        for run in result["runs"]:
            paper = results.get(f"paper-{run['split']}")
            if paper is None:
                raise ValueError(f"{name}: no paper-{run['split']} run to pair it with")
            base = [r for r in paper["runs"] if (r["seed"], r["method"]) == (run["seed"], run["method"])]
            if not base or paper["config"]["rounds"] != result["config"]["rounds"]:
                raise ValueError(f"{name}: paper-{run['split']} has no run of seed {run['seed']} and "
                                 f"{run['method']} as long")
            key = run["method"], run["split"]
            if key not in yardsticks:
                yardsticks[key] = five_seeds(root, *key)
            mean5, std5, n5 = yardsticks[key]
            a, b = window_mean(base[0]["curve"]), window_mean(run["curve"])
            out.append({"probe": name, "field": field, "value": value, "paper_value": getattr(GhbmSetting(), field),
                        "split": run["split"], "method": run["method"], "seed": run["seed"], "paper": a,
                        "changed": b, "difference": b - a, "five_seeds_mean": mean5, "five_seeds_std": std5,
                        "five_seeds": n5, "bound": WIDTH * std5, "moves": abs(b - a) > WIDTH * std5,
                        "command": result["command"], "paper_command": paper["command"]})
    return out


def with_out(command: str, probe: str) -> str:
    """``command`` as it writes into the probe's folder (the recorded command names no ``--out``)."""
    return command if "--out" in command else f"{command} --out {PROBES / probe}"


def markdown(table: list[dict]) -> str:
    lines = [
        "# GHBM Shakespeare: the federation, one detail at a time",
        "",
        f"Written by `python tools/ghbm_federation_probe.py --write` from the runs in this folder. FedAvg, {STOP} "
        "rounds, the paper's federation with one field changed, each run paired with the paper's reading on the "
        f"same seed, split and machine. Mean test accuracy over rounds {START}–{STOP}, %. A detail moves FedAvg "
        f"where |difference| > 2√2 × the std of FedAvg's five seeds over the same rounds (`runs/fedavg-<split>`, the "
        "paper's federation).",
        "",
        "| field: changed (paper's) | split | seed | paper's reading | changed | difference | five seeds, mean ± std "
        "| moves? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(f"| {r['field']}: {r['value']} ({r['paper_value']}) | {r['split']} | {r['seed']} | "
                     f"{100 * r['paper']:.2f} | "
                     f"{100 * r['changed']:.2f} | {100 * r['difference']:+.2f} | {100 * r['five_seeds_mean']:.2f} ± "
                     f"{100 * r['five_seeds_std']:.2f} | {'yes' if r['moves'] else 'no'} "
                     f"(bound {100 * r['bound']:.2f}) |")
    if any(r["field"] == "roles" and r["seed"] == FEDERATION_SEED for r in table):
        lines += ["", f"`roles: per-seed` draws seed s's roles; the fixed federation is seed {FEDERATION_SEED}'s "
                  f"draw, so that seed's row is the same federation twice (a check of the pairing: it must read "
                  f"+0.00) and the other seeds are the probe."]
    lines += ["", "Commands:", ""]
    runs = ((r["paper_command"], f"paper-{r['split']}", r["command"], r["probe"]) for r in table)
    for command in dict.fromkeys(c for paper, a, probe, b in runs for c in (with_out(paper, a), with_out(probe, b))):
        lines.append(f"- `{command}`")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write federation.json and federation.md")
    args = parser.parse_args(argv)
    table = rows()
    text = markdown(table)
    print(text, end="")
    if args.write:
        (ROOT / PROBES / "federation.json").write_text(json.dumps(table, indent=1) + "\n")
        (ROOT / PROBES / "federation.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
