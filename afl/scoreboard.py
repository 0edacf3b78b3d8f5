"""The scoreboard: every headline claim of the four papers, decided from the committed results alone.

Each paper's module lists its claims as data (``CLAIMS``, a tuple of :class:`Claim`): the sentence, the paper's
number, the result under ``results/`` and the measure read from it (:class:`Value`, :class:`Difference`,
:class:`Ratio`, :class:`PairedRatio`, :class:`Best`), and the rule that decides it (:class:`Within`, :class:`Above`,
:class:`Between`, :class:`Covers`). :func:`verdict` computes a claim's status from the JSON:

- **reproduced**: the rule holds;
- **differs — explained**: it does not, and the claim names a committed probe that shows why;
- **differs — open**: it does not, and nothing explains it yet;
- **not run**: no result is committed; the command that computes it and its estimated cost are given.

The scale (the paper's, reduced, substitute data), device and seeds come from the result too. ``afl report`` writes
``results/README.md`` and a summary line per paper between the markers of the top ``README.md`` (:func:`build`);
a test rebuilds both and fails when a committed one is stale.
"""
from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

from .generated import between_markers
from .stats import paired_ratio

REPRODUCED, EXPLAINED, OPEN, NOT_RUN = "reproduced", "differs — explained", "differs — open", "not run"
STATUSES = (REPRODUCED, EXPLAINED, OPEN, NOT_RUN)
#: the fields of a setting that choose which runs are made or how often they are evaluated, not their scale
SELECTION = ("seeds", "methods", "splits", "eval_every", "taus", "probe_taus", "retune", "precision")
BEGIN, END = "<!-- scoreboard: written by afl report -->", "<!-- /scoreboard -->"


@dataclass(frozen=True)
class Measured:
    """A number read from a result, with the interval a ratio of paired seeds gives (else None)."""

    value: float
    low: float | None = None
    high: float | None = None


#: path keys that stand for a mapping's first or last key (e.g. a sweep's smallest and largest setting, or the one
#: task set of a result, whose name depends on the setting)
FIRST, LAST = "<first>", "<last>"


def _at(result: dict, path: tuple):
    node = result
    for key in path:
        node = node[list(node)[0 if key == FIRST else -1]] if key in (FIRST, LAST) else node[key]
    return node


def _path(path: tuple) -> str:
    return "›".join(str(k) for k in path)


@dataclass(frozen=True)
class Value:
    """The number at ``path`` (a sequence of keys into the result JSON)."""

    path: tuple

    def of(self, result: dict) -> Measured:
        return Measured(float(_at(result, self.path)))

    @property
    def text(self) -> str:
        return _path(self.path)


@dataclass(frozen=True)
class Mean:
    """The mean of the numbers in the mapping at ``path`` (e.g. the final accuracies of a run's tasks)."""

    path: tuple

    def of(self, result: dict) -> Measured:
        values = list(_at(result, self.path).values())
        return Measured(sum(map(float, values)) / len(values))

    @property
    def text(self) -> str:
        return f"mean of {_path(self.path)}"


def _side(side, result: dict) -> float:
    """A side of a :class:`Difference` or :class:`Ratio`: a path, or a measure."""
    return float(_at(result, side)) if isinstance(side, tuple) else side.of(result).value


def _side_text(side) -> str:
    return _path(side) if isinstance(side, tuple) else f"({side.text})"


@dataclass(frozen=True)
class _Pair:
    """``a`` combined with ``b`` (each the number at a path, or a measure) by the subclass's ``combine``."""

    a: object
    b: object
    symbol: ClassVar[str]
    combine: ClassVar[Callable[[float, float], float]]

    def of(self, result: dict) -> Measured:
        return Measured(type(self).combine(_side(self.a, result), _side(self.b, result)))

    @property
    def text(self) -> str:
        return f"{_side_text(self.a)} {self.symbol} {_side_text(self.b)}"


@dataclass(frozen=True)
class Difference(_Pair):
    """``a`` minus ``b``."""

    symbol, combine = "−", operator.sub


@dataclass(frozen=True)
class Ratio(_Pair):
    """``a`` over ``b``."""

    symbol, combine = "/", operator.truediv


