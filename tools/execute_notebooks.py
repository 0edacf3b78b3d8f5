"""Execute the notebooks in place so that the committed .ipynb files show their outputs, then strip what
changes from run to run (execution timestamps, widget state, kernel versions). ``--check`` only checks that
every notebook is executed and clean; the test suite runs that check.

    python tools/execute_notebooks.py notebooks/*.ipynb          # make notebook-outputs
    python tools/execute_notebooks.py --check notebooks/*.ipynb
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

VOLATILE_CELL_KEYS = ("execution",)                       # nbclient's per-cell timestamps
VOLATILE_NB_KEYS = ("widgets",)                           # ipywidgets state: meaningless without a kernel


def clean(nb) -> None:
    for cell in nb.cells:
        for key in VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)
    for key in VOLATILE_NB_KEYS:
        nb.metadata.pop(key, None)
    nb.metadata.get("language_info", {}).pop("version", None)


def problems(nb) -> list[str]:
    """What is wrong with a committed notebook: unexecuted cells, out-of-order runs, errors, volatile metadata."""
    out, count = [], 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        count += 1
        if cell.execution_count != count:
            out.append(f"cell {i}: execution count {cell.execution_count}, expected {count} (run it top to bottom)")
        if any(o.get("output_type") == "error" for o in cell.outputs):
            out.append(f"cell {i}: an error output")
        if any(k in cell.metadata for k in VOLATILE_CELL_KEYS):
            out.append(f"cell {i}: execution timestamps in its metadata")
    out += [f"notebook metadata: {k}" for k in VOLATILE_NB_KEYS if k in nb.metadata]
    return out


def execute(path: Path, timeout: int) -> None:
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   record_timing=False).execute()
    clean(nb)
    nbformat.write(nb, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="+", type=Path)
    p.add_argument("--check", action="store_true", help="only check that the notebooks are executed and clean")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = p.parse_args(argv)
    bad = 0
    for path in args.notebooks:
        if not args.check:
            print(f"executing {path} ...", flush=True)
            execute(path, args.timeout)
        found = problems(nbformat.read(path, as_version=4))
        bad += bool(found)
        for msg in found:
            print(f"{path}: {msg}", file=sys.stderr)
    if bad:
        print(f"{bad} notebook(s) not executed or not clean: run `make notebook-outputs`", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
