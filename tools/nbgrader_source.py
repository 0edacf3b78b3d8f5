"""Write an nbgrader course from the solution notebooks, so that a teacher grades the exercises with nbgrader.

    python tools/nbgrader_source.py COURSE       # make nbgrader COURSE=DIR
    . .venv/bin/activate                         # nbgrader runs `alembic` from the PATH
    cd COURSE && nbgrader generate_assignment 00_simulator     # release/00_simulator/00_simulator_ex.ipynb
    # students' notebooks in submitted/<student>/00_simulator/, then
    nbgrader autograde 00_simulator

COURSE receives ``nbgrader_config.py`` and one assignment per solution notebook,
``source/NN_topic/NN_topic_ex.ipynb``: the solution notebook (outputs cleared, titled as the exercise) with
nbgrader's cell metadata added to what ``tools/make_exercises.py`` already marks:

* a cell holding ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` is an *autograded answer* (its ``grade_id`` the
  function it defines);
* a check cell, ``check_name(function)``, is an *autograder test* worth :data:`CHECK_POINTS`, locked: a check
  shows a verdict that is not correct on the error stream, which nbgrader counts as a failed test;
* an **Answer.** cell is a *manually graded answer* worth :data:`ANSWER_POINTS`.

The configuration makes nbgrader's blanks afl's (``raise NotImplementedError``, the "Your answer" line), so the
student version ``generate_assignment`` writes is, cell for cell, the exercise notebook ``make handout`` gives out
(``tests/test_nbgrader.py`` checks it, and that ``autograde`` gives the solutions full marks and the blanks zero).
COURSE must be a new or empty folder outside ``notebooks/``.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handout  # noqa: E402
import teacher_notes  # noqa: E402
import make_exercises  # noqa: E402

EXERCISES = Path(__file__).resolve().parent.parent / "notebooks" / "exercises"
CHECK_CALL = re.compile(r"^(check_\w+)\((\w+)\)\s*$")
DEFINES = re.compile(r"^def (\w+)\(", re.M)
CHECK_POINTS, ANSWER_POINTS = 2, 1
CELL_TIMEOUT_S = 600                    # nbgrader's default, 30 s, is shorter than some cells on two cores

CONFIG = f'''# nbgrader configuration for the afl exercises (written by tools/nbgrader_source.py)
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "afl"
c.ClearSolutions.code_stub = {{"python": "raise NotImplementedError"}}
c.ClearSolutions.text_stub = {make_exercises.BLANK_ANSWER.removeprefix("# ")!r}
c.Execute.timeout = {CELL_TIMEOUT_S}
'''


def meta(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
         points: float = 0) -> dict:
    out = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
           "task": False}
    if grade:
        out["points"] = points
    return out


def assignment(sol: Path):
    """The nbgrader source notebook of one solution notebook, and its assignment name."""
    nb = nbformat.read(sol, as_version=4)
    answers = 0
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
        text = cell.source
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            check = CHECK_CALL.match(text.strip())
            if make_exercises.BEGIN in text:
                names = DEFINES.findall(text)
                if not names:
                    raise SystemExit(f"{sol.name}: a solution cell that defines no function:\n{text}")
                cell.metadata["nbgrader"] = meta(names[0], solution=True)
            elif check:
                cell.metadata["nbgrader"] = meta(check.group(1), grade=True, locked=True, points=CHECK_POINTS)
        elif text.startswith(make_exercises.ANSWER.removeprefix("# ")):
            answers += 1
            cell.metadata["nbgrader"] = meta(f"answer-{answers}", solution=True, grade=True, points=ANSWER_POINTS)
            cell.source = f"{text}\n\n{teacher_notes.RUBRIC}"       # the source version only: the release clears it
    nb.cells[0].source = make_exercises.retitle(nb.cells[0].source, sol.name)
    return sol.name.removesuffix("_sol.ipynb"), nb


def write(course: Path) -> list[Path]:
    """Write the course into ``course`` (new or empty, outside notebooks/); returns the files written."""
    course = handout.new_folder(course, "COURSE")
    written = [course / "nbgrader_config.py"]
    written[0].write_text(CONFIG)
    for sol in sorted(EXERCISES.glob("*_sol.ipynb")):
        name, nb = assignment(sol)
        path = course / "source" / name / f"{name}_ex.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        written.append(path)
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("course", type=Path, help="the course folder to write (new or empty)")
    args = p.parse_args(argv)
    try:
        files = write(args.course)
    except ValueError as err:
        print(f"nbgrader_source: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(files)} files to {args.course}: in an environment with afl and nbgrader (`. .venv/bin/activate`: "
          f"nbgrader runs `alembic` from the PATH), cd there, then `nbgrader generate_assignment NAME` for each of "
          f"{', '.join(f.parent.name for f in files[1:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
