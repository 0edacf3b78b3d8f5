"""The exercises through nbgrader, as a teacher grades them (tools/nbgrader_source.py).

One round trip over every exercise notebook: ``nbgrader generate_assignment`` writes, cell for cell, the exercise
notebook afl hands out; ``nbgrader autograde`` runs the solutions and the blanks (the released notebooks, as a
student receives them) and grades every check full marks for the solutions and zero for the blanks, the written
answers left to the teacher (a blank's counted zero). The blanks run top to bottom without an error, each check
saying "not done yet".
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "notebooks" / "exercises"
sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_source  # noqa: E402

ASSIGNMENTS = sorted(p.name.removesuffix("_sol.ipynb") for p in EXERCISES.glob("*_sol.ipynb"))


def nbgrader(course: Path, *args: str) -> None:
    """``nbgrader ARGS`` in ``course``, with this environment's programs first on the PATH (nbgrader runs
    ``alembic`` by name, and make calls the venv's Python without activating it)."""
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def text_of(cell) -> tuple[str, str]:
    """A code cell's standard output and error stream, as shown."""
    streams = {"stdout": "", "stderr": ""}
    for o in cell.outputs:
        if o.output_type == "stream":
            streams[o.name] += o.text
    return streams["stdout"], streams["stderr"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    nbgrader_source.write(course)
    nbgrader(course, "generate_assignment", "*")
    for name in ASSIGNMENTS:
        for student, source in (("solver", course / "source"), ("blank", course / "release")):
            dest = course / "submitted" / student / name
            dest.mkdir(parents=True)
            shutil.copy(source / name / f"{name}_ex.ipynb", dest)
    flaky = course / "submitted" / "flaky" / "03_qafel"               # right except when d % 7 == 3
    flaky.mkdir(parents=True)
    nb = nbformat.read(course / "source" / "03_qafel" / "03_qafel_ex.ipynb", as_version=4)
    for cell in nb.cells:
        if "def qsgd_bits(" in cell.source:
            cell.source = cell.source.replace("return bits * d + 32 * scales", "return bits * d + 32 * scales + "
                                              "(d % 7 == 3)")
    nbformat.write(nb, flaky / "03_qafel_ex.ipynb")
    nbgrader(course, "autograde", "*")
    return course


def scores_of(course: Path, name: str, student: str) -> dict:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(f"{name}_ex", name, student)
        return {g.name: (g.auto_score, g.max_score) for g in nb.grades}


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_student_version_is_the_exercise_notebook(graded, name):
    released = nbformat.read(graded / "release" / name / f"{name}_ex.ipynb", as_version=4)
    ours = nbformat.read(EXERCISES / f"{name}_ex.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in released.cells] == [(c.cell_type, c.source) for c in ours.cells]


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_autograde_gives_the_solution_full_marks_and_the_blank_zero(graded, name):
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        scores = {}
        for student in ("solver", "blank"):
            nb = gb.find_submission_notebook(f"{name}_ex", name, student)
            scores[student] = {g.name: (g.auto_score, g.max_score, g.needs_manual_grade) for g in nb.grades}
    checks = [g for g in scores["solver"] if g.startswith("check_")]
    answers = [g for g in scores["solver"] if g.startswith("answer-")]
    assert len(checks) >= 2 and answers and set(checks + answers) == set(scores["solver"])
    for g in checks:
        assert scores["solver"][g] == (nbgrader_source.CHECK_POINTS,) * 2 + (False,), g
        assert scores["blank"][g] == (0, nbgrader_source.CHECK_POINTS, False), g
    for g in answers:
        assert scores["solver"][g] == (None, nbgrader_source.ANSWER_POINTS, True), g     # the teacher reads it
        assert scores["blank"][g] == (0, nbgrader_source.ANSWER_POINTS, False), g        # left blank: zero


@pytest.mark.slow
def test_the_same_notebook_graded_twice_gets_the_same_points(graded):
    """An answer right on some cases only: its check's cases come from the assignment's seed, so a second autograde
    (as a regrade would) gives the same points."""
    first = scores_of(graded, "03_qafel", "flaky")
    assert "return bits * d + 32 * scales + (d % 7 == 3)" in (graded / "submitted/flaky/03_qafel/03_qafel_ex.ipynb"
                                                               ).read_text()
    nbgrader(graded, "autograde", "03_qafel", "--student", "flaky", "--force")
    assert scores_of(graded, "03_qafel", "flaky") == first


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_graded_notebooks_run_and_each_check_says_so(graded, name):
    """Both run without an error; the blank's checks say "not done yet" on the error stream, the solution's say
    "Correct" on the standard output."""
    for student, verdict in (("blank", "not done yet"), ("solver", "Correct")):
        nb = nbformat.read(graded / "autograded" / student / name / f"{name}_ex.ipynb", as_version=4)
        checks = 0
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            assert not any(o.output_type == "error" for o in cell.outputs), (student, cell.source)
            if nbgrader_source.CHECK_CALL.match(cell.source.strip()):
                checks += 1
                out, err = text_of(cell)
                assert verdict in (err if student == "blank" else out), (student, cell.source, out, err)
                assert not (out if student == "blank" else err), (student, cell.source, out, err)
        assert checks == (EXERCISES / f"{name}_sol.py").read_text().count("### BEGIN SOLUTION") >= 2


def test_the_course_folder_must_be_new_and_outside_notebooks(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "x").write_text("")
    with pytest.raises(ValueError, match="COURSE=.*new or empty"):
        nbgrader_source.write(tmp_path / "old")
    with pytest.raises(ValueError, match="outside notebooks"):
        nbgrader_source.write(EXERCISES / "course")


def test_cells_are_marked_as_nbgrader_reads_them():
    name, nb = nbgrader_source.assignment(EXERCISES / "03_qafel_sol.ipynb")
    marked = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata}
    assert name == "03_qafel"
    assert marked["qsgd"] == nbgrader_source.meta("qsgd", solution=True)
    assert marked["check_qsgd"]["grade"] and marked["check_qsgd"]["locked"] and not marked["check_qsgd"]["solution"]
    assert marked["answer-1"]["solution"] and marked["answer-1"]["grade"]
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "answer-1")
    assert answer.source.startswith("**Answer.**") and "**Rubric**" in answer.source     # model answer and rubric
    assert all(not c.get("outputs") for c in nb.cells)
    assert "(exercise)" in nb.cells[0].source.splitlines()[0]


def test_the_course_map_counts_each_assessment_right():
    """The six-week plan's "(N checks, M written answers)" are the graded cells nbgrader_source marks."""
    import re
    plan = (ROOT / "notebooks" / "README.md").read_text()
    for name in ASSIGNMENTS:
        _, nb = nbgrader_source.assignment(EXERCISES / f"{name}_sol.ipynb")
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        checks = sum(i.startswith("check_") for i in ids)
        answers = sum(i.startswith("answer-") for i in ids)
        said = re.search(rf"`exercises/{name}_ex` \((\d+) checks, (\d+) written answers\)", plan)
        assert said and (int(said[1]), int(said[2])) == (checks, answers), name
