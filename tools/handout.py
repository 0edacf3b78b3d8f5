"""Write a class's hand-out: the exercise notebooks and what they need, without the answer key.

    python tools/handout.py DIR                                  # make handout HANDOUT=DIR
    python tools/handout.py DIR --wheels WHEELS --data mnist     # one that installs and runs offline

DIR receives every ``notebooks/exercises/*_ex.ipynb`` with its outputs cleared, and a README for students (the
order, how to install afl -- PyTorch's CPU build first --, where the data comes from, how the checks answer); with
``--wheels`` and ``--data``, the wheels and the datasets packed by ``afl data pack``, and the README's offline
steps. Nothing of a solution notebook is
written: the hand-out is checked for solution markers and filled answers before the command ends, and DIR must be
a new or empty folder outside ``notebooks/``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from afl.data import packing  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "notebooks" / "exercises"
#: text that only a solution notebook holds (tools/make_exercises.py removes it from the exercise twin)
ANSWER_KEY = ("BEGIN SOLUTION", "END SOLUTION", "(solution)")

README = """# Exercises: asynchronous and heterogeneous federated learning

Work through the notebooks in order; each takes 30–50 minutes.

{listing}

**Set up on a laptop (no GPU needed).** In the environment your notebooks use, install PyTorch's light CPU build
first, then afl from the wheel your teacher gives you:

    pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu
    pip install afl-*.whl

The notebooks train on MNIST: `afl data download mnist` fetches it and checks its MD5 sums.{offline}

**How an exercise works.** Each marked cell holds a function whose body is `raise NotImplementedError`: replace it
with your code, run the cell, then run the check below it. The check runs your function on the exercise's cases
(its boundaries, then random ones fixed for the assignment) and answers in words: *not done yet*, the error your
function raised, *not yet right* (the case, what was expected, what came back, and a hint: first where to look,
after a few tries the formula), or *correct*. It wants your own code: an answer that uses afl's implementation of
the same thing is refused. Cells after an unfinished exercise still run, with afl's answer, and say so. Questions
marked **Predict** or **Derive** are answered in the cell below them, in words; your teacher reads them.
"""


def new_folder(dest: Path, name: str) -> Path:
    """``dest`` resolved and created: a new or empty folder outside ``notebooks/`` (the answer key lives there),
    else a ValueError naming the make variable ``name``."""
    dest = Path(dest).resolve()
    if dest == REPO / "notebooks" or (REPO / "notebooks") in dest.parents:
        raise ValueError(f"{name}={dest} is not allowed; expected a folder outside notebooks/ (the answer key "
                         "lives there)")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{name}={dest} is not allowed; expected a folder (it is a file)")
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"{name}={dest} is not allowed; expected a new or empty folder (it holds files)")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


OFFLINE = """

**Offline (no internet in the room).** This folder holds what you need: `wheels/` (afl and its dependencies, as
your teacher downloaded them) and `data/` (the datasets, compressed and checksummed). Install and unpack with

    pip install --no-index --find-links wheels afl
    afl data unpack data --to ~/afl-data

then start Jupyter with `AFL_DATA=~/afl-data` set (`export AFL_DATA=~/afl-data`; on Windows `set AFL_DATA=...`)."""


def handout(dest: Path, wheels: Path | None = None, datasets=()) -> list[Path]:
    """Write the hand-out into ``dest`` (new or empty, outside notebooks/); with ``wheels`` (a folder of wheels:
    afl's from ``make wheel`` and its dependencies', e.g. from ``pip download``) and ``datasets`` (packed by
    ``afl data pack``), a hand-out that installs and runs offline. Returns the files written."""
    dest = new_folder(dest, "HANDOUT")
    if wheels is not None:
        found = sorted(Path(wheels).glob("*.whl")) if Path(wheels).is_dir() else []
        if not any(w.name.startswith("afl-") for w in found):
            raise ValueError(f"WHEELS={wheels} is not allowed; expected a folder of wheels holding afl's (make "
                             "wheel) and its dependencies' (pip download)")
    written, listing = [], []
    for source in sorted(EXERCISES.glob("*_ex.ipynb")):
        nb = nbformat.read(source, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        text = nbformat.writes(nb)
        leaked = [marker for marker in ANSWER_KEY if marker in text]
        if leaked:
            raise ValueError(f"{source.name} holds {leaked}: run `make sync-notebooks` (tools/make_exercises.py "
                             "writes the exercise notebooks from their solutions)")
        (dest / source.name).write_text(text)
        written.append(dest / source.name)
        title = next(line for line in nb.cells[0].source.splitlines() if line.startswith("#")).lstrip("# ")
        listing.append(f"1. `{source.name}`: {title}")
    offline = bool(wheels is not None and datasets)
    if wheels is not None:
        (dest / "wheels").mkdir()
        for wheel in sorted(Path(wheels).glob("*.whl")):
            shutil.copy(wheel, dest / "wheels" / wheel.name)
            written.append(dest / "wheels" / wheel.name)
    if datasets:
        written += packing.pack(datasets, dest / "data")
    (dest / "README.md").write_text(README.format(listing="\n".join(listing), offline=OFFLINE if offline else ""))
    return written + [dest / "README.md"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dest", metavar="DIR", help="where the hand-out goes (a new or empty folder)")
    p.add_argument("--wheels", default=None, help="a folder of wheels to include (afl's and its dependencies')")
    p.add_argument("--data", nargs="*", default=[], metavar="NAME", help="datasets to include, packed (e.g. mnist)")
    args = p.parse_args(argv)
    try:
        files = handout(Path(args.dest), Path(args.wheels) if args.wheels else None, args.data)
    except ValueError as err:
        print(f"handout: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(files)} files to {args.dest}: " + ", ".join(f.name for f in files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
