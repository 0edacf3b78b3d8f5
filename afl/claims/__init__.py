"""The claim vocabulary: the papers' numbers as data, what afl reads from a result, the rules that decide, and the
statuses. It knows no experiment; each paper's module in :mod:`afl.repro` binds the paper's cells to its results,
and :mod:`afl.scoreboard` writes the board."""
from .claim import (CONSISTENT, EQUAL, EXACT_STATUSES, EXPLAINED, MIN_SEEDS, NOT_RUN, OPEN, REPRODUCED, STATUSES,
                    UNEQUAL, Claim, Probe, Run, status)
from .measures import (Best, Constant, Elsewhere, GeoMean, Largest, Last, Mean, Measured, Minus, Over, Plus, Pooled,
                       Runs, Saved, Series, Times, Tuned)
from .paper import DIVERGED, ILLEGIBLE, Number, Statement, Table, normalized, occurs, quoted, stated
from .reading import BadResult, NotCovered, Result, exists, inside, key_text, load
from .rules import FAILS, HOLDS, POINT, Effect, Exact, Level, Range, Same, paper_text

__all__ = ["Claim", "Probe", "Run", "status", "STATUSES", "EQUAL", "UNEQUAL", "EXACT_STATUSES", "REPRODUCED",
           "CONSISTENT", "EXPLAINED", "OPEN", "NOT_RUN", "MIN_SEEDS", "Runs", "Elsewhere", "Last", "Plus", "Minus",
           "Times", "Over", "Saved", "Tuned", "Mean", "GeoMean", "Pooled", "Largest", "Best", "Constant", "Measured",
           "Series", "Number", "Table", "Statement", "stated", "normalized", "occurs", "quoted", "DIVERGED",
           "ILLEGIBLE", "BadResult", "NotCovered", "Result", "load", "inside", "exists", "key_text", "Level", "Effect",
           "Same", "Range", "Exact", "HOLDS", "FAILS", "POINT", "paper_text"]