@dataclass(frozen=True)
class PairedRatio:
    """The per-seed lists at ``a`` over those at ``b``, paired by seed: the geometric mean and its 95 % t interval
    (:func:`afl.stats.paired_ratio`)."""

    a: tuple
    b: tuple

    def of(self, result: dict) -> Measured:
        r = paired_ratio(_at(result, self.a), _at(result, self.b))
        return Measured(r["ratio"], r["low"], r["high"])

    @property
    def text(self) -> str:
        return f"{_path(self.a)} / {_path(self.b)}, paired by seed"


@dataclass(frozen=True)
class Best:
    """The key (a number) of the mapping at ``path`` whose ``field`` is largest (e.g. the best τ of a sweep)."""

    path: tuple
    field: tuple

    def of(self, result: dict) -> Measured:
        cells = _at(result, self.path)
        return Measured(float(max(cells, key=lambda k: _at(cells[k], self.field))))

    @property
    def text(self) -> str:
        return f"the key of {_path(self.path) or 'the rows'} with the largest {_path(self.field)}"


@dataclass(frozen=True)
class Within:
    """Holds where the measure lies within ``band`` of ``target``."""

    target: float
    band: float

    def holds(self, m: Measured) -> bool:
        return abs(m.value - self.target) <= self.band

    @classmethod
    def accuracy(cls, mean: float, std: float | None = None) -> "Within":
        """An accuracy the paper gives as ``mean ± std`` (%): within twice its ± or 1.5 points, the larger."""
        return cls(mean, max(2 * (std or 0.0), 1.5))

    @property
    def text(self) -> str:
        return f"within ±{self.band:g} of {self.target:g}"


@dataclass(frozen=True)
class Above:
    """Holds where the measure is above ``bound`` (an ordering: a gain above 0, a ratio above 1)."""

    bound: float

    def holds(self, m: Measured) -> bool:
        return m.value > self.bound

    @property
    def text(self) -> str:
        return f"above {self.bound:g}"


@dataclass(frozen=True)
class Between:
    """Holds where the measure lies in ``[low, high]``."""

    low: float
    high: float

    def holds(self, m: Measured) -> bool:
        return self.low <= m.value <= self.high

    @property
    def text(self) -> str:
        return f"between {self.low:g} and {self.high:g}"


@dataclass(frozen=True)
class Covers:
    """Holds where the measure's interval contains the paper's ``target`` (no interval: it does not hold)."""

    target: float

    def holds(self, m: Measured) -> bool:
        return m.low is not None and m.low <= self.target <= m.high

    @property
    def text(self) -> str:
        return f"its 95 % interval contains {self.target:g}"


@dataclass(frozen=True)
class Claim:
    """One headline claim of a paper, decided from one committed result.

    ``result``: the result's path under ``results/`` without ``.json``; ``paper``: the paper's number as it gives it;
    ``unit``: the measure's (e.g. ``"points"``); ``probe``: a committed file (path from the repository root) that
    explains a difference, with ``why`` in one sentence; ``substitute``: the data afl uses in place of the paper's;
    ``queue``: the ``afl queue`` entry that computes the result on a GPU (else ``afl repro <experiment>`` into the
    result's folder computes it)."""

    id: str
    text: str
    paper: str
    result: str
    measure: Value | Mean | Difference | Ratio | PairedRatio | Best
    rule: Within | Above | Between | Covers
    unit: str = ""
    probe: str = ""
    why: str = ""
    substitute: str = ""
    queue: str = ""
    digits: int = 1

    @property
    def experiment(self) -> str:
        return Path(self.result).name

    def invocation(self) -> str:
        """The command that computes its result where none is committed."""
        out = str(Path("results", self.result).parent)
        if self.queue:
            from .queue import find
            return "afl " + " ".join(find(self.queue).argv) + f" --out {out}"
        from .repro import canonical_out
        return f"afl repro {self.experiment}" + ("" if out == canonical_out(self.experiment) else f" --out {out}")


def papers() -> dict[str, tuple[Claim, ...]]:
    """Each paper's claims, in the order of the papers (FAVAS, GHBM, QAFeL, FedAST)."""
    from .repro import favas, fedast, ghbm, qafel
    return {"FAVAS": favas.CLAIMS, "GHBM": ghbm.CLAIMS, "QAFeL": qafel.CLAIMS, "FedAST": fedast.CLAIMS}


