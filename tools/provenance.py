"""Write results/provenance.json: for every committed result, the afl commit that computed it and the changes of
meaning (afl.repro.changes.CHANGES) it predates.

A result that records its commit (``afl_commit``, written by ``afl repro`` since) is taken at its word. An older one
is dated by git: the last commit that changed its content (renames followed), so it was computed with afl at or
before that commit. A change predates nothing whose commit already contains it.

    python tools/provenance.py            # write results/provenance.json
    python tools/provenance.py --check    # exit 1 if it is stale (needs the git history)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.repro.changes import CHANGES  # noqa: E402

OUT = ROOT / "results" / "provenance.json"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def content_commit(path: str) -> tuple[str, str]:
    """The last commit that changed ``path``'s content (a pure rename does not), and its date."""
    head = None
    for line in git("log", "--follow", "--name-status", "--format=C %H %cs", "--", path).splitlines():
        if line.startswith("C "):
            head = line.split()[1:3]
        elif line and line[0] in "AMR" and not line.startswith("R100"):
            return head[0], head[1]
    raise SystemExit(f"{path}: not committed")


def contains(commit: str, change: str) -> bool:
    """Whether ``commit`` has ``change`` among its ancestors (or is it)."""
    return subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", change, commit]).returncode == 0


def entry(path: str) -> dict:
    data = json.loads((ROOT / path).read_text())
    recorded = data.get("afl_commit") or {}
    if recorded.get("commit"):
        commit, date, how = recorded["commit"], recorded.get("date", ""), "recorded"
    else:
        (commit, date), how = content_commit(path), "committed"
    predates = [c.id for c in CHANGES if data.get("experiment") in c.experiments
                and c.applies(data.get("config", {})) and not contains(commit, c.commit)]
    return {"commit": commit, "date": date, "how": how, "predates": predates}


def build() -> dict:
    paths = [p for p in git("ls-files", "results/*.json").split() if p != "results/provenance.json"]
    return {p: entry(p) for p in paths if "experiment" in json.loads((ROOT / p).read_text())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = json.dumps(build(), indent=1) + "\n"
    if args.check:
        stale = not OUT.is_file() or OUT.read_text() != text
        if stale:
            print("results/provenance.json is stale: run python tools/provenance.py", file=sys.stderr)
        return int(stale)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
