"""The rules that decide a claim, one vocabulary for every paper, each tied to the paper's number and its
uncertainty (set here, before any result is read):

- :class:`Level` -- afl's number is the paper's: ``|afl − paper| ≤ max(2σ_paper, floor)``, the floor 1.5 points for
  an accuracy in % and 10 % of the paper's value for any other unit (afl's 95 % interval, which holds its mean,
  then overlaps that band);
- :class:`Effect` -- an ordering or an effect: afl's paired 95 % interval excludes the null (0 for a difference or
  a gain, 1 for a ratio) on the paper's side, and afl's effect is at least half the paper's where it gives one;
- :class:`Same` -- "no difference": afl's interval lies inside a stated margin (one-sided for "no gain");
- :class:`Range` -- every setting the paper's range covers falls in it, seed by seed;
- :class:`Exact` -- an exact count (bytes, bits): equal to the paper's printed digits, in every seed.

A rule's :meth:`judge` says :data:`HOLDS`, :data:`FAILS`, or :data:`POINT` where it holds on afl's mean but needs
an interval afl cannot give (one seed): such a claim is never called reproduced.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .measures import Measured
from .paper import Number

HOLDS, FAILS, POINT = "holds", "fails", "holds on the mean alone (one seed: no interval)"
#: a level's floor: an accuracy in % within 1.5 points; any other unit within this fraction of the paper's value
ACCURACY_FLOOR, RELATIVE_FLOOR = 1.5, 0.10
#: an effect holds where afl's is at least this share of the paper's
EFFECT_SHARE = 0.5


def _f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"


@dataclass(frozen=True)
class Level:
    """afl's number is the paper's ``number``, within ``max(2σ, floor)`` (:data:`ACCURACY_FLOOR`,
    :data:`RELATIVE_FLOOR`)."""

    number: Number

    @property
    def band(self) -> float:
        if self.number.value is None:
            raise ValueError(f"{self.number.where}: the paper prints no number here ({self.number.printed})")
        floor = ACCURACY_FLOOR if self.number.unit == "%" else RELATIVE_FLOOR * abs(self.number.value)
        return max(2 * (self.number.pm or 0.0), floor)

    def judge(self, m: Measured) -> str:
        return HOLDS if abs(m.value - self.number.value) <= self.band + 1e-12 else FAILS

    @property
    def paper(self) -> str:
        return self.number.shown()

    @property
    def text(self) -> str:
        if self.number.value is None:
            return "the paper's level (none printed)"
        floor = "1.5 points" if self.number.unit == "%" else "10 % of it"
        return f"within ±{_f(self.band)} of {_f(self.number.value, 4)} (2σ or {floor}, the larger)"


@dataclass(frozen=True)
class Effect:
    """An ordering or effect: afl's 95 % interval excludes ``null`` on the side of ``paper`` (the paper's effect
    in the measure's unit; None where the paper states a direction without a number, then ``side``), and afl's
    effect is at least :data:`EFFECT_SHARE` of the paper's. ``shown``: the paper's effect as the board prints it."""

    paper: float | None
    shown: str
    null: float = 0.0
    side: int = 1

    @property
    def direction(self) -> int:
        return self.side if self.paper is None else (1 if self.paper > self.null else -1)

    def judge(self, m: Measured) -> str:
        d = self.direction
        big = self.paper is None or d * (m.value - self.null) >= EFFECT_SHARE * abs(self.paper - self.null) - 1e-12
        if m.low is None:
            return POINT if d * (m.value - self.null) > 0 and big else FAILS
        clear = m.low > self.null if d > 0 else m.high < self.null
        return HOLDS if clear and big else FAILS

    @property
    def text(self) -> str:
        side = "above" if self.direction > 0 else "below"
        size = "" if self.paper is None else (
            f", at least half the paper's ({side} {_f(self.null + EFFECT_SHARE * (self.paper - self.null))})")
        return f"95 % interval {side} {_f(self.null)}{size}"


@dataclass(frozen=True)
class Same:
    """No difference: afl's 95 % interval inside ``null ± margin`` (``ratio``: inside [null / margin, null ×
    margin]); ``one_sided``: only its upper end counts ("no gain": at most ``null + margin``). ``why``: where the
    margin comes from."""

    margin: float
    shown: str
    null: float = 0.0
    ratio: bool = False
    one_sided: bool = False
    why: str = ""

    @property
    def bounds(self) -> tuple[float, float]:
        if self.ratio:
            return (-math.inf if self.one_sided else self.null / self.margin), self.null * self.margin
        return (-math.inf if self.one_sided else self.null - self.margin), self.null + self.margin

    def judge(self, m: Measured) -> str:
        lo, hi = self.bounds
        if m.low is None:
            return POINT if lo <= m.value <= hi else FAILS
        return HOLDS if lo <= m.low and m.high <= hi else FAILS

    @property
    def text(self) -> str:
        lo, hi = self.bounds
        where = f"at most {_f(hi)}" if self.one_sided else f"inside [{_f(lo)}, {_f(hi)}]"
        return f"95 % interval {where}" + (f" ({self.why})" if self.why else "")


@dataclass(frozen=True)
class Range:
    """Every value, setting by setting and seed by seed, in [``low``, ``high``] (None: unbounded)."""

    low: float | None
    high: float | None
    shown: str

    def judge(self, m: Measured) -> str:
        values = m.values or (m.value,)
        ok = all((self.low is None or v >= self.low - 1e-12) and (self.high is None or v <= self.high + 1e-12)
                 for v in values)
        return HOLDS if ok else FAILS

    @property
    def text(self) -> str:
        if self.high is None:
            return f"every seed of every setting at least {_f(self.low)}"
        if self.low is None:
            return f"every seed of every setting at most {_f(self.high)}"
        return f"every seed of every setting in [{_f(self.low)}, {_f(self.high)}]"


@dataclass(frozen=True)
class Exact:
    """An exact count: afl's number, in every seed, rounds to the paper's printed ``number`` (``digits`` after the
    point)."""

    number: Number
    digits: int

    def judge(self, m: Measured) -> str:
        values = m.values or (m.value,)
        return HOLDS if all(round(v, self.digits) == round(self.number.value, self.digits) for v in values) else FAILS

    @property
    def paper(self) -> str:
        return self.number.shown()

    @property
    def text(self) -> str:
        return f"equal to {self.number.value:.{self.digits}f} at {self.digits} decimals, every seed"


def paper_text(rule) -> str:
    """The paper's number as the board prints it beside afl's."""
    return rule.paper if isinstance(rule, (Level, Exact)) else rule.shown


__all__ = ["HOLDS", "FAILS", "POINT", "ACCURACY_FLOOR", "RELATIVE_FLOOR", "EFFECT_SHARE", "Level", "Effect", "Same",
           "Range", "Exact", "paper_text"]