def _number(m: Measured, claim: Claim) -> str:
    if m.value is None or (isinstance(m.value, float) and math.isnan(m.value)):
        return "–"
    text = f"{m.value:.{claim.digits}f}"
    if m.low is not None:
        text += f" (95 % {m.low:.{claim.digits}f}–{m.high:.{claim.digits}f})"
    return text + (f" {claim.unit}" if claim.unit else "")


def _device(result: dict) -> str:
    from .repro.runner import run_sources
    kinds = []
    for source in run_sources(result):
        machine = source["machine"]
        kind = "GPU" if "device cuda" in machine else "CPU, " + next(
            (part.strip() for part in machine.split(",") if "CPU cores" in part), "CPU")
        kinds.append(kind)
    return " + ".join(dict.fromkeys(kinds))


def _scale(claim: Claim, result: dict) -> tuple[str, int | None]:
    """``paper``, ``reduced (...)`` or a quick setting, and the substitute data; and the paper setting's seeds."""
    from .repro import EXPERIMENTS
    from .repro.runner import reduced_fields
    name, config = result["experiment"], result["config"]
    module = EXPERIMENTS[name]
    paper = module.setting(name, quick=False, **({"dataset": config["dataset"]} if name == "ghbm-table2" else {}))
    changed = reduced_fields(paper, config, SELECTION)
    shown = ", ".join(f"{k} = {v}" for k, v in list(changed.items())[:3]) + (", …" if len(changed) > 3 else "")
    scale = ("reduced, the quick setting: " + shown if result["quick"] else f"reduced: {shown}") if changed \
        else "the paper's"
    if claim.substitute:
        scale += f"; substitute data: {claim.substitute}"
    return scale, getattr(paper, "seeds", None)


def verdict(claim: Claim, root: Path) -> dict:
    """A claim's row: ``status`` (one of :data:`STATUSES`), ``afl`` (the measure), ``scale``, ``device``, ``seeds``
    and ``command``; for a claim not run, the command and its estimated ``cost``."""
    path = Path(root) / "results" / f"{claim.result}.json"
    if not path.is_file():
        return {"status": NOT_RUN, "afl": "–", "scale": "–", "device": "–", "seeds": "–",
                "command": claim.invocation(), "cost": cost(claim)}
    result = json.loads(path.read_text())
    measured = claim.measure.of(result)
    holds = claim.rule.holds(measured)
    if holds:
        status = REPRODUCED
    else:
        status = EXPLAINED if claim.probe and (Path(root) / claim.probe).exists() else OPEN
    scale, paper_seeds = _scale(claim, result)
    seeds = result["config"].get("seeds")
    from .repro import canonical_out
    out = str(path.parent.relative_to(root))
    command = result["command"]
    if out != canonical_out(result["experiment"], **(
            {"dataset": result["config"]["dataset"]} if result["experiment"] == "ghbm-table2" else {})):
        command += f" --out {out}"
    return {"status": status, "afl": _number(measured, claim), "scale": scale, "device": _device(result),
            "seeds": f"{seeds}" + (f" (paper {paper_seeds})" if paper_seeds else ""), "command": command}


def cost(claim: Claim) -> str:
    """A claim's estimated cost where it was not run: its GPU queue entry's steps and H100 minutes, else the work
    :func:`afl.repro.estimate` finds in its experiment's paper setting."""
    if claim.queue:
        from . import queue
        entry = queue.find(claim.queue)
        return (f"{entry.client_steps():,} client steps, about {entry.minutes():.0f} min on an H100 "
                f"(`afl queue` entry {entry.name}: {entry.status()})")
    from .repro import estimate
    return estimate(claim.experiment).describe()


def _link(target: str, text: str) -> str:
    """A link from ``results/README.md`` to a path given from the repository root."""
    rel = target.removeprefix("results/") if target.startswith("results/") else f"../{target}"
    return f"[{text}]({rel})"


def summary(verdicts: list[tuple[Claim, dict]]) -> str:
    """One paper's line: how many claims hold, at which scale, and how many differ or were not run."""
    count = {s: sum(v["status"] == s for _, v in verdicts) for s in STATUSES}
    at_scale = sum(v["status"] == REPRODUCED and v["scale"].startswith("the paper's") for _, v in verdicts)
    def differ(n: int) -> str:
        return f"{n} differ{'s' * (n == 1)}"
    return (f"{count[REPRODUCED]}/{len(verdicts)} claims reproduced ({at_scale} at the paper's scale), "
            f"{differ(count[EXPLAINED])} — explained, {differ(count[OPEN])} — open, {count[NOT_RUN]} not run")


