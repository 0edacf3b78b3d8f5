"""One claim's verdict from the committed results: afl's number (:mod:`afl.claims.measures`), the rule's judgement,
the result's scale read whole from its saved setting (every field against the paper setting's, the fields it ran
with before they existed, seeds, precision, and the data it ran on), its device and provenance, and, for a claim
not run, the command that computes it and its cost."""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict
from pathlib import Path

from ..claims import (FAILS, NOT_RUN, BadResult, Claim, Exact, Level, NotCovered, Result, exists, load, paper_text,
                      status)
from ..papers import PAPERS
from ..repro import EXPERIMENTS, canonical_out, estimate, ghbm
from ..repro.changes import CHANGES
from ..repro.fedast import parse_taskset
from ..repro.runner import run_sources, saved_config, set_flags

#: setting fields that list the runs a grid makes: reduced only where they hold a value the paper's does not
GRID = ("splits", "taus", "tasksets", "caps", "buffers", "concurrencies", "steps", "probe_taus")
#: fields that choose which rows are made (the claim reads its own) or how many seeds (counted from the runs)
SELECTION = ("methods", "seeds")
#: fields that set how often a run is measured, not what it computes: listed, never a reduction
MEASUREMENT = ("eval_every",)
#: where the commit that computed each result, and the changes of meaning it predates, are recorded
PROVENANCE = "results/provenance.json"
CHANGE = {c.id: c for c in CHANGES}


class Results:
    """The committed results of a repository, each loaded once (:func:`afl.claims.load`): a bad one raises
    :class:`afl.claims.BadResult` naming it."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._loaded: dict[str, Result] = {}
        self._costs: dict = {}
        self.provenance = self._provenance()

    def path(self, name: str) -> Path:
        return self.root / "results" / f"{name}.json"

    def has(self, name: str) -> bool:
        return exists(self.path(name))

    def get(self, name: str) -> Result:
        if name not in self._loaded:
            path = self.path(name)
            if not exists(path):
                raise NotCovered(str(path.relative_to(self.root)), "", "no result is committed at "
                                 f"{path.relative_to(self.root)}")
            self._loaded[name] = Result(load(path, self.root), path.relative_to(self.root), self.get)
        return self._loaded[name]

    def _provenance(self) -> dict:
        path = self.root / PROVENANCE
        if not exists(path):
            return {}
        data = load(path, self.root)
        for key, entry in data.items():
            if not (isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("commit", "date", "how"))
                    and isinstance(entry.get("predates"), list) and all(c in CHANGE for c in entry["predates"])):
                raise BadResult(PROVENANCE, key, "a mapping of commit, date and how (strings) and predates (a list "
                                f"of the changes {', '.join(CHANGE)})")
        return data

    def cost(self, run) -> str:
        if run not in self._costs:
            try:
                self._costs[run] = estimate(run.experiment, seeds=run.seeds, **dict(run.overrides)).describe()
            except ValueError as error:
                self._costs[run] = f"cannot be estimated ({error})"
        return self._costs[run]


def slug(text: str) -> str:
    """A claim id's part from a paper's name: ``"CIFAR-10 (CNN) non-IID"`` -> ``"cifar-10-cnn-non-iid"``."""
    return re.sub(r"[^a-z0-9.=]+", "-", text.lower().replace("τ", "tau")).strip("-")


def command(run) -> str:
    """``afl repro …`` as a user types it."""
    out = run.out or canonical_out(run.experiment)
    default = out == canonical_out(run.experiment, **{k: v for k, v in run.overrides if k == "dataset"})
    return (f"afl repro {run.experiment}" + (f" --seeds {run.seeds}" if run.seeds else "")
            + set_flags(dict(run.overrides)) + ("" if default else f" --out {shlex.quote(out)}"))


def paper_seeds(claim: Claim) -> int | None:
    """How many runs the paper averaged for this claim (None where it does not say)."""
    if claim.seeds is not None:
        return claim.seeds or None
    number = getattr(claim.rule, "number", None)
    return getattr(number, "seeds", None) or getattr(PAPERS[claim.paper], "SEEDS", None)


def _plain(value):
    """A value as JSON holds it (tuples as lists)."""
    return json.loads(json.dumps(value, default=str))


def paper_setting(data: dict):
    """The paper setting of a result's experiment (GHBM's Table 2 for the result's dataset)."""
    name = data["experiment"]
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment={name!r} is not one of afl's")
    if not isinstance(data["config"], dict):
        raise TypeError(f"config is a {type(data['config']).__name__}, not a mapping")
    if name == "ghbm-quadratic":
        return ghbm.QuadraticSetting()
    overrides = {"dataset": data["config"]["dataset"]} if name == "ghbm-table2" else {}
    return EXPERIMENTS[name].setting(name, quick=False, **overrides)


