"""Execute the notebooks in place so that the committed .ipynb files show their outputs, then strip what
changes from run to run (execution timestamps, widget state, kernel versions). ``--check`` only checks that
every notebook is executed and clean; the test suite runs that check.

Each execution's wall time, top to bottom with the default (quick) settings, is recorded in
``notebooks/run-times.json`` with the machine's cores; the course map's run-time table (between its
``run-times`` markers) is written from it, and ``--check`` fails when the table does not say what the file holds.

    python tools/execute_notebooks.py notebooks/*.ipynb          # make notebook-outputs
    python tools/execute_notebooks.py --check notebooks/*.ipynb
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import nbformat

VOLATILE_CELL_KEYS = ("execution",)                       # nbclient's per-cell timestamps
VOLATILE_NB_KEYS = ("widgets",)                           # ipywidgets state: meaningless without a kernel
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
TIMES = NOTEBOOKS / "run-times.json"
COURSE_MAP = NOTEBOOKS / "README.md"
MARKERS = ("<!-- run-times: written by tools/execute_notebooks.py -->", "<!-- end run-times -->")


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


def execute(path: Path, timeout: int) -> float:
    """Run ``path`` top to bottom in place; returns the wall seconds it took."""
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   record_timing=False).execute()
    seconds = time.perf_counter() - start
    clean(nb)
    nbformat.write(nb, path)
    return seconds


def record_time(path: Path, seconds: float) -> None:
    from afl.runtime import available_cores
    times = json.loads(TIMES.read_text()) if TIMES.is_file() else {}
    name = path.resolve().relative_to(NOTEBOOKS).as_posix()
    before = times.get(name, {})
    seen = [before.get("fastest", before.get("seconds")), before.get("slowest", before.get("seconds")), seconds]
    seen = [x for x in seen if x is not None]
    times[name] = {"seconds": round(seconds, 1), "fastest": round(min(seen), 1), "slowest": round(max(seen), 1),
                   "cores": available_cores(), "date": time.strftime("%Y-%m-%d")}
    TIMES.write_text(json.dumps(dict(sorted(times.items())), indent=1) + "\n")


def run_time_table() -> str:
    """The course map's table of measured run times, from notebooks/run-times.json: the fastest and slowest of the
    runs measured (a busy machine is slower), the latest run's cores and date."""
    times = json.loads(TIMES.read_text())
    rows = ["| notebook | runs top to bottom in (fastest–slowest measured) | latest run |", "|---|---|---|"]

    def text(s: float) -> str:
        return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"
    for name, t in times.items():
        low, high = t.get("fastest", t["seconds"]), t.get("slowest", t["seconds"])
        took = text(low) if text(low) == text(high) else f"{text(low)}–{text(high)}"
        rows.append(f"| `{name.removesuffix('.ipynb')}` | {took} | {t['cores']} cores, {t['date']} |")
    return "\n".join(rows) + "\n"


def course_map_text() -> str:
    """The course map with its run-time table rewritten from notebooks/run-times.json."""
    from afl.generated import between_markers
    return between_markers(COURSE_MAP.read_text(), *MARKERS, run_time_table(), f"{COURSE_MAP} has no run-time markers")


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
            seconds = execute(path, args.timeout)
            record_time(path, seconds)
            print(f"  {seconds:.0f} s", flush=True)
        found = problems(nbformat.read(path, as_version=4))
        bad += bool(found)
        for msg in found:
            print(f"{path}: {msg}", file=sys.stderr)
    if bad:
        print(f"{bad} notebook(s) not executed or not clean: run `make notebook-outputs`", file=sys.stderr)
    if args.check:
        if COURSE_MAP.read_text() != course_map_text():
            print(f"{COURSE_MAP}: its run-time table is not what {TIMES.name} holds: run `make notebook-outputs` "
                  "(or tools/execute_notebooks.py on one notebook)", file=sys.stderr)
            bad += 1
    else:
        COURSE_MAP.write_text(course_map_text())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