def scoreboard(root: Path) -> tuple[str, dict[str, str]]:
    """``results/README.md``'s text, and each paper's summary line."""
    lines = ["# The scoreboard: each paper's claims, decided from the committed results", "",
             "Written by `afl report` from the JSON results in this folder alone (a test rebuilds it: it is never "
             "edited by hand). Each claim is data in its paper's module (`CLAIMS` in `afl/repro/<paper>.py`): the "
             "sentence, the paper's number, the result and the measure read from it, and the rule that decides. "
             "**reproduced**: the rule holds; **differs — explained**: it does not, and a committed probe shows why; "
             "**differs — open**: it does not, and nothing explains it yet; **not run**: no result is committed "
             "(the command and its estimated cost are given). An accuracy the paper gives as mean ± std holds within "
             "twice its ± or 1.5 points, whichever is larger; a claim of an ordering holds where the difference has "
             "the paper's sign. Scale: *the paper's* where the result's setting is "
             "the paper's in every field that sets the computation (seeds, methods, splits and evaluation interval "
             "aside: the seeds column shows them); otherwise the fields that were reduced. Paper numbers are "
             "references, printed as the papers give them.", ""]
    lines += ["Each paper's results, with the measurement notes and the commands: "
              + ", ".join(f"[{p}]({p.lower()}/README.md)" for p in papers()) + ".", ""]
    summaries = {}
    for name, claims in papers().items():
        verdicts = [(c, verdict(c, root)) for c in claims]
        summaries[name] = summary(verdicts)
        lines += [f"## {name}", "", f"**{summaries[name]}.**", "",
                  "| claim | paper | afl | rule | status | scale | device | seeds | result |",
                  "|---|---|---|---|---|---|---|---|---|"]
        notes: dict = {}                                          # why -> the claims it explains
        for c, v in verdicts:
            status = f"**{v['status']}**"
            if v["status"] == EXPLAINED:
                status += f" ({_link(c.probe, 'probe')})"
            result = (_link(f"results/{c.result}.md", c.result) if v["status"] != NOT_RUN else
                      f"`{v['command']}`: {v['cost']}")
            lines.append(f"| {c.text} | {c.paper} | {v['afl']} | {c.rule.text} | {status} | "
                         f"{v['scale']} | {v['device']} | {v['seeds']} | {result} |")
            if c.why:
                notes.setdefault(c.why, []).append(c.id)
        commands = dict.fromkeys(v["command"] for _, v in verdicts if v["status"] != NOT_RUN)
        lines += ["", "What each claim measures in its result (keys into the JSON):", ""] + [
            f"- *{c.id}*: {c.measure.text}" for c, _ in verdicts]
        lines += [""] + (["Why a claim differs:", ""] + [f"- {', '.join(f'*{i}*' for i in ids)}: {why}"
                                                          for why, ids in notes.items()] + [""] if notes else []) + [
            "Commands that made these results:", ""] + [f"- `{cmd}`" for cmd in commands] + [""]
    return "\n".join(lines).rstrip() + "\n", summaries


def readme_with(readme: str, summaries: dict[str, str]) -> str:
    """The top README with the summary lines between its markers (:data:`BEGIN`, :data:`END`)."""
    body = "".join(f"- **{name}**: {line}.\n" for name, line in summaries.items())
    return between_markers(readme, BEGIN, END, body, "README.md has no scoreboard markers")


def build(root: Path) -> dict[Path, str]:
    """The files ``afl report`` writes: ``results/README.md`` and ``README.md`` (its scoreboard lines)."""
    root = Path(root)
    text, summaries = scoreboard(root)
    return {root / "results" / "README.md": text,
            root / "README.md": readme_with((root / "README.md").read_text(), summaries)}


def stale(root: Path) -> list[Path]:
    """The files whose committed text differs from what :func:`build` writes."""
    return [p for p, text in build(root).items() if not p.is_file() or p.read_text() != text]


__all__ = ["FIRST", "LAST", "Claim", "Value", "Mean", "Difference", "Ratio", "PairedRatio", "Best", "Within", "Above",
           "Between", "Covers", "Measured", "STATUSES", "verdict", "cost", "summary", "scoreboard", "build", "stale",
           "papers"]