def differences(data: dict) -> tuple[dict, dict]:
    """The fields of a result's setting that differ from the paper setting's, each ``(afl, paper)``: those that
    set the computation, and those that only set how often it is measured (:data:`MEASUREMENT`). A field the saved
    setting lacks is what the result ran with before the field existed (:func:`afl.repro.runner.saved_config`)."""
    paper = paper_setting(data)
    reference = _plain(asdict(paper))
    saved = _plain(saved_config(type(paper), data["config"]))
    computed, measured = {}, {}
    for field, want in reference.items():
        if field in SELECTION or field not in saved:
            continue
        got = saved[field]
        if field in GRID and isinstance(got, list) and isinstance(want, list):
            if all(g in want for g in got):
                continue
        elif got == want:
            continue
        (measured if field in MEASUREMENT else computed)[field] = (got, want)
    return computed, measured


def datasets_used(data: dict) -> list[str]:
    """The datasets a result ran on, by afl's names, read from its setting."""
    config = data.get("config", {})
    names = [config["dataset"]] if isinstance(config.get("dataset"), str) else []
    for taskset in config.get("tasksets", ()) or ():
        names += parse_taskset(taskset)
    return list(dict.fromkeys(names))


def data_difference(claim: Claim, data: dict) -> str:
    """The data a result ran on, where it is not the paper's ('' where it is): another dataset, a lossy copy
    (``-jpeg``), or without some of the paper's."""
    if not claim.data:
        return ""
    used = datasets_used(data)
    if {u for u in used if not u.endswith("-jpeg")} == set(claim.data):
        return ""
    shown = data.get("dataset") if isinstance(data.get("dataset"), str) else ", ".join(used)
    lossy = "".join(f"; {u} is a lossy JPEG copy of {u.removesuffix('-jpeg')}" for u in used if u.endswith("-jpeg"))
    return f"ran on {shown or 'no named dataset'} (the paper: {', '.join(claim.data)}){lossy}"


def device(data: dict) -> str:
    """The machines that computed a result's runs, in words (``GPU``, ``CPU, 2 CPU cores``)."""
    kinds = []
    for source in run_sources(data):
        machine = str(source["machine"])
        kinds.append("GPU" if "device cuda" in machine else "CPU, " + next(
            (part.strip() for part in machine.split(",") if "CPU cores" in part), "CPU"))
    return " + ".join(dict.fromkeys(kinds)) or "–"


def provenance(results: Results, name: str, data: dict) -> dict:
    """The afl commit that computed a result and the changes of meaning it predates (:data:`PROVENANCE`, written
    by ``tools/provenance.py``); a result made since that file was written is read by its own ``afl_commit``."""
    entry = results.provenance.get(f"results/{name}.json")
    if entry:
        how = ("recorded by afl repro" if entry["how"] == "recorded" else
               "not recorded then: computed at or before the commit that last changed it")
        return {"commit": entry["commit"], "date": entry["date"], "how": how,
                "predates": [f"{CHANGE[c].what} ({CHANGE[c].commit[:7]}, {CHANGE[c].date})" for c in entry["predates"]],
                "checked": True}
    own = data.get("afl_commit")
    if isinstance(own, dict) and isinstance(own.get("commit"), str) and own["commit"]:
        return {"commit": own["commit"], "date": str(own.get("date", "")), "how": "recorded by afl repro",
                "predates": [], "checked": False}
    return {"commit": "", "date": "", "how": "unknown", "predates": [], "checked": False}


def number_text(value: float | None, claim: Claim) -> str:
    return "–" if value is None else f"{value:,.{claim.digits}f}"


def measured_text(m, claim: Claim) -> str:
    """afl's number in the paper's unit, its interval and seeds, e.g. ``28.5 points (95 % 25.1–31.9), 10 seeds``."""
    text = number_text(m.value, claim) + (f" {claim.unit}" if claim.unit else "")
    if m.low is not None:
        text += f" (95 % {number_text(m.low, claim)} to {number_text(m.high, claim)})"
    if len(m.values) > 1 and m.low is None and not claim.exact:
        text += f" (each: {min(m.values):,.{claim.digits}f} to {max(m.values):,.{claim.digits}f})"
    return text + f", {m.n} seed{'s' * (m.n != 1)}" + (f", {m.censored} censored" if m.censored else "")


