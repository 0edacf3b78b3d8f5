"""The scoreboard: every cell of the four papers' main tables and every ordering or effect their text states,
decided from the committed results alone.

The vocabulary (the papers' numbers as data, measures, rules, statuses) is :mod:`afl.claims`, which knows no
experiment; the papers' numbers are transcribed once in :mod:`afl.papers`; this package binds each to afl's results
(one module per paper: ``CLAIMS``), decides every claim (:mod:`.verdict`), and writes the board: ``afl report``
writes ``results/README.md`` and the README's summary lines (:func:`build`), ``afl report --json`` prints it
(:func:`board`). Nothing is written through a symbolic link, and a damaged result stops the board with an error
naming its file and key.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..claims import (CONSISTENT, EXACT_STATUSES, EXPLAINED, MIN_SEEDS, NOT_RUN, OPEN, REPRODUCED, STATUSES,
                      inside)
from ..claims.rules import ACCURACY_FLOOR, EFFECT_SHARE, RELATIVE_FLOOR
from ..generated import between_markers
from . import beyond, fedast, favas, ghbm, qafel
from .verdict import Results, verdict

BEGIN, END = "<!-- scoreboard: written by afl report -->", "<!-- /scoreboard -->"
TARGETS = ("results/README.md", "README.md")


#: the section of the asynchronous baselines beyond the four papers (FedAsync, CA2FL, FADAS; :mod:`.beyond`)
BEYOND = "Beyond the four papers"
#: each section's measurement notes, under results/
NOTES = {"FAVAS": "favas/README.md", "GHBM": "ghbm/README.md", "QAFeL": "qafel/README.md",
         "FedAST": "fedast/README.md", BEYOND: "async-family/README.md"}


def papers() -> dict[str, tuple]:
    """Each paper's claims, in the order of the papers (FAVAS, GHBM, QAFeL, FedAST), then the claims of the
    asynchronous baselines beyond them (:data:`BEYOND`)."""
    return {"FAVAS": favas.CLAIMS, "GHBM": ghbm.CLAIMS, "QAFeL": qafel.CLAIMS, "FedAST": fedast.CLAIMS,
            BEYOND: beyond.CLAIMS}


#: every paper's headline claims (each binding module's ``HEADLINE``), what the plan of paper-scale runs puts first
HEADLINE = frozenset(favas.HEADLINE + ghbm.HEADLINE + qafel.HEADLINE + fedast.HEADLINE + beyond.HEADLINE)


def board(root: Path) -> dict:
    """Every claim's verdict (:func:`.verdict.verdict`) and each paper's counts: what ``afl report --json`` prints."""
    results = Results(Path(root))
    out = {}
    for name, claims in papers().items():
        rows = [verdict(c, results) for c in claims]
        out[name] = {"counts": counts(rows), "claims": rows}
    return {"papers": out, "statuses": list(STATUSES), "exact_statuses": list(EXACT_STATUSES), "min_seeds": MIN_SEEDS}


def counts(rows: list[dict]) -> dict:
    """A paper's counts: its empirical claims by status (those afl cannot compute among the not run), and its exact
    counts apart."""
    empirical = [r for r in rows if r["kind"] == "empirical"]
    exact = [r for r in rows if r["kind"] == "exact"]
    return {"claims": len(empirical), **{s: sum(r["status"] == s for r in empirical) for s in STATUSES},
            "beyond afl": sum(r["status"] == NOT_RUN and r["command"] is None for r in empirical),
            "exact": len(exact), **{f"exact {s}": sum(r["status"] == s for r in exact) for s in EXACT_STATUSES}}


def summary(c: dict) -> str:
    """One paper's line, e.g. ``103 claims: 4 reproduced at the paper's scale, 9 consistent at reduced scale, …``."""
    def differ(n: int) -> str:
        return f"{n} differ{'s' * (n == 1)}"
    line = (f"{c['claims']} claims: {c[REPRODUCED]} reproduced at the paper's scale, {c[CONSISTENT]} consistent at "
            f"reduced scale, {differ(c[EXPLAINED])} — explained, {differ(c[OPEN])} — open, {c[NOT_RUN]} not run "
            f"({c['beyond afl']} of them beyond afl's data or models)")
    if c["exact"]:
        line += (f"; exact counts: {c['exact equal']} of {c['exact']} equal, {c['exact unequal']} unequal, "
                 f"{c['exact not run']} not run")
    return line


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _anchor(result: str) -> str:
    return "r-" + result.removeprefix("results/").removesuffix(".json").replace("/", "-")


def _scale(row: dict) -> str:
    s = row.get("scale")
    if not s:
        return "–"
    if not s["reduced"]:
        return "the paper's" + (f"; computed before a change of meaning [(see)](#{_anchor(row['result'])})"
                                if row["provenance"]["predates"] else "")
    parts = [f"{k} = {_short(v['afl'])}" for k, v in s["fields"].items()]
    if s["paper_seeds"] and s["seeds"] < s["paper_seeds"]:
        parts.insert(0, f"{s['seeds']} of {s['paper_seeds']} seeds")
    if s["data"]:
        parts.insert(0, "other data")
    shown = ", ".join(parts[:2]) + (", …" if len(parts) > 2 else "")
    predates = "; computed before a change of meaning" if row["provenance"]["predates"] else ""
    return f"reduced{' (quick)' if s['quick'] else ''}: {shown}{predates} [(all)](#{_anchor(row['result'])})"


def _short(value) -> str:
    text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= 24 else text[:22] + "…"


def _status(row: dict) -> str:
    """The status, with its probe: what it measured, and for a level that stays open how much of the gap it
    closes."""
    text = f"**{row['status']}**"
    probe = row.get("probe")
    if not probe:
        return text
    if probe["afl"] is None:
        return text + f" (probe {probe['judgement']})"
    closes = probe["closes"]
    gap = ("" if closes is None or row["status"] == EXPLAINED else
           f", closing {100 * closes:.0f} % of the gap" if closes > 0 else ", no nearer the paper")
    return text + f" (probe {'holds' if row['status'] == EXPLAINED else 'fails'}: {probe['afl']}{gap})"


def _where(row: dict) -> str:
    if row["status"] == NOT_RUN:
        if row["command"] is None:
            return f"beyond afl: {row['why']}"
        return f"{row['why']}: `{row['command']}`, {row['cost']}"
    link = row["result"].removeprefix("results/").removesuffix(".json")
    return f"[{link}]({link}.md), {row['device']}"


def _afl(row: dict) -> str:
    if row["afl"] is None:
        return "–"
    note = row["afl"]["note"]
    return row["afl"]["text"] + (f"; {note}" if note else "")


def _table(rows: list[dict], cells: bool) -> list[str]:
    """A markdown table of claims: a table's cells (named by row and column) or claims of the text (each with
    where the paper states it)."""
    head = ["cell"] if cells else ["claim", "where"]
    lines = ["| " + " | ".join(head + ["paper", "afl", "rule", "status", "scale", "result"]) + " |",
             "|" + "---|" * (len(head) + 6)]
    for r in rows:
        label = [r["source"].split(" · ", 1)[1]] if cells else [r["claim"], r["source"]]
        lines.append("| " + " | ".join(_cell(x) for x in (*label, r["paper_value"], _afl(r), r["rule"], _status(r),
                                                           _scale(r), _where(r))) + " |")
    return lines


def _quotes(rows: list[dict]) -> list[str]:
    """The paper's words behind the claims of its text, once each."""
    said = dict.fromkeys((r["source"], r["quote"]) for r in rows if r["quote"])
    return ["The paper's words behind these claims:", ""] + [f"- {source}: “{quote}”" for source, quote in said] + [
        ""] if said else []


