"""What a claim reads from a result: one number per seed (:class:`Runs`), combined seed by seed (:class:`Plus`,
:class:`Minus`, :class:`Times`, :class:`Over`, :class:`Saved`; :class:`Tuned` picks a tuned baseline), then
summarized with its 95 % interval (:class:`Mean`, :class:`GeoMean`, :class:`Pooled`, :class:`Largest`,
:class:`Best`, :class:`Constant`).

A run whose value is null never reached its target within the budget: it counts *at* the budget (the result's
``total_time`` or ``max_uploads``) and is counted as censored, never dropped. Two series are paired on the seeds
both hold; a seed one side lacks is named in the measure's note, never left out without a word.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ..stats import t_quantile
from .reading import BadResult, NotCovered, Result, key_text

LEVEL = 0.95      # every interval of the board


@dataclass(frozen=True)
class Series:
    """One value per seed: ``seeds`` (ids), ``values`` and ``censored`` (counted at the budget), a ``note``."""

    seeds: tuple
    values: tuple
    censored: tuple
    note: str = ""


@dataclass(frozen=True)
class Measured:
    """afl's number: ``value`` with its 95 % interval (``low``, ``high``; None with fewer than two seeds), over
    ``n`` seeds (or pairs), ``censored`` of them counted at the budget; ``values`` seed by seed (a range claim
    judges each), ``note`` what the reader must know (seeds paired, censored)."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int = 1
    censored: int = 0
    values: tuple = ()
    note: str = ""


def _where_text(where) -> str:
    return ", ".join(f"{k}={v}" for k, v in where)


@dataclass(frozen=True)
class Runs:
    """The result's runs whose fields equal ``where`` (pairs), one per seed: the number at ``field`` (a key path in
    the run; ``"*"`` averages over a list's items) times ``scale``. A null value never reached: it counts as the
    result's ``budget`` (a key path; over the one at ``budget_over`` where given, e.g. uploads over the buffer for
    broadcasts) times ``scale``, censored."""

    where: tuple
    field: tuple
    scale: float = 1.0
    budget: tuple | None = None
    budget_over: tuple | None = None

    def series(self, result: Result) -> Series:
        runs = result.at(("runs",))
        if not isinstance(runs, list):
            raise BadResult(result.file, "runs", "a list of runs")
        chosen = [(i, r) for i, r in enumerate(runs) if isinstance(r, dict)
                  and all(r.get(k) == v for k, v in self.where)]
        if not chosen:
            raise NotCovered(result.file, f"runs with {_where_text(self.where)}")
        seeds, values, censored = [], [], []
        for i, run in chosen:
            seed = run.get("seed")
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise BadResult(result.file, f"runs[{i}]›seed", f"an integer seed, not {seed!r}")
            if seed in seeds:
                raise BadResult(result.file, f"runs[{i}]",
                                f"a second run of seed {seed} with {_where_text(self.where)}")
            value = self._value(Result(run, result.file), f"runs[{i}]")
            seeds.append(seed)
            if value is None:
                if self.budget is None:
                    raise BadResult(result.file, f"runs[{i}]›{key_text(self.field)}", "a number, not null")
                budget = result.number(self.budget)
                if self.budget_over is not None:
                    budget /= result.number(self.budget_over, positive=True)
                values.append(budget * self.scale)
                censored.append(True)
            else:
                values.append(value * self.scale)
                censored.append(False)
        order = np.argsort(seeds, kind="stable")
        return Series(tuple(seeds[k] for k in order), tuple(values[k] for k in order),
                      tuple(censored[k] for k in order))

    def _value(self, run: Result, at: str):
        if "*" not in self.field:
            node = run.at(self.field)
            return None if node is None else run.check_number(node, f"{at}›{key_text(self.field)}")
        cut = self.field.index("*")
        items = run.at(self.field[:cut])
        if not isinstance(items, (list, dict)) or not items:
            raise BadResult(run.file, f"{at}›{key_text(self.field[:cut])}", "a non-empty list or mapping")
        found = []
        for k, item in (items.items() if isinstance(items, dict) else enumerate(items)):
            value = Result(item, run.file).at(self.field[cut + 1:]) if self.field[cut + 1:] else item
            if value is None:
                return None
            found.append(run.check_number(value, f"{at}›{key_text(self.field[:cut])}[{k}]"))
        return sum(found) / len(found)

    @property
    def text(self) -> str:
        return f"runs with {_where_text(self.where)}: {key_text(self.field)}" + (
            f" × {self.scale:g}" if self.scale != 1 else "")


