"""The papers' numbers as data, transcribed once: a table's cells (:class:`Table` of :class:`Number`) and the
sentences that state an ordering or an effect (:class:`Statement`), each with where the paper prints it.

A cell is written as the paper prints it: ``"47.3 ± 0.1"``, ``"117.128"``, ``"×"`` (the paper marks that the
method did not converge), ``"?"`` (the text copy of the paper lost the value) or ``"80.6 ± ?"`` (it lost the ±).
:func:`occurs` checks a transcription against the paper's text (``tests/test_claims.py`` runs it on every number).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

DIVERGED, ILLEGIBLE = "×", "?"


@dataclass(frozen=True)
class Number:
    """A number a paper prints: ``value`` ± ``pm`` (None where it prints none) over ``seeds`` runs, in ``unit``;
    ``source`` (table or section), ``row`` and ``column`` as the paper names them; ``printed`` as it prints it."""

    paper: str
    source: str
    row: str
    column: str
    value: float | None
    pm: float | None
    seeds: int | None
    unit: str
    printed: str

    @property
    def diverged(self) -> bool:
        return self.printed == DIVERGED

    @property
    def legible(self) -> bool:
        return self.value is not None or self.diverged

    @property
    def where(self) -> str:
        return " · ".join(p for p in (self.source, self.row, self.column) if p)

    def shown(self) -> str:
        """As the board prints it: ``47.3 ± 0.1 %``, ``× (did not converge)``, ``illegible in the text copy``."""
        if self.diverged:
            return "× (did not converge)"
        if self.value is None:
            return "illegible in the paper's text copy"
        shown = _digits(self.printed).replace("±", " ± ") + (" (± illegible)" if "± ?" in self.printed else "")
        return shown + (self.unit if self.unit == "×" else f" {self.unit}" if self.unit else "")


_CELL = re.compile(r"^(?P<value>\d+:\d\d|[-+]?\d[\d.]*)\s*(?:±\s*(?P<pm>\?|\d[\d.]*))?\s*(?P<mark>\*?)\s*"
                   r"(?P<unit>[A-Za-z×%]*)$")


def parse_cell(text: str) -> tuple[float | None, float | None, str]:
    """``"47.3 ± 0.1"`` -> (47.3, 0.1, ""); ``"1.417 TB"`` -> (1.417, None, "TB") (a unit printed in the cell);
    ``"02:05"`` (hh:mm) -> (125.0, None, ""); ``"94.8 ± 16.7*"`` (a footnote mark) -> (94.8, 16.7, "");
    ``"×"`` and ``"?"`` -> (None, None, "")."""
    text = text.strip()
    if text in (DIVERGED, ILLEGIBLE):
        return None, None, ""
    match = _CELL.match(text)
    if match is None:
        raise ValueError(f"cell {text!r}: a number, 'number ± number' (± ? where illegible), hh:mm, × or ?")
    value, pm = match["value"], match["pm"]
    if ":" in value:
        hours, minutes = value.split(":")
        number = 60.0 * int(hours) + int(minutes)
    else:
        number = float(value)
    return number, (None if pm in (None, ILLEGIBLE) else float(pm)), match["unit"]


def _digits(printed: str) -> str:
    """The part of a printed cell that the paper's text must hold: the value and its ±, without unit or mark."""
    match = _CELL.match(printed.strip())
    return match["value"] + (f"±{match['pm']}" if match["pm"] not in (None, ILLEGIBLE) else "")


class Table:
    """A table as the paper prints it: ``rows`` maps each row's name to its cells, ``" | "``-separated in the
    order of ``columns`` (see :func:`parse_cell`)."""

    def __init__(self, paper: str, source: str, columns: tuple, rows: dict, *, seeds: int | None, unit):
        self.paper, self.source, self.columns, self.seeds = paper, source, tuple(columns), seeds
        units = unit if isinstance(unit, tuple) else (unit,) * len(self.columns)
        self.cells: dict[tuple[str, str], Number] = {}
        for row, line in rows.items():
            printed = [c.strip() for c in line.split("|")]
            if len(printed) != len(self.columns):
                raise ValueError(f"{source}, row {row!r}: {len(printed)} cells for {len(self.columns)} columns")
            for column, cell, unit in zip(self.columns, printed, units):
                value, pm, own = parse_cell(cell)
                self.cells[row, column] = Number(paper, source, row, column, value, pm, seeds, own or unit, cell)

    @property
    def rows(self) -> tuple:
        return tuple(dict.fromkeys(r for r, _ in self.cells))

    def __getitem__(self, key: tuple[str, str]) -> Number:
        return self.cells[key]

    def __iter__(self):
        return iter(self.cells.values())


@dataclass(frozen=True)
class Statement:
    """A sentence of the paper stating an ordering or an effect: ``quote`` as printed (a few words of it), where
    (``source``), and the numbers it gives (``numbers``: the cells it rests on, or numbers of its own)."""

    paper: str
    source: str
    quote: str
    numbers: tuple = ()


def stated(paper: str, source: str, printed: str, unit: str, seeds: int | None = None, row: str = "",
           column: str = "") -> Number:
    """A number a sentence of the paper states (e.g. FedAST's "40.1 %"), as a :class:`Number`."""
    value, pm, own = parse_cell(printed)
    return Number(paper, source, row, column, value, pm, seeds, own or unit, printed)


_DROP = re.compile(r"\\(?:scriptstyle|overline|underline|textbf|mathbf|frac|color\{[a-z]+\}|left|right|mathrm)|"
                   r"<[^>]+>|[${}~*]|\\,|\\!|\\;|\^|_")


def normalized(text: str) -> str:
    """The paper's text with LaTeX and markup dropped and ``\\pm`` as ±, without whitespace: what :func:`occurs`
    searches (tables come out of the PDF with their cells broken over markup)."""
    text = text.replace("\\pm", "±").replace("\\%", "%").replace("\\times", "×").replace("−", "-")
    return re.sub(r"\s+", "", _DROP.sub("", text))


def occurs(number: Number, text: str) -> bool:
    """Whether ``number`` stands in the paper's ``text`` (:func:`normalized` both): its value with its ± right
    after it, or its value alone where its ± is illegible. A ``×`` or ``?`` cell has nothing to find."""
    if number.value is None:
        return True
    return _digits(number.printed) in normalized(text)


#: the text copies carry the PDF's line numbers inside sentences ("is crucial to enable 459 momentum")
_LINE_NUMBER = re.compile(r"(?<=\s)\d{3,4}(?=\s)")


def quoted(statement: Statement, text: str) -> bool:
    """Whether a statement's quote stands in the paper's text (whitespace, markup and the copy's line numbers
    aside)."""
    def plain(s: str) -> str:
        return normalized(_LINE_NUMBER.sub(" ", s))
    return plain(statement.quote) in plain(text)


__all__ = ["Number", "Table", "Statement", "stated", "parse_cell", "normalized", "occurs", "quoted", "DIVERGED",
           "ILLEGIBLE"]