def _is_cell(claim: Claim) -> bool:
    """Whether a claim is a table's cell (its source is the cell's), not an ordering or effect."""
    number = getattr(claim.rule, "number", None)
    return number is not None and claim.source == number.where and number.source.startswith("Table")


def _not_run(claim: Claim, results: Results, why: str) -> dict:
    return {"status": NOT_RUN, "why": why, "command": command(claim.run), "cost": results.cost(claim.run)}


def verdict(claim: Claim, results: Results) -> dict:
    """A claim's row of the board (the JSON ``afl report --json`` prints): what the paper states, afl's number,
    the rule, the status, and the scale, device, provenance and command of its result, or what it would cost."""
    row = {"id": claim.id, "paper": claim.paper, "source": claim.source, "quote": claim.quote, "claim": claim.text,
           "kind": "exact" if claim.exact else "empirical", "cell": _is_cell(claim),
           "paper_value": paper_text(claim.rule),
           "paper_pm": getattr(getattr(claim.rule, "number", None), "pm", None), "paper_seeds": paper_seeds(claim),
           "rule": claim.rule.text, "result": None, "afl": None}
    if claim.unsupported:
        return row | {"status": NOT_RUN, "why": claim.unsupported, "command": None, "cost": None}
    name, m, missing = None, None, f"no result committed at results/{claim.result}.json"
    for candidate, measure in ((claim.result, claim.measure), *claim.earlier):
        if not results.has(candidate):
            continue
        try:
            name, m = candidate, measure.of(results.get(candidate))
            break
        except NotCovered as why:
            missing = missing if candidate != claim.result else str(why)
    if m is None:
        return row | _not_run(claim, results, missing)
    result = results.get(name)
    judgement = claim.rule.judge(m)
    data = result.data
    try:
        computed, measured = differences(data)
        substitute = data_difference(claim, data)
        where, origin = device(data), provenance(results, name, data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise BadResult(result.file, "experiment/config/runs", "a result as afl repro writes it: its setting cannot "
                        f"be read ({type(error).__name__}: {error})") from None
    seeds = paper_seeds(claim)
    fewer = seeds is not None and m.n < seeds
    reduced = bool(computed or substitute or fewer)
    probe = _probe(claim, results, m) if judgement == FAILS and claim.probe else None
    return row | {
        "status": status(judgement, reduced, m.n, probe and probe["judgement"], claim.exact), "judgement": judgement,
        "result": f"results/{name}.json",
        "afl": {"value": m.value, "low": m.low, "high": m.high, "seeds": m.n, "censored": m.censored,
                "note": m.note, "text": measured_text(m, claim)},
        "scale": {"reduced": reduced, "quick": bool(data.get("quick")), "fields": {
                      k: {"afl": a, "paper": p} for k, (a, p) in computed.items()},
                  "measured_every": {k: {"afl": a, "paper": p} for k, (a, p) in measured.items()},
                  "seeds": m.n, "paper_seeds": seeds, "data": substitute,
                  "rerun_lifts": bool(computed or fewer)},     # the command at the paper's setting would lift it
        "device": where, "provenance": origin,
        "command": data.get("command") if isinstance(data.get("command"), str) else None, "probe": probe}


def _probe(claim: Claim, results: Results, m) -> dict | None:
    """A failing claim's probe, judged with its own measure and rule (from the first of its results committed and
    covering it); for a level, the share of the gap it closes."""
    p = claim.probe
    missing = None
    for name, measure in ((p.result, p.measure), *p.earlier):
        if not results.has(name):
            continue
        try:
            pm = measure.of(results.get(name))
            break
        except NotCovered as why:
            missing = missing or f"not run ({why})"
    else:
        return {"why": p.why, "result": f"results/{p.result}.json", "judgement": missing or "not run", "afl": None,
                "closes": None}
    closes = None
    if isinstance(claim.rule, (Level, Exact)) and claim.rule.number.value != m.value:
        closes = (pm.value - m.value) / (claim.rule.number.value - m.value)
    return {"why": p.why, "result": f"results/{name}.json", "judgement": p.rule.judge(pm),
            "afl": measured_text(pm, claim), "closes": closes}


__all__ = ["Results", "verdict", "command", "slug", "differences", "datasets_used", "data_difference", "paper_seeds",
           "provenance", "GRID", "SELECTION", "MEASUREMENT", "PROVENANCE"]
