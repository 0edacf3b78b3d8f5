"""A verdict, and a class's verdicts collected: every check can append its verdict as one JSON line to a file, and
``afl verdicts`` tabulates such files, one row per student and one column per exercise.

A teacher turns recording on for every student, without touching the notebooks, by setting ``AFL_VERDICTS`` in
the kernels' environment (on a JupyterHub: ``c.Spawner.environment = {"AFL_VERDICTS":
"/home/{username}/afl-verdicts.jsonl"}``), then collects the files. A line reads::

    {"exercise": "check_qsgd", "status": "correct", "passed": true, "user": "ada", "cases": 1234567,
     "time": "2026-11-26T21:40:03Z"}

``user`` is ``$AFL_STUDENT``, else ``$JUPYTERHUB_USER``, else the login name; ``cases`` the seed the check's cases
were drawn from (:func:`afl.exercises.checking.case_seed`). Nothing is recorded where ``AFL_VERDICTS`` is unset.
For marks, the nbgrader route (``tools/nbgrader_source.py``) grades the same checks.
"""
from __future__ import annotations

import getpass
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

NOT_DONE, ERROR, WRONG, CORRECT = "not done", "error", "wrong", "correct"


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check: ``status`` (``"not done"``, ``"error"``, ``"wrong"`` or ``"correct"``), the
    ``message`` that explains it (also the verdict's text in a notebook) and the ``seed`` its cases came from."""

    exercise: str
    status: str
    message: str
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__

    def _ipython_display_(self) -> None:
        """The message on stdout when correct, on stderr otherwise (what nbgrader reads as a failed test)."""
        print(self.message, file=sys.stdout if self.passed else sys.stderr)


ENV = "AFL_VERDICTS"
#: a student's standing on an exercise is their best attempt: correct over wrong over error over not done
RANK = {NOT_DONE: 0, ERROR: 1, WRONG: 2, CORRECT: 3}


def student() -> str:
    return os.environ.get("AFL_STUDENT") or os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def record(verdict: Verdict, path: str | os.PathLike | None = None) -> Path | None:
    """Append ``verdict`` as one JSON line to ``path`` (default: the file ``$AFL_VERDICTS`` names); returns the
    file, or None when neither is given."""
    path = path or os.environ.get(ENV)
    if not path:
        return None
    line = {"exercise": verdict.exercise, "status": verdict.status, "passed": verdict.passed, "user": student(),
            "cases": verdict.seed, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    return path


def read(paths: Iterable[str | os.PathLike]) -> list[dict]:
    """Every verdict line of ``paths``; a line that is not a verdict is an error naming the file and line."""
    lines = []
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"FILE={str(path)!r} is not a file; expected a verdict file (JSON lines) that "
                             f"${ENV} pointed to")
        try:
            texts = Path(path).read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise ValueError(f"FILE={str(path)!r} is not text; expected a verdict file (JSON lines) that ${ENV} "
                             "pointed to") from None
        for number, text in enumerate(texts, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                ok = isinstance(line, dict) and all(isinstance(line.get(k), str) for k in ("exercise", "user",
                                                                                           "status"))
                ok = ok and line["status"] in RANK
            except json.JSONDecodeError:
                ok = False
            if not ok:
                raise ValueError(f"{path}:{number} is not a verdict line; expected JSON with exercise, status "
                                 f"({', '.join(RANK)}) and user, as afl.exercises.verdicts.record writes")
            lines.append(line)
    return lines


def tally(lines: Iterable[dict]) -> dict[str, dict[str, tuple[str, int]]]:
    """``{user: {exercise: (best status, attempts)}}``."""
    table: dict[str, dict[str, tuple[str, int]]] = {}
    for line in lines:
        row = table.setdefault(line["user"], {})
        best, attempts = row.get(line["exercise"], (NOT_DONE, 0))
        if RANK[line["status"]] > RANK[best]:
            best = line["status"]
        row[line["exercise"]] = (best, attempts + 1)
    return table


def markdown(table: dict[str, dict[str, tuple[str, int]]]) -> str:
    """The tally as a markdown table: each cell the best status and the number of checks run, a last column the
    exercises passed."""
    exercises = sorted({e for row in table.values() for e in row})
    head = "| student | " + " | ".join(exercises) + " | passed |"
    rows = [head, "|" + "---|" * (len(exercises) + 2)]
    for user in sorted(table):
        row = table[user]
        cells = [f"{row[e][0]} ({row[e][1]})" if e in row else "—" for e in exercises]
        passed = sum(1 for e in exercises if e in row and row[e][0] == CORRECT)
        rows.append(f"| {user} | " + " | ".join(cells) + f" | {passed}/{len(exercises)} |")
    return "\n".join(rows) + "\n"


__all__ = ["Verdict", "NOT_DONE", "ERROR", "WRONG", "CORRECT", "RANK", "ENV", "student", "record", "read", "tally",
           "markdown"]
