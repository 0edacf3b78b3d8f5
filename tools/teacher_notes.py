"""Write the teacher notes (``docs/teaching/``): one page per week of the course map's six-week plan, and the week-6
project's spec, from what the repository holds -- never typed twice.

A week's page: its notebooks with their times and goals (the course map's table), a class plan in minutes, the
board outline (each notebook's section headings), every written question of its exercise notebook with the model
answer (the solution notebook's **Answer** cells) and the rubric to grade it, the "Going further" answer key (its
numbers computed by afl, :data:`FURTHER`), the knowledge check's answer key (``afl.exercises.QUIZZES``), and what
the seeded cases mean for a regrade. The project page: the task, a report
template, a rubric, and the measured cost of each claim's quick command on this repository's 2-core machine (from
the committed result's own wall time: ``afl.rates.measured``).

    python tools/teacher_notes.py            # write docs/teaching/
    python tools/teacher_notes.py --check    # exit 1 if a page is not what this writes (make test)
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from afl.exercises import QUIZZES  # noqa: E402
from afl.rates import RatesError, measured  # noqa: E402

NOTEBOOKS = REPO / "notebooks"
OUT = REPO / "docs" / "teaching"
#: minutes of a class kept for the start (the question of the week) and the end (the knowledge check, discussion)
OPENING, CLOSING = 10, 15
RUBRIC = ("**Rubric** (1 point a written answer): 1 for the model answer's conclusion *with* its reason (a "
          "derivation, or the mechanism named); ½ for the conclusion without a reason, or a right reason with a "
          "slip in the result; 0 otherwise. A prediction that turns out wrong but is reasoned and then corrected "
          "against the output earns the point: the question is the reasoning.")


def course_map() -> tuple[dict, list]:
    """``{notebook: (time, goal)}`` from the order table and ``[(week, work, assessment)]`` from the six-week plan."""
    text = (NOTEBOOKS / "README.md").read_text()
    order = {}
    for m in re.finditer(r"^\| \d+ \| `([\w/]+)` \| ([^|]+) \| ([^|]+) \|", text, re.M):
        order[m[1]] = (m[2].strip(), m[3].strip())
    plan = text[text.index("### Six weeks"):]
    plan = plan[:plan.index("\n\n", plan.index("|"))]
    weeks = [(int(m[1]), m[2].strip(), m[3].strip())
             for m in re.finditer(r"^\| (\d) \| (.+?) \| (.+?) \|$", plan, re.M)]
    return order, weeks


def headings(script: Path) -> list[str]:
    return [h for h in re.findall(r"^# (#{2,3} .+)$", script.read_text(), re.M) if "References" not in h]


def written_answers(sol: Path) -> list[tuple[str, str]]:
    """``[(the question, the model answer)]``: each **Answer** cell and the prompt it answers (the last Predict or
    Derive before it)."""
    cells = re.split(r"^# %%.*$", sol.read_text(), flags=re.M)
    out, prompt = [], ""
    for cell in cells:
        text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in cell.strip().splitlines())
        for found in re.findall(r"\*\*(?:Predict[^*]*|Derive):\*\*\s*(.+?)(?:\n\n|$)", text, re.S):
            prompt = " ".join(found.split())
        if text.startswith("**Answer.**"):
            out.append((prompt, " ".join(text.removeprefix("**Answer.**").split())))
    return out


def _contact_mean(mean: float, K: int, n: int = 100, s: int = 20, interval: float = 10.0) -> float:
    from afl.sim import Exponential, contact_steps_pmf
    pmf = contact_steps_pmf(Exponential(mean), K, n, s, interval)
    return float(sum(k * p for k, p in enumerate(pmf)))


def _key_00() -> list[str]:
    import numpy as np
    from afl.sim import Exponential, HalfNormal, simulate_async_schedule, steps_completed_pmf, two_speed
    k5 = {c: _contact_mean(m, 5) for c, m in (("fast", 2.0), ("slow", 8.0))}
    k20 = {c: _contact_mean(m, 20) for c, m in (("fast", 2.0), ("slow", 8.0))}
    profile = two_speed(100, slow_fraction=1 / 3, slow=Exponential(32.0), seed=0)
    sim = simulate_async_schedule(profile, K=20, s=20, server_interval=10.0, t_end=20_000.0, seed=0)
    slow32 = (_contact_mean(32.0, 20), float(sim.steps("slow").mean()))
    window, K = 10.0, 20
    pmf = steps_completed_pmf(HalfNormal(2.0), window, K)
    rng = np.random.default_rng(0)
    draws = np.cumsum(np.abs(rng.normal(0, 2.0, size=(20_000, 60))), axis=1)          # |N(0, 2²)| step times
    mc = float(np.minimum((draws <= window).sum(1), K).mean())
    return [f"K = 5: fast {k5['fast']:.2f}, slow {k5['slow']:.2f} steps at a contact (K = 20: {k20['fast']:.2f}, "
            f"{k20['slow']:.2f}); the fast clients hit the cap almost always, so the ratio falls from "
            f"{k20['fast'] / k20['slow']:.2f} to {k5['fast'] / k5['slow']:.2f}.",
            f"Slow mean 32: predicted {slow32[0]:.2f}, simulated {slow32[1]:.2f} (20,000 time units, seed 0): they "
            "agree; the prediction holds for any exponential mean.",
            f"Half-normal steps of scale 2 (mean 1.6), window 10, K = 20: afl's pmf gives E[E ∧ K] = "
            f"{sum(k * p for k, p in enumerate(pmf)):.3f}, a Monte Carlo of 20,000 clients {mc:.3f} (E is no longer "
            "Poisson: the steps are less variable, so the count is too)."]


def _key_01() -> list[str]:
    from afl.sim import Exponential, contact_steps_pmf
    pmf = {c: contact_steps_pmf(Exponential(m), 1, 100, 20, 10.0) for c, m in (("fast", 2.0), ("slow", 8.0))}
    a1 = {c: float(1 - p[0]) for c, p in pmf.items()}
    own = {c: _contact_mean(m, 20) for c, m in (("fast", 2.0), ("slow", 8.0))}
    return [f"K = 1: α = P(E ≥ 1): fast {a1['fast']:.3f}, slow {a1['slow']:.3f}; the unweighted progress is "
            f"already nearly equal ({a1['fast'] / a1['slow']:.2f}×): little bias left to correct.",
            f"A fast client reweighted with the slow class's α carries {own['fast'] / own['slow']:.2f} steps' worth "
            f"on average instead of 1, a slow one with the fast class's α {own['slow'] / own['fast']:.2f}: the bias "
            "returns in proportion to the misestimate.",
            "The quick ablation and the committed paper-setting result: `results/favas/ablation/favas-ablation.md` "
            "(restart matters, the literal 1/α shrinks the steps; see exercise 01's last answer)."]


def _key_02() -> list[str]:
    from afl.theory.ghbm import unseen_fraction_moment
    tau = 1
    while unseen_fraction_moment(500, 10, tau) > 0.01:
        tau += 1
    return ["E[U] = Σ_i P(i unseen) = n ((n − s)/n)^τ. By Jensen (or Var U ≥ 0), E[U²] ≥ E[U]², so "
            "(E[U]/n)² ≤ E[(U/n)²]: the square of the mean underestimates.",
            f"n = 500, s = 10, eps = 0.01: τ = {tau} rounds (1/C = 50).",
            "With τ = 1 the momentum is one round's: GHBM and FedCM/FedADC coincide; the gap to GHBM with τ ≈ 1/C is "
            "the clients the one-round window has not seen."]


def _key_03() -> list[str]:
    from afl.compress import QSGDQuantizer
    per = {b: QSGDQuantizer(4, b).bits(400) / 400 for b in (8, 400)}
    return ["With one scale for 400 coordinates the quantizer does not shrink errors (Example B.1: the error bound "
            "exceeds 1), so the error left by a broadcast is sent again, amplified, with the next difference. "
            f"Bits per coordinate at 4 bits: buckets of 8 cost {per[8]:.1f}, one bucket of 400 {per[400]:.2f}.",
            "Without staleness weights the runs with many stale updates (many clients in flight, slow clients) get "
            "worse: stale updates then count as much as fresh ones.",
            "FLSim's scalar quantizer rounds deterministically: it fails the unbiasedness check (its mean over draws "
            "is not x) but keeps the sign and the levels. The hidden state does not need unbiasedness: it needs the "
            "error to shrink (Definition 2.1's δ), which a fine enough deterministic grid gives."]


def _key_04() -> list[str]:
    from afl.theory.fedast import realloc_optimum
    sigma2, tau = [0.2, 1.8, 1.8], [27, 27, 3]
    paper = realloc_optimum(192, sigma2, 1.0, 0.01, tau, "paper")
    code = realloc_optimum(192, sigma2, 1.0, 0.01, tau, "code")
    return ["Compare the shares with the stacked R_m of notebook 04 section 4: the measured ones follow the "
            "estimated σ_m of each round, so they move around eq. (7)'s shares.",
            f"A, B, C = easy τ 27, hard τ 27, hard τ 3, R = 192: eq. (7) gives {', '.join(f'{x:.0f}' for x in paper)}; "
            f"the code's rule {', '.join(f'{x:.0f}' for x in code)} (it favours the task with few local steps).",
            "With replacement the R requests are always in flight, so arrivals form a Poisson stream of rate Rλ and "
            "b of them take b/(Rλ). Without replacement the rate falls as requests finish: R λ, (R − 1) λ, …, so "
            "b arrivals take Σ_{k=0..b−1} 1/((R − k) λ) = (H_R − H_{R−b})/λ, more than b/(Rλ)."]


#: each exercise notebook's "Going further": an answer key computed by afl (numbers from running it)
FURTHER = {"00_simulator": _key_00, "01_favas": _key_01, "02_ghbm": _key_02, "03_qafel": _key_03,
           "04_fedast": _key_04}


def minutes(time: str) -> int:
    return int(re.match(r"(\d+)", time)[1])


def week_page(week: int, work: str, assessment: str, order: dict) -> str:
    names = re.findall(r"`([\w/]+)`", work) + re.findall(r"`([\w/]+)`", assessment)
    lines = [f"# Week {week}", "", f"**Work:** {work}. **Assessment:** {assessment}.", ""]
    plan, t = [f"- 0–{OPENING} min: the week's question, from the first notebook's goal (below)."], OPENING
    for name in names:
        if name in order:
            took = minutes(order[name][0])
            plan.append(f"- {t}–{t + took} min: `{name}` ({order[name][1]}).")
            t += took
    plan.append(f"- {t}–{t + CLOSING} min: the knowledge check at the end of the walkthrough, then the written "
                "answers' reasoning in pairs.")
    lines += ["## Class plan (minutes)", "", *plan, "",
              f"About {t + CLOSING} minutes; the exercise notebook can be homework.", "", "## Board outline", ""]
    for name in names:
        script = NOTEBOOKS / f"{name}.py"
        if not script.is_file():
            continue
        lines.append(f"**`{name}`**")
        lines += [f"- {h.lstrip('#').strip()}" for h in headings(script)]
        lines.append("")
    for name in names:
        sol = NOTEBOOKS / f"{name.removesuffix('_ex')}_sol.py"
        if name.endswith("_ex") and sol.is_file():
            lines += ["## Written answers: model answers and rubric", "", RUBRIC, ""]
            for k, (question, answer) in enumerate(written_answers(sol), 1):
                lines += [f"{k}. *{question}*", "", f"   **Model answer.** {answer}", ""]
    for name in names:
        key = FURTHER.get(name.removeprefix("exercises/").removesuffix("_ex")) if name.endswith("_ex") else None
        if key is not None:
            lines += ["## Going further: answer key (computed by afl)", ""]
            lines += [f"{k}. {text}" for k, text in enumerate(key(), 1)]
            lines.append("")
    for name in names:
        quiz = QUIZZES.get(f"knowledge_{name.split('_')[0]}")
        if quiz is not None and (NOTEBOOKS / f"{name}.py").is_file():
            lines += [f"## Knowledge check of `{name}`: answer key", ""]
            for key, q in zip(quiz.keys, quiz.questions):
                answer = (f"{q.answer}) {q.choices['abcdefgh'.index(q.answer)]}" if q.choices
                          else f"{float(q.answer):.6g}")
                lines.append(f"- {key}. {q.text} **{answer}** ({q.why})")
            lines.append("")
    lines += ["## Regrades", "",
              "A check's cases come from a seed fixed by the exercise, `AFL_CASE_SEED` and `AFL_STUDENT` (each verdict "
              "records it): rerunning autograde, or a student rerunning a check, meets the same cases and gets the "
              "same points. Set a new `AFL_CASE_SEED` for a new term; keep it for the whole term.", ""]
    return "\n".join(lines)


def project_page(root: Path = REPO) -> str:
    from afl.scoreboard import board
    rows = []
    for paper, data in board(root)["papers"].items():
        for claim in data["claims"]:
            result = claim.get("result")
            if not result or not claim.get("scale", {}).get("quick"):
                continue
            try:
                steps, seconds, _ = measured(json.loads((root / result).read_text()), result)
            except RatesError:
                continue
            rows.append((paper, claim["id"], claim["status"], claim["command"], seconds))
    lines = ["# The week-6 project: reproduce one claim", "",
             "**Task.** Pick one claim of the scoreboard (`results/README.md`) decided on a quick setting. Run its "
             "command on your machine, read the number the board reads (its rule and measure are on the board's "
             "row), and write one page: what the paper claims, what you measured (with seeds and spread), whether "
             "the board's rule holds on your run, and, where it does not or where your number differs from the "
             "committed one, why (a setting, the scale, seeds, the machine).", "",
             "**Report template.** (1) The claim, quoted, and the paper's number. (2) Your command and machine. (3) "
             "Your number, seeds and spread; the committed one beside it. (4) The rule and its verdict on your run. "
             "(5) The difference, explained: what you changed or checked to find out. (6) One thing the paper's "
             "full scale would change (the plan of paper-scale runs, `afl plan`, prices it).", "",
             "**Rubric** (10 points). Claim and number stated exactly: 1. Run reproducible from the report: 2. "
             "Number with seeds and spread: 2. The rule applied correctly: 2. A difference explained with evidence "
             "(a run, a setting, a source line), not a guess: 2. Clear page: 1.", "",
             "## What each claim costs on a laptop (measured)", "",
             "The wall time of the committed quick result that decides the claim, on this repository's 2-core "
             "machine (from the result's own runs; a laptop of the same class takes about as long; results that "
             "reused or resumed runs are left out, their time is not theirs).", "",
             "| paper | claim | status | command | minutes |", "|---|---|---|---|---|"]
    for paper, cid, status, command, seconds in sorted(rows, key=lambda r: (r[0], r[4])):
        lines.append(f"| {paper} | `{cid}` | {status} | `{command}` | {seconds / 60:.1f} |")
    return "\n".join(lines) + "\n"


def pages() -> dict[Path, str]:
    order, weeks = course_map()
    out = {OUT / f"week-{w}.md": week_page(w, work, assessment, order) for w, work, assessment in weeks}
    out[OUT / "project.md"] = project_page()
    index = ["# Teacher notes", "", "One page a week for the six-week plan of the course map "
             "([`notebooks/README.md`](../../notebooks/README.md)), written by `tools/teacher_notes.py` from the "
             "notebooks, the solution notebooks and the committed results:", ""]
    index += [f"- [Week {w}](week-{w}.md): {work}" for w, work, _ in weeks]
    index += ["- [The week-6 project](project.md): the spec, a report template, a rubric and each claim's measured "
              "cost", ""]
    out[OUT / "README.md"] = "\n".join(index)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a page is not what this writes")
    args = p.parse_args(argv)
    stale = [path for path, text in pages().items() if not path.is_file() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is stale: run python tools/teacher_notes.py", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for path, text in pages().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
