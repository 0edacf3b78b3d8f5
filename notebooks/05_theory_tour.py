# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · A theory tour: the four papers' bounds side by side
#
# Each paper proves a bound, and each bound says which knob costs what. Here they sit on one page, as functions of
# the knobs the notebooks vary: `n` and `s` (clients and clients per step), `K` (local steps), `τ` (GHBM's momentum
# window), the buffer `b` (FedAST), and the `bits` of a quantized message (QAFeL). Every constant the papers hide in
# an `O(·)` is set to 1 (`L = F = σ² = G² = B² = 1`), so read **shapes and trade-offs, not values**.
#
# **Learning goals.** Say which term of each bound a knob moves; explain why each bound has an optimum or a
# monotone trend in its knob; set the measured results of `results/` beside the predictions.
# **Before:** notebooks 01–04 (this one gathers them). **Time:** 30 minutes.
#
# **Glossary.** `n` clients; `s` contacted (FAVAS) or sampled (GHBM) per step, `C = s/n`; `K` local steps (FAVAS,
# QAFeL; GHBM's `J`, FedAST's `τ`); `E_i ∧ K` the steps a FAVAS client sends, `α_i` its reweighting, Theorem 3's
# `a_i`, `b` its constants; GHBM's `τ` the rounds averaged into the momentum; FedAST's `b` the buffer and `R` the
# requests in flight; QAFeL's `δ` the compression parameter (`E‖Q(x) − x‖² ≤ (1 − δ)‖x‖²`, Definition 2.1),
# `T` server steps; `ε` the target of `E‖∇f‖²`.
# **Which meaning holds here:** each paper keeps its own letters, so the same letter means different things in
# different panels: `τ` is GHBM's window in the GHBM panel and FedAST's local steps in FedAST's; `C` is `s/n`.
# Every symbol: the course map's notation table (`afl.glossary`).
#
# The calculators live in `afl.theory` (one module per paper), each citing its equation.

# %%
try:                                        # without afl: how to get it, instead of an ImportError
    import afl  # noqa: F401
except ImportError:
    raise SystemExit("afl is not installed in this kernel: `pip install afl-*.whl` (a wheel from `make wheel`) or "
                     "`pip install -e .` in the afl repository; data: `afl data download mnist` (checksummed) or "
                     "AFL_DATA=/path/to/data") from None

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from afl.compress import QSGDQuantizer
from afl.repro import committed
from afl.sim import Exponential, contact_steps_pmf
from afl.theory.favas import c_fedavg, c_server_clock, reweight_constants, table1_favas, table1_fedavg
from afl.theory.fedast import corollary11_terms
from afl.theory.ghbm import deviation_bound
from afl.theory.qafel import corollary_f3_orders
from afl.panels import panel
from afl.runtime import set_threads

set_threads(load_aware=True, say=True)      # the cores this kernel may use, less those others keep busy

CONST = dict(F=1.0, L=1.0, sigma2=1.0, G2=1.0)


# %% [markdown]
# ## The four bounds
#
# - **FAVAS, Table 1:** the simulated *time* to reach `ε`, i.e. the server steps of Corollary 4 times the time a
#   step takes (`C`): FedAvg's rounds wait for the slowest of `s` clients (`c_fedavg`), FAVAS's server clock does not
#   (`c_server_clock`, `Δ = 10`). Its constants `a_i`, `b` come from each class's distribution of `E ∧ K` (fast steps
#   of mean 2, slow of mean 8, a third slow). Each curve is drawn relative to its best `s` (the legend gives the
#   best value).
# - **GHBM, Lemma 4.4:** how far the `τ`-round momentum is from the full gradient, `8 E[(U/n)²] G²`, for uniform and
#   cyclic sampling.
# - **QAFeL, Corollary F.3:** its four terms after `T` steps, against the bits of the quantizer on both sides
#   (max-norm QSGD with buckets of 16 coordinates, whose `δ` is known: `1 − 16/(4 s²)`, `s = 2^(bits−1) − 1`).
# - **FedAST, Corollary 1.1:** its three terms after a fixed *simulated time*, against the requests in flight `R`: a
#   buffer of `b` fills every `b/(Rλ)` time units, so more requests give more server steps, but staler ones.
#
# **Predict before you move a slider:** (1) which FAVAS knob moves FedAvg's curve but not FAVAS's? (2) Does the GHBM
# factor depend on `K`? (3) Below how many bits does QAFeL's bound stop holding? (4) Is there a best number of requests?

