"""Write every exercise notebook from its solution twin, so that the two never drift apart.

A solution notebook ``notebooks/exercises/NN_topic_sol.py`` (a jupytext percent script) marks what the student
writes; its exercise twin ``NN_topic_ex.py`` is the same script with

* the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` replaced by ``raise NotImplementedError`` (at
  the marker's indentation; solutions are always function bodies, so the blank fails only when it is called, and
  the checks say "not done yet");
* every answer (a markdown cell of its own that starts with ``**Answer.**``) replaced by an empty answer for the
  student;
* ``(solution)`` in the title and the ``*Solution notebook`` line turned into their exercise versions.

These are nbgrader's conventions too (``tools/nbgrader_source.py`` marks the same cells for ``nbgrader
generate_assignment``, whose student version is this exercise notebook).

    python tools/make_exercises.py            # write the *_ex.py (make sync-notebooks, which then pairs the .ipynb)
    python tools/make_exercises.py --check    # exit 1 if an *_ex.py is not what its solution gives (make test)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

EXERCISES = Path(__file__).resolve().parent.parent / "notebooks" / "exercises"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
ANSWER = "# **Answer.**"
BLANK_ANSWER = "# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*"
NEW_PART = re.compile(r"^# (#+ |\*\*Predict)")       # a heading or a prompt: never inside an answer's cell
SOLUTION_LINE = re.compile(r"^(# )?\*Solution notebook\b.*$", re.M)    # in the script or in the notebook
EXERCISE_LINE = ("*Exercise notebook: write your answers in the marked cells; `{sol}` has worked answers "
                 "(try first).*")


def blank(text: str, sol_name: str) -> str:
    """The exercise version of a solution script's text."""
    out, skipping, in_answer = [], False, False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("# %%"):
            in_answer = False
        if in_answer:
            if NEW_PART.match(line):
                raise SystemExit(f"{sol_name}:{number}: a heading or prompt inside an answer's cell; start a new "
                                 "markdown cell (# %% [markdown]) before it: an answer is a cell of its own")
            if stripped:
                continue
        if stripped == BEGIN:
            skipping = True
            out.append(line[:len(line) - len(line.lstrip())] + "raise NotImplementedError")
            continue
        if stripped == END:
            skipping = False
            continue
        if skipping:
            continue
        if line.startswith(ANSWER):
            if out[-1] != "# %% [markdown]":
                raise SystemExit(f"{sol_name}:{number}: an answer must start its own markdown cell")
            out.append(BLANK_ANSWER)
            in_answer = True
            continue
        out.append(line)
    if skipping:
        raise SystemExit(f"{sol_name}: {BEGIN} without {END}")
    return retitle("\n".join(out) + "\n", sol_name.replace(".py", ".ipynb"))


def retitle(text: str, sol_notebook: str) -> str:
    """The solution's title and notice line (in a script or a notebook's markdown) as the exercise's."""
    text = text.replace("(solution)", "(exercise)", 1)
    return SOLUTION_LINE.sub(lambda m: (m.group(1) or "") + EXERCISE_LINE.format(sol=sol_notebook), text, count=1)


def pairs():
    for sol in sorted(EXERCISES.glob("*_sol.py")):
        yield sol, sol.with_name(sol.name.replace("_sol.py", "_ex.py"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check that the exercise scripts are up to date")
    args = p.parse_args(argv)
    stale = []
    for sol, ex in pairs():
        want = blank(sol.read_text(), sol.name)
        if args.check:
            if not ex.exists() or ex.read_text() != want:
                stale.append(ex)
            continue
        if not ex.exists() or ex.read_text() != want:
            ex.write_text(want)
    for ex in stale:
        print(f"{ex} is not what its solution gives: run `make sync-notebooks`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