@dataclass(frozen=True)
class Elsewhere:
    """The series ``part`` read from another committed result, ``result`` (a path under ``results/`` without
    ``.json``): a claim that compares two results pairs them by seed."""

    result: str
    part: object

    def series(self, result: Result) -> Series:
        return self.part.series(result.other(self.result))

    @property
    def text(self) -> str:
        return f"{self.part.text} in results/{self.result}.json"


@dataclass(frozen=True)
class Last:
    """The last number of the list at ``path`` (a deterministic curve, e.g. a loss over rounds), as a one-seed
    series (the result's ``config›seed``, else 0)."""

    path: tuple

    def series(self, result: Result) -> Series:
        values = result.numbers(self.path)
        seed = result.data.get("config", {}).get("seed", 0) if isinstance(result.data.get("config"), dict) else 0
        return Series((seed,), (values[-1],), (False,))

    @property
    def text(self) -> str:
        return f"the last value of {key_text(self.path)}"


@dataclass(frozen=True)
class _Paired:
    """``a`` and ``b`` (series) combined seed by seed, on the seeds both hold."""

    a: object
    b: object
    symbol: ClassVar[str] = ""

    def series(self, result: Result) -> Series:
        a, b = self.a.series(result), self.b.series(result)
        common = [s for s in a.seeds if s in set(b.seeds)]
        if not common:
            raise NotCovered(result.file, f"seeds shared by ({self.a.text}) and ({self.b.text})")
        ia, ib = {s: i for i, s in enumerate(a.seeds)}, {s: i for i, s in enumerate(b.seeds)}
        values = tuple(self.combine(a.values[ia[s]], b.values[ib[s]], result) for s in common)
        censored = tuple(a.censored[ia[s]] or b.censored[ib[s]] for s in common)
        notes = [n for n in (a.note, b.note) if n]
        if len(common) < max(len(a.seeds), len(b.seeds)):
            notes.append(f"paired on the {len(common)} seeds both sides hold ({len(a.seeds)} and {len(b.seeds)})")
        return Series(tuple(common), values, censored, "; ".join(dict.fromkeys(notes)))

    def combine(self, x: float, y: float, result: Result) -> float:
        raise NotImplementedError

    @property
    def text(self) -> str:
        return f"({self.a.text}) {self.symbol} ({self.b.text}), seed by seed"


class Plus(_Paired):
    symbol = "+"

    def combine(self, x, y, result):
        return x + y


class Minus(_Paired):
    symbol = "−"

    def combine(self, x, y, result):
        return x - y


class Times(_Paired):
    symbol = "×"

    def combine(self, x, y, result):
        return x * y


class Over(_Paired):
    symbol = "/"

    def combine(self, x, y, result):
        if y <= 0 or x < 0:
            raise BadResult(result.file, self.text, f"a ratio of a number ≥ 0 to one > 0, not {x:g} / {y:g}")
        return x / y


class Saved(_Paired):
    """The time ``a`` saves against ``b``, in % of ``b`` (FedAST's Gain, Sec. 5.3): 100 (b − a) / b, seed by seed."""

    symbol = "saves against"

    def combine(self, x, y, result):
        if y <= 0:
            raise BadResult(result.file, self.text, f"a baseline time > 0, not {y:g}")
        return 100.0 * (y - x) / y

    @property
    def text(self) -> str:
        return f"100 × (({self.b.text}) − ({self.a.text})) / ({self.b.text}), seed by seed"