# %%
def favas_panel(ax, n, s, K):
    svals = np.unique(np.linspace(1, n, 12).astype(int))
    fast, slow = n - n // 3, n // 3
    favas, fedavg = [], []
    for s_ in svals:
        pmfs = [contact_steps_pmf(Exponential(m), K, n, int(s_), 10.0) for m in (2.0, 8.0)]
        consts = reweight_constants(pmfs, K, "stochastic")
        a = np.repeat(consts["a"], [fast, slow])
        favas.append(table1_favas(0.05, B2=1.0, K=K, n=n, s=int(s_), a=a, b=consts["b"], C=c_server_clock(10.0),
                                  **CONST))
        fedavg.append(table1_fedavg(0.05, B2=1.0, K=K, s=int(s_), n=n, C=c_fedavg(K, int(s_), fast, slow),
                                    **CONST))
    for values, color, label in ((fedavg, "#7f7f7f", "FedAvg (waits for stragglers)"),
                                 (favas, "#1f77b4", "FAVAS (stochastic α)")):
        values = np.array(values)
        ax.semilogx(svals, values / values.min(), color=color,
                    label=f"{label}, best {values.min():.2g} at s = {svals[values.argmin()]}")
    ax.axvline(s, color="black", lw=0.8, ls=":", label=f"s = {s}")
    ax.set(xlabel="s, clients per server step", ylabel="time to ε / its best over s",
           title=f"FAVAS Table 1 (n = {n}, K = {K}, ε = 0.05)")


