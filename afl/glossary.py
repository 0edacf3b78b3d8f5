"""The course's notation in one table: each symbol, what it means in which notebook, and how afl's code names it.

The four papers reuse letters: ``τ`` is a staleness in FAVAS and QAFeL, GHBM's momentum window and FedAST's local
steps; ``α`` is FAVAS's reweighting, FedAsync's mixing weight, FedCM's gradient weight and a Dirichlet
concentration. The notebooks keep each paper's letter where the paper's equations are read beside them, rename
where they can (notebook 03 writes
the buffer ``Z``, the paper's ``K``, so that ``K`` is always a count of local steps), and say at the top which
meaning holds. ``markdown()`` writes the table of the course map (``notebooks/README.md``), which a test keeps
equal to it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .generated import between_markers


@dataclass(frozen=True)
class Symbol:
    """``symbol`` and its ``meanings``: (the notebooks where it holds, the meaning, afl's name for it)."""

    symbol: str
    meanings: tuple[tuple[str, str, str], ...]


SYMBOLS = (
    Symbol("n", (("all", "clients in the federation", "`n`, `clients`"),)),
    Symbol("s", (("00a, 00, 01, 02, 05", "clients per server step: contacted (FAVAS, QuAFL) or sampled (FedAvg, "
                                         "GHBM)", "`s`"),
                 ("03", "QSGD's levels, `2^(bits−1) − 1` (the paper's letter)", "set by `bits`"))),
    Symbol("C", (("02, 05", "participation `s/n` (GHBM)", "`C`"),
                 ("01", "the simulated time one server step takes (FAVAS's Table 1)", "`c_server_clock`"))),
    Symbol("K", (("00a, 00, 01, 03, 05", "local steps: the cap a client stops at (FAVAS, QuAFL, FedBuff), or every "
                                         "round's count (FedAvg in 00a)", "`K`"),)),
    Symbol("J", (("02", "local steps per round (GHBM's letter for K)", "`J`"),)),
    Symbol("τ", (("00, 01, 03", "staleness: server steps since a client started", "`staleness`"),
                 ("02, 05", "the rounds averaged into GHBM's momentum", "`tau`"),
                 ("04, 05", "local steps per request (FedAST's `τ_m`)", "`steps`"))),
    Symbol("Z", (("00, 01, 03", "FedBuff's buffer: updates per server step (QAFeL's paper writes `K`)", "`Z`"),)),
    Symbol("b", (("04", "FedAST's buffer per task", "`buffers`"),)),
    Symbol("R", (("04", "requests in flight (per task `R_m`); `H_R` the harmonic number", "`requests`"),)),
    Symbol("E_i", (("00, 01", "the steps client i could finish before the server asks; it sends `E_i ∧ K`",
                    "`contact_steps_pmf`"),)),
    Symbol("Δ", (("00, 01", "the server clock's period (FAVAS, QuAFL)", "`interval`"),)),
    Symbol("α", (("01", "FAVAS's reweighting of client i, `α_i` (eq. (1))", "computed by `reweight_constants`"),
                 ("01", "FedAsync's mixing weight of an arriving model, `α_t = α s(τ)` (section 4b only)",
                  "`alpha` of `fedasync`"),
                 ("02", "FedCM's weight on the fresh gradient; FedDyn's regularisation weight", "`alpha`"),
                 ("02, data", "the Dirichlet concentration of a non-IID split (0: one class per client)",
                  "`partition(..., alpha=)`"))),
    Symbol("β", (("02", "the momentum factor", "`beta`"),
                 ("03", "the server momentum (FedBuff, QAFeL)", "`server_momentum`"))),
    Symbol("δ", (("03, 05", "a quantizer's quality: `E‖Q(x) − x‖² ≤ (1 − δ)‖x‖²` (QAFeL Def. 2.1)",
                  "`Quantizer.delta`"),)),
    Symbol("x̂", (("03", "QAFeL's hidden state, the model copy server and clients share", "`hidden_state`"),)),
    Symbol("η, lr", (("all", "a step size; `η_c`, `η_s` (`η_g`) the client's and the server's",
                      "`lr`, `server_lr`"),)),
)


def meanings_in(notebook: str) -> list[tuple[str, str]]:
    """(symbol, meaning) of every symbol that holds in ``notebook`` (e.g. ``"03"``)."""
    return [(s.symbol, m) for s in SYMBOLS for where, m, _ in s.meanings
            if where == "all" or notebook in [w.strip() for w in where.split(",")]]


def markdown() -> str:
    """The notation table of the course map."""
    rows = ["| symbol | meaning | notebooks | in afl's code |", "|---|---|---|---|"]
    for s in SYMBOLS:
        for k, (where, meaning, code) in enumerate(s.meanings):
            rows.append(f"| {f'`{s.symbol}`' if k == 0 else ''} | {meaning} | {where} | {code} |")
    return "\n".join(rows) + "\n"


MARKERS = ("<!-- notation: written from afl.glossary -->", "<!-- end notation -->")


def with_table(course_map: str) -> str:
    """``course_map`` (the text of ``notebooks/README.md``) with :func:`markdown` between its notation markers."""
    return between_markers(course_map, *MARKERS, markdown(), "notebooks/README.md has no notation markers")


if __name__ == "__main__":          # python -m afl.glossary notebooks/README.md: rewrite the course map's table
    import sys
    from pathlib import Path
    for path in map(Path, sys.argv[1:]):
        path.write_text(with_table(path.read_text()))