def _beyond(rows: list[dict]) -> list[str]:
    """Claims afl cannot compute, one line per table (its cells' paper values) or sentence."""
    lines, tables = [], {}
    for r in rows:
        tables.setdefault((r["source"].split(" · ")[0], r["why"]), []).append(r)
    for (source, why), group in tables.items():
        if source.startswith("Table"):
            cells = "; ".join(f"{r['source'].split(' · ', 1)[1]}: {r['paper_value']}" for r in group)
            lines.append(f"- **{source}**, {len(group)} cells, **not run**: {why}. The paper's numbers: {cells}.")
        else:
            lines += [f"- {r['claim']} ({r['source']}; paper: {r['paper_value']}), **not run**: {why}."
                      for r in group]
    return lines


def _probes(rows: list[dict]) -> list[str]:
    """Each probe of a differing claim: what it tries, where, what it measured, and whether its rule holds."""
    lines = []
    for r in rows:
        p = r.get("probe")
        if p:
            measured = f"{p['afl']}, its rule {p['judgement']}" if p["afl"] else p["judgement"]
            lines.append(f"- *{r['id']}* ({r['status']}): {p['why']}. Probe `{p['result']}`: {measured}.")
    return ["### Probes of the claims that differ", ""] + lines + [""] if lines else []


