"""Sections of a hand-written markdown file that a command writes: the text between two HTML-comment markers
(the README's scoreboard lines, the course map's run-time and notation tables)."""
from __future__ import annotations


def between_markers(text: str, begin: str, end: str, body: str, where: str) -> str:
    """``text`` with ``body`` (lines ending in a newline) as all that stands between ``begin`` and ``end``; a
    ValueError naming ``where`` (e.g. "README.md has no scoreboard markers") when either marker is missing."""
    if begin not in text or end not in text:
        raise ValueError(f"{where} ({begin} … {end})")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{body}{end}{rest.split(end, 1)[1]}"