def ghbm_panel(ax, n, s, tau):
    taus = np.arange(1, 4 * max(1, n // s) + 1)
    for sampling, color, ls in (("uniform", "#393b79", "-"), ("cyclic", "#843c39", "--")):
        dev = [deviation_bound(n, s, int(t), G2=1.0, sampling=sampling) for t in taus]
        ax.semilogy(taus, np.maximum(dev, 1e-4), color=color, ls=ls, label=f"{sampling} sampling")
    ax.axvline(n / s, color="grey", lw=0.8, ls=":", label="τ = 1/C")
    ax.axvline(tau, color="black", lw=0.8, ls=":", label=f"τ = {tau}")
    ax.set(xlabel="τ, rounds in the momentum window", ylabel="8 E[(U/n)²] G² (floor 1e-4)",
           title=f"GHBM Lemma 4.4 (n = {n}, s = {s})")


def qafel_panel(ax, K, bits, T=10_000, P=1):
    grid = np.arange(2, 13)
    delta = [QSGDQuantizer(int(b), bucket=16, norm="max").delta(16) for b in grid]
    ok = [d is not None for d in delta]
    terms = {k: [] for k in ("optimization", "staleness", "server_quantization", "client_quantization")}
    for d in delta:
        t = corollary_f3_orders(T, P, K, L=1.0, F=1.0, sigma2=1.0, G=1.0, delta_c=d or 1.0, delta_s=d or 1.0,
                                tau_max_1=2.0)
        for k in terms:
            terms[k].append(t[k] if d is not None else np.nan)
    colors = {"optimization": "#7f7f7f", "staleness": "#2ca02c", "server_quantization": "#9467bd",
              "client_quantization": "#d62728"}
    for k, v in terms.items():
        ax.semilogy(grid, v, color=colors[k], marker="o", ms=3, label=k.replace("_", " "))
    bad = grid[~np.array(ok)]
    if bad.size:
        ax.axvspan(bad.min() - 0.5, bad.max() + 0.5, color="#eeeeee", label="δ ≤ 0: no guarantee")
    ax.axvline(bits, color="black", lw=0.8, ls=":", label=f"bits = {bits}")
    ax.set(xlabel="bits per coordinate (both sides)", ylabel="term of eq. (13) (constants 1)",
           title=f"QAFeL Corollary F.3 (T = {T}, K = {K}, max-QSGD, bucket 16)")


def fedast_panel(ax, R, buffer, time=2000.0, lam=1.0, tau=5):
    Rs = np.unique(np.geomspace(buffer, max(R, buffer) * 10, 24).astype(int))
    terms = {k: [] for k in ("fedavg_1", "fedavg_2", "async", "total")}
    for r in Rs:
        T = max(1.0, time * r * lam / buffer)            # server steps in the given simulated time
        t = corollary11_terms(T, tau, buffer, int(r))
        for k in terms:
            terms[k].append(float(t[k]))
    styles = {"fedavg_1": ("#7f7f7f", ":"), "fedavg_2": ("#7f7f7f", "--"), "async": ("#1f77b4", "--"),
              "total": ("#1f77b4", "-")}
    for k, v in terms.items():
        ax.loglog(Rs, v, color=styles[k][0], ls=styles[k][1], label=k)
    ax.axvline(R, color="black", lw=0.8, ls=":", label=f"R = {R}")
    ax.set(xlabel="R, requests in flight", ylabel=f"Cor. 1.1 terms after {time:.0f} time units",
           title=f"FedAST Corollary 1.1 (b = {buffer}, λ = {lam}, τ = {tau})")


def tour(n=100, s=20, K=20, tau=10, bits=4, R=100, buffer=10):
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    favas_panel(axes[0, 0], n, s, K)
    ghbm_panel(axes[0, 1], n, s, tau)
    qafel_panel(axes[1, 0], K, bits)
    fedast_panel(axes[1, 1], R, buffer)
    for ax in axes.flat:
        ax.legend(fontsize=7)
    fig.suptitle("Four bounds, one page (every hidden constant = 1: compare shapes, not values)")
    fig.tight_layout()
    return fig


tour()
plt.show()

# %% [markdown]
# **What to notice.**
#
# - **FAVAS:** both curves have a best `s`. FAVAS's falls steeply at first (its `n/s` term: contacting more clients
#   per step of fixed length is free) and flattens; FedAvg's is flat and turns up as its rounds wait for the
#   slowest of more clients. The values (legend) are not comparable: with every constant set to 1 FAVAS's bound is
#   far above FedAvg's, because its terms carry `n`, `K` and `b` that the paper's constants would offset; Table 1's
#   claim is about the regime where slow clients are very slow, which the measured results below test directly.
# - **GHBM:** the factor does not depend on `K` (or on the data): it counts clients not seen. Cyclic sampling
#   reaches 0 at `τ = 1/C`; uniform sampling falls geometrically and needs about twice as many rounds for the same
#   level (exercise 02).
# - **QAFeL:** below 3 bits max-QSGD on buckets of 16 is not a contraction (`δ ≤ 0`) and the bound says nothing.
#   Above, the quantization terms fall with the bits and level off below the optimization term, which the bits do
#   not touch: a few bits per coordinate cost little.
# - **FedAST:** at a fixed simulated time more requests give more server steps (`T ∝ R`), so the FedAvg terms fall
#   like `1/√R`, but the asynchronous term grows like `τ R σ_g²`. With these constants it dominates from the
#   smallest `R` on, so the total only grows: requests in flight beyond the buffer buy staleness, not progress. That
#   is why FedAST shares a fixed budget of requests among tasks (Realloc) instead of sending every idle client a
#   job. The buffer `b` nearly cancels out at fixed time (each step is `b` times better, and there are `b` times
#   fewer).
#
# ## The knobs

# %%
# NBVAL_IGNORE_OUTPUT
controls = {
    "n": widgets.IntSlider(value=100, min=10, max=500, step=10, description="n", continuous_update=False),
    "s": widgets.IntSlider(value=20, min=1, max=100, description="s", continuous_update=False),
    "K": widgets.IntSlider(value=20, min=1, max=50, description="K", continuous_update=False),
    "tau": widgets.IntSlider(value=10, min=1, max=60, description="τ (GHBM)", continuous_update=False),
    "bits": widgets.IntSlider(value=4, min=2, max=12, description="bits", continuous_update=False),
    "R": widgets.IntSlider(value=100, min=10, max=500, step=10, description="R (FedAST)", continuous_update=False),
    "buffer": widgets.IntSlider(value=10, min=1, max=100, description="b (FedAST)", continuous_update=False),
}


def show(**knobs):
    knobs["s"] = min(knobs["s"], knobs["n"])
    tour(**knobs)
    plt.show()


panel(show, controls, rows=[list(controls)[:4], list(controls)[4:]])

# %% [markdown]
# ## Where the measured results sit
#
# The bounds predict directions; `afl repro` measured what happens (read from `results/`, with the command that
# produced each). **Predict before you read:** does each measurement go the way its bound says?

# %%
def measured():
    rows = []

    favas = committed("favas-table2")
    if favas:
        r = favas["rows"]
        rows.append(("FAVAS", "asynchrony without waiting beats FedAvg's rounds on non-IID data",
                     f"noniid_2of3_fast: FAVAS (ᾱ/α) {r['favas-normalized']['noniid_2of3_fast']['mean']:.1f} % vs "
                     f"FedAvg {r['fedavg']['noniid_2of3_fast']['mean']:.1f} %", favas["command"]))
    ghbm = committed("ghbm-tau")
    if ghbm:
        r = ghbm["rows"]
        best = max(r, key=lambda t: r[t]["mean"])
        rows.append(("GHBM", "the momentum should see the whole federation: τ ≈ 1/C = 10",
                     f"best τ = {best} ({r[best]['mean']:.1f} %); τ = 1: {r['1']['mean']:.1f} %",
                     ghbm["command"]))
    qafel = committed("qafel-table1")
    if qafel:
        r = qafel["rows"]
        fb, q4 = r["fedbuff"], r["qafel_c4_s4"]
        rows.append(("QAFeL", "4-bit messages: somewhat more uploads, far fewer bytes",
                     f"uploads to target (x1000): FedBuff {fb['uploads_to_target']['mean']:.2f}, QAFeL 4/4 "
                     f"{q4['uploads_to_target']['mean']:.2f}; kB per upload {fb['kb_per_upload']:.0f} vs "
                     f"{q4['kb_per_upload']:.1f} ({fb['kb_per_upload'] / q4['kb_per_upload']:.1f}x fewer)",
                     qafel["command"]))
    fedast = committed("fedast-fig7")
    if fedast:
        cell = next(iter(fedast["rows"].values()))
        sync = min((v for k, v in cell.items() if k.startswith("sync-st")),
                   key=lambda v: v["time_to_all_targets"]["mean"])
        rows.append(("FedAST", "buffered asynchronous rounds beat waiting for the slowest",
                     f"time to all targets: FedAST {cell['fedast']['time_to_all_targets']['mean']:.0f} vs best "
                     f"Sync-ST {sync['time_to_all_targets']['mean']:.0f} time units", fedast["command"]))
    lines = ["| paper | the theory's direction | measured by afl | command |", "|---|---|---|---|"]
    lines += [f"| {p} | {claim} | {value} | `{cmd}` |" for p, claim, value, cmd in rows]
    return "\n".join(lines)


display(Markdown(measured()))

# %% [markdown]
# **What to notice.** All four go the predicted way, by margins that the bounds cannot give (their constants are
# unknown). FedAST's margin is small in its quick CPU setting (two tasks, not the paper's four), and QAFeL's and
# GHBM's rows are quick settings too: each paper's notebook and `results/README.md` say what was reduced and why.

# %% [markdown]
# ## Check yourself
#
# A few questions on this notebook. Fill `answers` (a letter for a multiple choice, else a number) and run the
# check: it says why where an answer is off, and records the verdict like the exercises' checks.

# %%
from afl.exercises import QUIZZES

quiz = QUIZZES["knowledge_05"]
quiz.show()

# %%
answers = quiz.blank()            # e.g. answers["q1"] = "a"
quiz(answers)

# %% [markdown]
# > **What to remember.**
# > - Each bound trades an optimization term against a noise, drift or quantization term; a knob moves one of them.
# > - The bounds give directions, not numbers: their constants are loose, the measured results are the test.
# > - The same letter means different things in different papers: read each bound in its own notation.

# %% [markdown]
# ## Exercises
#
# 1. In the FAVAS panel, make every client fast (edit `favas_panel`: `fast, slow = n, 0`). Does FedAvg still lose?
# 2. For the GHBM panel with `n = 500`, `s = 10`, how many rounds does uniform sampling need to bring the factor
#    below 0.01? (Exercise 02 has the function.)
# 3. In the QAFeL panel, use buckets of 64: at how many bits does the bound start to hold?
# 4. In the FedAST panel, make the tasks nearly homogeneous (`sigma_g2=0.01` in `corollary11_terms`): is there now a
#    best `R`? Which term of Corollary 1.1 sets it?
#
# ## References
#
# Leconte, Nguyen, Moulines, *FAVAS* (arXiv:2305.16099), Table 1 and Corollary 4; Zaccone et al., *Generalized
# heavy-ball momentum* (GHBM), Lemma 4.4 and Corollary 4.5; Ortega, Jafarkhani, *QAFeL*, Corollary F.3; Askin,
# Sharma, Joe-Wong, Joshi, *FedAST*, Theorem 1 and Corollary 1.1.
