"""A claim: a paper's number (a table's cell, or a sentence's ordering or effect), the rule that decides it, and
where afl's number comes from -- a committed result and the measure read from it, the command that computes it,
or why afl cannot (data or a model it does not have). :func:`status` turns a rule's judgement and the result's
scale into one of the board's statuses:

- **reproduced**: the rule holds on a result at the paper's scale, with at least :data:`MIN_SEEDS` seeds;
- **consistent at reduced scale**: the rule holds (or holds on the mean of one seed), but a field that sets the
  computation differs from the paper's (fewer seeds, fewer rounds, another dataset...): never counted as reproduced;
- **differs — explained**: the rule fails, and a committed probe (its own result, measure and rule) holds;
- **differs — open**: the rule fails, and nothing explains it (a probe that fails says how much of the gap it closes);
- **not run**: no committed result covers it (the command and its cost, or why afl cannot compute it).

An exact count (bytes, bits: :class:`afl.claims.rules.Exact`) is a function of the model and the message format,
not of seeds or scale: it is **equal** or **unequal**, and counted apart from the empirical claims.
"""
from __future__ import annotations

from dataclasses import dataclass

from .rules import FAILS, HOLDS, POINT, Exact

REPRODUCED, CONSISTENT = "reproduced", "consistent at reduced scale"
EXPLAINED, OPEN, NOT_RUN = "differs — explained", "differs — open", "not run"
STATUSES = (REPRODUCED, CONSISTENT, EXPLAINED, OPEN, NOT_RUN)
EQUAL, UNEQUAL = "equal", "unequal"
EXACT_STATUSES = (EQUAL, UNEQUAL, NOT_RUN)
#: the fewest seeds a result may have to call a claim reproduced
MIN_SEEDS = 3


@dataclass(frozen=True)
class Run:
    """What computes a claim's result: ``afl repro EXPERIMENT`` with ``seeds`` and the setting's fields
    ``overrides`` (pairs) into ``out``, or the GPU plan's entry ``queue``; ``reuse``: another experiment's result
    (a path under ``results/`` without ``.json``) that may hold some of its runs, computed alike (QAFeL's Table 2
    shares Table 1's FedBuff row)."""

    experiment: str
    overrides: tuple = ()
    seeds: int | None = None
    out: str = ""
    queue: str = ""
    reuse: str = ""

    @property
    def result(self) -> str:
        """The result the run writes into ``out``: a path under ``results/`` without ``.json``, as claims name it."""
        return f"{self.out.removeprefix('results/')}/{self.experiment}"


@dataclass(frozen=True)
class Probe:
    """A committed result that explains a difference: read with ``measure`` from ``result``, decided by ``rule``;
    ``why`` says in a sentence what it shows; ``earlier``: ``(result, measure)`` pairs read, in order, where
    ``result`` is not committed or does not cover it (as :attr:`Claim.earlier`); ``run``: what computes ``result``,
    where the plan of paper-scale runs should list it while the probe of an open claim is not run (:mod:`afl.plan`)."""

    result: str
    measure: object
    rule: object
    why: str
    earlier: tuple = ()
    run: Run | None = None


@dataclass(frozen=True)
class Claim:
    """One claim of a paper.

    ``source``: where the paper states it, in its own names (``Table 2 · FedAvg · IID split``); ``text``: the
    sentence; ``rule``: :mod:`afl.claims.rules`; ``measure``: how afl's number is read from ``result`` (a path under
    ``results/`` without ``.json``); ``run``: what computes that result; ``unsupported``: why afl cannot compute it
    (then no measure and no run); ``earlier``: ``(result, measure)`` pairs read, in order, where ``result`` is not
    committed or does not cover the claim (a reduced result that the paper-scale run's folder replaces); ``needs``:
    the other runs whose results ``result`` is merged from (a claim between rows run apart: the plan of paper-scale
    runs lists it under the first of ``run`` and ``needs`` not yet committed, :mod:`afl.plan`); ``data``:
    the datasets the paper used, by afl's names (a result on other data is on substitute data); ``unit``,
    ``digits``: how afl's number is printed, in the paper's unit; ``seeds``: the paper's runs behind it (None: its
    paper's usual count; 0: the paper does not say); ``quote``: the words of the paper that state it, where a
    sentence does (:meth:`stated`)."""

    id: str
    paper: str
    source: str
    text: str
    rule: object
    measure: object | None = None
    result: str = ""
    run: Run | None = None
    unsupported: str = ""
    probe: Probe | None = None
    earlier: tuple = ()
    needs: tuple = ()
    data: tuple = ()
    unit: str = ""
    digits: int = 1
    seeds: int | None = None
    quote: str = ""

    @classmethod
    def stated(cls, id: str, statement, text: str, rule, measure=None, result: str = "", run=None,
               **fields) -> "Claim":
        """A claim a sentence of the paper states (:class:`afl.claims.paper.Statement`): its paper, where it
        stands and its words come from the statement."""
        return cls(id, statement.paper, statement.source, text, rule, measure, result, run, quote=statement.quote,
                   **fields)

    def __post_init__(self):
        if not self.unsupported and (self.measure is None or not self.result or self.run is None):
            raise ValueError(f"claim {self.id}: a measure, a result and a run, or why afl cannot compute it")

    @property
    def exact(self) -> bool:
        return isinstance(self.rule, Exact)


def status(judgement: str, reduced: bool, seeds: int, probe: str | None = None, exact: bool = False) -> str:
    """A claim's status from its rule's ``judgement``, whether its result's setting is ``reduced`` (a field that
    sets the computation differs from the paper's, seeds included), afl's number of ``seeds`` (or pairs), and its
    probe's judgement (None: no probe); an ``exact`` count is :data:`EQUAL` or :data:`UNEQUAL`."""
    if exact:
        return EQUAL if judgement == HOLDS else UNEQUAL
    if judgement in (HOLDS, POINT):
        return REPRODUCED if judgement == HOLDS and not reduced and seeds >= MIN_SEEDS else CONSISTENT
    if judgement != FAILS:
        raise ValueError(f"judgement={judgement!r} is not one of {HOLDS!r}, {POINT!r}, {FAILS!r}")
    return EXPLAINED if probe == HOLDS else OPEN


__all__ = ["REPRODUCED", "CONSISTENT", "EXPLAINED", "OPEN", "NOT_RUN", "STATUSES", "EQUAL", "UNEQUAL", "EXACT_STATUSES",
           "MIN_SEEDS", "Run", "Probe", "Claim", "status"]