def _settings(rows: list[dict]) -> list[str]:
    """Per result behind a paper's claims: its command, every field that differs from the paper's, its data,
    device and provenance."""
    seen, lines = {}, []
    for r in rows:
        if r.get("scale") and r["result"] not in seen:
            seen[r["result"]] = r
    for result, r in seen.items():
        s, p = r["scale"], r["provenance"]
        fields = "; ".join(f"{k} = {_short(v['afl'])} (paper: {_short(v['paper'])})" for k, v in s["fields"].items())
        every = "; ".join(f"{k} = {v['afl']} (paper: {v['paper']})" for k, v in s["measured_every"].items())
        commit = f"{p['commit'][:10]} ({p['date']}; {p['how']})" if p["commit"] else p["how"]
        lines += [f'<a id="{_anchor(result)}"></a>', "", f"**`{result}`** — `{r['command']}`, {r['device']}.", "",
                  "- setting: " + ("the paper's in every field that sets the computation" if not fields else
                                    f"differs in {fields}") + ("; the quick setting" if s["quick"] else ""),
                  f"- data: {s['data'] or 'the paper’s'}"]
        if every:
            lines.append(f"- measured: {every} (how often it is evaluated: never a reduction)")
        lines += [f"- afl commit: {commit}" + ("" if p["checked"] else "; its changes of meaning not checked yet "
                                                 "(python tools/provenance.py)")]
        lines += [f"- **computed before a change of meaning**: {c}" for c in p["predates"]]
        lines.append("")
    return lines


def _intro() -> list[str]:
    return ["# The scoreboard: every cell of the papers' main tables, decided from the committed results", "",
            "Written by `afl report` from the JSON results in this folder alone (a test rebuilds it: it is never "
            "edited by hand; `afl report --json` prints it whole). The papers' numbers are transcribed once "
            "(`afl/papers/`, each checked against the paper's text); every cell of FAVAS Table 2, GHBM Tables 2, 3, "
            "4, 8 and 9, QAFeL Tables 1 and 2, and every ordering or effect the papers' text states (FAVAS Sec. 5, "
            "GHBM Sec. 5 and App. C.9, QAFeL Sec. 4 and App. E, FedAST's abstract, Sec. 5.3 and App. C.5, D.4-D.6) "
            "is a claim, so the count is the paper's, not what afl chose to run.", "",
            f"**Rules** (`afl/claims/rules.py`, one vocabulary for every paper): a *level* holds where afl's mean "
            f"lies within max(2σ of the paper, {ACCURACY_FLOOR:g} points) of the paper's number for an accuracy in "
            f"%, within max(2σ, {100 * RELATIVE_FLOOR:g} % of it) in any other unit; an *ordering or effect* holds "
            f"where afl's paired 95 % interval excludes no effect on the paper's side and afl's effect is at least "
            f"{100 * EFFECT_SHARE:g} % of the paper's (where the paper gives a number); *no difference* holds where "
            f"the interval lies inside the stated margin; a *range* holds where every setting and every seed falls "
            f"in it; an *exact count* (bytes) must equal the paper's printed digits in every seed, and is counted "
            f"apart. Seeds are paired; a seed that never reached a target counts at the budget and is said "
            f"(censored), never dropped.", "",
            f"**Statuses**: *reproduced* — the rule holds on a result at the paper's scale with at least {MIN_SEEDS} "
            "seeds; *consistent at reduced scale* — the rule holds (or holds on one seed's mean), but a field that "
            "sets the computation differs from the paper's (fewer seeds, rounds, users, another dataset or a lossy "
            "copy…): never counted as reproduced; *differs — explained* — the rule fails and a committed probe, with "
            "its own measure and rule, holds; *differs — open* — the rule fails (a probe that fails says how much of "
            "the gap it closes); *not run* — no committed result covers the claim (the command and its cost, or why "
            "afl cannot compute it). Scale is read from each result's saved setting, whole: every field against the "
            "paper setting's (fields it ran with before they existed included), the seeds its measure used, and the "
            "data it ran on; the settings of each result are listed under its paper.", "",
            f"**{BEYOND}**: the asynchronous baselines afl adds (FedAsync, CA2FL, FADAS) claim in their abstracts "
            "that they beat their baselines, with no number; each claim is read as an ordering on afl's setting "
            "(FAVAS's non-IID MNIST stragglers, `afl repro async-family`), with the same rules. Their setting is "
            "not the papers' (other data), so they are never counted as reproduced.", "",
            "Each paper's measurement notes: " + ", ".join(f"[{p}]({NOTES[p]})" for p in papers()) + ".", ""]