@dataclass(frozen=True)
class Tuned:
    """A baseline tuned over its variants, as a paper reports its best-performing scheme: of the runs matching
    ``runs`` whose ``key`` is ``name`` or ``name:<variant>`` (e.g. Sync-ST's allocations ``sync-st:1/2``), the
    variant with the lowest mean ``runs.field``."""

    runs: Runs
    name: str
    key: str = "method"

    def series(self, result: Result) -> Series:
        all_runs = result.at(("runs",))
        names = sorted({r.get(self.key) for r in all_runs if isinstance(r, dict) and isinstance(r.get(self.key), str)
                        and (r[self.key] == self.name or r[self.key].startswith(self.name + ":"))})
        found = []
        for name in names:
            where = tuple(p for p in self.runs.where if p[0] != self.key) + ((self.key, name),)
            try:
                found.append((name, replace(self.runs, where=where).series(result)))
            except NotCovered:
                continue
        if not found:
            raise NotCovered(result.file, f"runs of {self.name} with {_where_text(self.runs.where)}")
        name, best = min(found, key=lambda f: float(np.mean(f[1].values)))
        note = f"the best on average of {len(found)} variants: {name}" if len(found) > 1 else ""
        return Series(best.seeds, best.values, best.censored, _note(best.note, note))

    @property
    def text(self) -> str:
        return f"{self.name} at its best variant: {self.runs.text}"


def _censored_note(series: Series) -> str:
    k = sum(series.censored)
    return f"{k} of {len(series.values)} seeds never reached: counted at the budget" if k else ""


