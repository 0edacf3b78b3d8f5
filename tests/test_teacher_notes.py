"""The teacher notes (tools/teacher_notes.py): written from the notebooks, the solution notebooks, the quizzes and
the committed results, and committed as written; each week's page holds every written answer of its assessment."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import teacher_notes  # noqa: E402


def test_the_committed_notes_are_what_the_tool_writes():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "teacher_notes.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_each_week_has_its_plan_outline_model_answers_and_quiz_key():
    _, weeks = teacher_notes.course_map()
    assert [w for w, _, _ in weeks] == [1, 2, 3, 4, 5, 6]
    for week, work, assessment in weeks:
        page = (ROOT / "docs" / "teaching" / f"week-{week}.md").read_text()
        assert "## Class plan (minutes)" in page and "## Board outline" in page and "Answer key" not in page[:50]
        said = re.search(r"\((\d+) checks, (\d+) written answers\)", assessment)
        if said:
            assert page.count("**Model answer.**") == int(said[2]), week
            assert "**Rubric**" in page
        assert "## Knowledge check of" in page and "## Regrades" in page


def test_the_project_page_prices_claims_from_measured_results():
    page = (ROOT / "docs" / "teaching" / "project.md").read_text()
    rows = re.findall(r"^\| (\w+) \| `([^`]+)` \| [^|]+ \| `afl repro [^`]+` \| (\d+\.\d) \|$", page, re.M)
    assert len(rows) >= 10 and all(float(m) > 0 for _, _, m in rows)