def scoreboard(root: Path) -> tuple[str, dict[str, str]]:
    """``results/README.md``'s text, and each paper's summary line."""
    data = board(root)
    lines, summaries = _intro(), {}
    for name, paper in data["papers"].items():
        rows = paper["claims"]
        summaries[name] = summary(paper["counts"])
        lines += [f"## {name}", "", f"**{summaries[name]}.**", ""]
        beyond = [r for r in rows if r["status"] == NOT_RUN and r["command"] is None]
        computable = [r for r in rows if r not in beyond]
        tables: dict[str, list] = {}
        for r in computable:
            key = "exact" if r["kind"] == "exact" else r["source"].split(" · ")[0] if r["cell"] else "text"
            tables.setdefault(key, []).append(r)
        for key, group in sorted(tables.items(), key=lambda kv: (kv[0] in ("text", "exact"), kv[0] == "exact")):
            if key == "text":
                lines += [f"### Orderings and effects the text states ({len(group)})", ""] + _table(group, False)
                lines += [""] + _quotes(group)
            elif key == "exact":
                lines += [f"### Exact counts, apart from the empirical claims ({len(group)})", ""] + _table(group,
                                                                                                           False)
                lines += [""] + _quotes(group)
            else:
                lines += [f"### {key}: the cells afl computes ({len(group)})", ""] + _table(group, True) + [""]
        lines += _probes(rows)
        if beyond:
            lines += [f"### Beyond afl ({len(beyond)} claims)", ""] + _beyond(beyond) + [""]
        lines += ["### The results behind these claims", ""] + _settings(rows)
    return "\n".join(lines).rstrip() + "\n", summaries


def readme_with(readme: str, summaries: dict[str, str]) -> str:
    """The top README with the summary lines between its markers (:data:`BEGIN`, :data:`END`)."""
    body = "".join(f"- **{name}**: {line}.\n" for name, line in summaries.items())
    return between_markers(readme, BEGIN, END, body, "README.md has no scoreboard markers")


def _regular(path: Path, root: Path) -> Path:
    """``path`` if it is not a symbolic link and lies in ``root``; a ValueError naming it otherwise."""
    if path.is_symlink():
        raise ValueError(f"{path.relative_to(root)} is a symbolic link (to {os.readlink(path)}): afl report reads "
                         "and writes only regular files of the repository; replace it with a file")
    if not inside(path, root):
        raise ValueError(f"{path} lies outside the repository {root}")
    return path


def build(root: Path) -> dict[Path, str]:
    """The files ``afl report`` writes: ``results/README.md`` and ``README.md`` (its scoreboard lines)."""
    root = Path(root).resolve()
    text, summaries = scoreboard(root)
    readme = _regular(root / "README.md", root)
    if not readme.is_file():
        raise ValueError(f"{readme} is missing: the summary lines go between its scoreboard markers")
    return {_regular(root / "results" / "README.md", root): text,
            readme: readme_with(readme.read_text(encoding="utf-8"), summaries)}


def stale(root: Path) -> list[Path]:
    """The files whose committed text differs from what :func:`build` writes."""
    return [p for p, text in build(root).items() if not p.is_file() or p.read_text(encoding="utf-8") != text]


def write(root: Path) -> list[tuple[Path, bool]]:
    """Write what :func:`build` makes, each file replaced whole (a temporary renamed over it, never written through
    a link); which changed."""
    out = []
    for path, text in build(root).items():
        changed = not path.is_file() or path.read_text(encoding="utf-8") != text
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.part")
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)
        out.append((path, changed))
    return out


def board_json(root: Path) -> str:
    return json.dumps(board(root), indent=1, ensure_ascii=False, allow_nan=False)


__all__ = ["HEADLINE", "papers", "board", "board_json", "counts", "summary", "scoreboard", "readme_with", "build",
           "stale", "write", "BEGIN", "END"]
