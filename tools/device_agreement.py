"""Do two sets of the same experiment's runs agree, e.g. one computed on a GPU and one on this CPU? Float rounding
differs between devices, so runs are not bit for bit equal; what must agree is the table. Per (method, split):
the mean ± std of the final test accuracy over the seeds both sets hold, the difference of the means, and how many
runs ended at exactly the same accuracy. Prints a markdown table.

    python tools/device_agreement.py results/favas/table2/h100/favas-table2.partial.jsonl results/favas/table2/favas-table2.json
"""
import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def load_runs(path: Path) -> dict[tuple, float]:
    """(method, split, seed) -> final accuracy (%), from a result JSON (``runs``) or a ``.partial.jsonl``."""
    text = path.read_text()
    runs = [json.loads(line) for line in text.splitlines() if line] if path.suffix == ".jsonl" \
        else json.loads(text)["runs"]
    return {(r["method"], r["split"], r["seed"]): 100 * r["final_accuracy"] for r in runs}


p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("a", type=Path, help="runs A (.json or .partial.jsonl)")
p.add_argument("b", type=Path, help="runs B")
args = p.parse_args()
a, b = load_runs(args.a), load_runs(args.b)
groups = defaultdict(list)
for key in sorted(set(a) & set(b)):
    groups[key[:2]].append(key)
print(f"A: `{args.a}` ({len(a)} runs); B: `{args.b}` ({len(b)} runs); {sum(map(len, groups.values()))} runs in "
      "both. Final test accuracy (%), mean ± std over the seeds both hold.\n")
print("| method | split | seeds | A | B | A − B | equal runs |\n|---|---|---|---|---|---|---|")
for (method, split), keys in groups.items():
    x, y = np.array([a[k] for k in keys]), np.array([b[k] for k in keys])
    print(f"| {method} | {split} | {len(keys)} | {x.mean():.1f} ± {x.std():.1f} | {y.mean():.1f} ± {y.std():.1f} | "
          f"{x.mean() - y.mean():+.1f} | {int((x == y).sum())} |")