def _note(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _t_interval(values: np.ndarray) -> tuple[float | None, float | None]:
    if values.size < 2:
        return None, None
    half = t_quantile(0.5 + LEVEL / 2, values.size - 1) * float(values.std(ddof=1)) / math.sqrt(values.size)
    mean = float(values.mean())
    return mean - half, mean + half


@dataclass(frozen=True)
class Mean:
    """The mean over seeds of ``series`` and its 95 % t interval."""

    series: object

    def of(self, result: Result) -> Measured:
        s = self.series.series(result)
        v = np.asarray(s.values, dtype=float)
        low, high = _t_interval(v)
        return Measured(float(v.mean()), low, high, v.size, sum(s.censored), s.values,
                        _note(s.note, _censored_note(s)))

    @property
    def text(self) -> str:
        return f"mean over seeds of {self.series.text}"


@dataclass(frozen=True)
class GeoMean:
    """The geometric mean over seeds of a positive ``series`` (a ratio) and its 95 % t interval on the logs."""

    series: object

    def of(self, result: Result) -> Measured:
        s = self.series.series(result)
        if any(x <= 0 for x in s.values):
            raise BadResult(result.file, self.series.text, "ratios > 0 (their logarithms are averaged)")
        logs = np.log(np.asarray(s.values, dtype=float))
        low, high = _t_interval(logs)
        return Measured(float(np.exp(logs.mean())), None if low is None else math.exp(low),
                        None if high is None else math.exp(high), logs.size, sum(s.censored), s.values,
                        _note(s.note, _censored_note(s)))

    @property
    def text(self) -> str:
        return f"geometric mean over seeds of {self.series.text}"


@dataclass(frozen=True)
class Pooled:
    """Several settings' series side by side (a range claim judges every value, seed by seed): the geometric
    (``geometric``) or plain mean over all of them, the values of each. A result lacking some settings is judged on
    those it holds, which are named; with ``every``, it does not cover the claim (which reads its earlier result)."""

    parts: tuple
    labels: tuple
    geometric: bool = True
    every: bool = False

    def of(self, result: Result) -> Measured:
        series, labels, missing = [], [], []
        for label, part in zip(self.labels, self.parts):
            try:
                series.append(part.series(result))
                labels.append(label)
            except NotCovered:
                missing.append(label)
        if not series or missing and self.every:
            raise NotCovered(result.file, ("every one" if series else "any") + " of " + ", ".join(self.labels))
        values = [v for s in series for v in s.values]
        if self.geometric and any(v <= 0 for v in values):
            raise BadResult(result.file, self.text, "values > 0")
        mean = float(np.exp(np.mean(np.log(values)))) if self.geometric else float(np.mean(values))
        notes = [f"{label}: {s.note}" for label, s in zip(labels, series) if s.note]
        censored = sum(sum(s.censored) for s in series)
        return Measured(mean, None, None, min(len(s.values) for s in series), censored, tuple(values), _note(
            *notes, f"{censored} seed(s) never reached: counted at the budget" if censored else "",
            f"not in the result: {', '.join(missing)} (judged on {', '.join(labels)})" if missing else ""))

    @property
    def text(self) -> str:
        return "; ".join(f"{label}: {p.text}" for label, p in zip(self.labels, self.parts))


@dataclass(frozen=True)
class Largest:
    """Of several settings' measures (``parts``, named by ``labels``), the one with the largest value ("up to
    46.0 %"), its interval and seeds kept; settings the result lacks are named."""

    parts: tuple
    labels: tuple

    def of(self, result: Result) -> Measured:
        found, missing = [], []
        for label, part in zip(self.labels, self.parts):
            try:
                found.append((label, part.of(result)))
            except NotCovered:
                missing.append(label)
        if not found:
            raise NotCovered(result.file, "any of " + ", ".join(self.labels))
        label, best = max(found, key=lambda f: f[1].value)
        return Measured(best.value, best.low, best.high, best.n, best.censored, best.values, _note(
            best.note, f"the largest of {len(found)}: {label}",
            f"not in the result: {', '.join(missing)}" if missing else ""))

    @property
    def text(self) -> str:
        return "the largest of " + "; ".join(f"{label}: {p.text}" for label, p in zip(self.labels, self.parts))


@dataclass(frozen=True)
class Best:
    """Per seed, the label (a number, e.g. a τ or a buffer size) of the candidate series with the lowest
    (``lowest``) or highest value; ``values`` the per-seed choices, ``value`` the most frequent."""

    candidates: tuple            # ((label, series), ...)
    lowest: bool = False

    def of(self, result: Result) -> Measured:
        series = [(label, s.series(result)) for label, s in self.candidates]
        seeds = sorted(set.intersection(*(set(s.seeds) for _, s in series)))
        if not seeds:
            raise NotCovered(result.file, "a seed every candidate holds")
        picks, undecided = [], []
        for seed in seeds:
            scores = [(s.values[s.seeds.index(seed)], s.censored[s.seeds.index(seed)], float(label))
                      for label, s in series]
            value, censored, label = (min if self.lowest else max)(scores, key=lambda x: x[0])
            if censored or sum(x[0] == value for x in scores) > 1:        # none reached, or a tie: no best
                undecided.append(seed)
                picks.append(math.nan)
            else:
                picks.append(label)
        decided = [p for p in picks if not math.isnan(p)]
        counts = {p: decided.count(p) for p in decided}
        value = max(counts, key=lambda p: (counts[p], -p)) if counts else math.nan
        censored = sum(sum(s.censored) for _, s in series)
        return Measured(value, None, None, len(seeds), censored, tuple(picks), _note(
            "per seed: " + ", ".join("none" if math.isnan(p) else f"{p:g}" for p in picks),
            f"no single best in seed(s) {', '.join(map(str, undecided))} (none reached, or a tie)" if undecided else "",
            f"{censored} candidate value(s) counted at the budget" if censored else ""))

    @property
    def text(self) -> str:
        return (f"per seed, the {'lowest' if self.lowest else 'highest'} of "
                + ", ".join(f"{label} ({s.text})" for label, s in self.candidates))


@dataclass(frozen=True)
class Constant:
    """A number that is the same in every seed (an exact count: bytes, bits), read seed by seed and checked."""

    series: object

    def of(self, result: Result) -> Measured:
        s = self.series.series(result)
        first = s.values[0]
        varies = any(abs(v - first) > 1e-9 * max(1.0, abs(first)) for v in s.values)
        return Measured(first, None, None, len(s.values), 0, s.values,
                        "varies between seeds: " + ", ".join(f"{v:g}" for v in s.values) if varies else "")

    @property
    def text(self) -> str:
        return f"{self.series.text}, the same in every seed"


__all__ = ["LEVEL", "Series", "Measured", "Runs", "Elsewhere", "Last", "Plus", "Minus", "Times", "Over", "Saved",
           "Tuned", "Mean", "GeoMean", "Pooled", "Largest", "Best", "Constant"]
