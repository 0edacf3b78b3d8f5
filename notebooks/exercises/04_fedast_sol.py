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
# # Exercise 04 · FedAST: who gets the clients, and why not wait for them? (solution)
#
# **Goal.** Derive and write FedAST's Realloc rule (Askin et al., eq. (7)): how the active requests are shared among
# tasks; predict which task gains clients; and write the two expected round times of Sec. 4 that make buffered
# asynchronous training faster than synchronous rounds, then check them by simulation.
#
# **Before:** notebook `04_fedast` (sections 1, 2 and 4). **Time:** 40 minutes.
#
# **Glossary.** `M` tasks (models) trained at once on one pool of clients. `R_m`: task m's active training
# requests, `R = Σ_m R_m` the budget. `σ_m²`: the variance of task m's client updates (its heterogeneity,
# Assumption 3). `η_s`, `η_c`: server and client learning rates; `τ_m`: local steps. `b`: the buffer size. `λ`:
# the rate of a client's exponential training time (mean `1/λ`). `H_R = 1 + 1/2 + … + 1/R`.
#
# Write your code where a cell says `# your code here` (replace the `raise NotImplementedError`), run the cell, then
# its check.

# %%
try:                                        # without afl: how to get it, instead of an ImportError
    import afl  # noqa: F401
except ImportError:
    raise SystemExit("afl is not installed in this kernel: `pip install afl-*.whl` (a wheel from `make wheel`) or "
                     "`pip install -e .` in the afl repository; data: `afl data download mnist` (checksummed) or "
                     "AFL_DATA=/path/to/data") from None

# %%
import matplotlib.pyplot as plt
import numpy as np

from afl.exercises import check_realloc, check_round_times, mine_or_reference

# %% [markdown]
# ## 1. Realloc (eq. (7))
#
# Theorem 1's asynchronous error term grows with `R_m` through `η_s η_c τ_m σ_m² / R_m` summed over the tasks. Sec. 4
# shares a fixed budget `R` to minimize `Σ_m η_s η_c τ_m σ_m² / R_m` subject to `Σ_m R_m = R`. Solve it (a Lagrange
# multiplier does it in two lines) and write `realloc(R, sigma2, eta_s, eta_c, tau)`: real-valued `R_m`, one per
# task. `eta_s`, `eta_c` and `tau` are numbers or one value per task.

# %%
def realloc(R, sigma2, eta_s, eta_c, tau):
    """The R_m minimizing sum_m eta_s eta_c tau_m sigma_m^2 / R_m with sum_m R_m = R."""
    # your code here
    ### BEGIN SOLUTION
    M = len(sigma2)
    weight = np.sqrt(np.asarray(sigma2, dtype=float) * np.broadcast_to(eta_s, M) * np.broadcast_to(eta_c, M)
                     * np.broadcast_to(tau, M))
    return R * weight / weight.sum()
    ### END SOLUTION


# %%
check_realloc(realloc)

# %% [markdown]
# **Answer.** With multiplier `ν`: `−η_s η_c τ_m σ_m² / R_m² + ν = 0`, so `R_m = σ_m √(η_s η_c τ_m / ν)`, i.e.
# `R_m ∝ σ_m √(η_s η_c τ_m)`, scaled to sum to `R`.

# %% [markdown]
# **Predict before you run:** three tasks share `R = 192` requests. A: an easy task (`σ² = 0.2`) with `τ = 27`
# local steps; B: a hard task (`σ² = 1.8`) with `τ = 27`; C: as hard as B but with `τ = 3`. Same learning rates.
# Which task gains clients against the equal split of 64 each, and which loses?

# %%
share = mine_or_reference(realloc, check_realloc)
names, sigma2, tau = ["A: easy, τ = 27", "B: hard, τ = 27", "C: hard, τ = 3"], [0.2, 1.8, 1.8], [27, 27, 3]
R_m = share(192, sigma2, 1.0, 0.01, tau)
fig, ax = plt.subplots(figsize=(7, 3.4))
x = np.arange(3)
ax.bar(x - 0.2, [64] * 3, width=0.4, color="#c7c7c7", label="equal split")
ax.bar(x + 0.2, R_m, width=0.4, color="#1f77b4", label="Realloc (eq. (7), yours)")
for i, r in enumerate(R_m):
    ax.annotate(f"{r:.0f}", (i + 0.2, r), ha="center", va="bottom", fontsize=9)
ax.set_xticks(x, names)
ax.set(ylabel="active requests R_m", title="Who gets the clients? R = 192 requests, three tasks")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# **Answer.** B gains (115 of 192): its updates disagree most and it takes many local steps, so one more request
# reduces its error term the most. A loses (`σ` three times smaller: 38). C, as hard as B but with 9 times fewer
# local steps, gets `√(1/9) = 1/3` of B's share: 38, exactly A's here (`σ` 3 times larger, `√τ` 3 times smaller).
# The share follows `σ_m`, not `σ_m²`: the square root is the diminishing return of adding requests to one task.

# %% [markdown]
# ## 2. Why not wait for everybody?
#
# `R` clients train at once, each for an exponential time of rate `λ`. A FedAST buffer of `b` fills with the first
# `b` arrivals (each finished request is replaced at once); a synchronous round waits for all `R`. Write
# `round_times(b, R, lam)` returning both expected times, `(buffered, synchronous)`.
#
# **Derive:** the law of the first of `R` exponential clocks of rate `λ`, and why the last of `R` takes a sum of
# such waits of decreasing rates.

# %%
def round_times(b, R, lam):
    """(expected time to fill a buffer of b from R requests in flight, expected time of the slowest of R)."""
    # your code here
    ### BEGIN SOLUTION
    harmonic = sum(1 / k for k in range(1, R + 1))
    return b / (R * lam), harmonic / lam
    ### END SOLUTION


# %%
check_round_times(round_times)

# %% [markdown]
# **Answer.** (Derive.) `P(min > t) = P(all R > t) = e^{−Rλt}`: the first of `R` finishes after an exponential time
# of rate `Rλ`, mean `1/(Rλ)`; with each finished request replaced at once, the `b` arrivals of a buffer take
# `b/(Rλ)`. Without replacement, after the first finishes `R − 1` are left (memoryless), so the slowest of `R` takes
# `1/(Rλ) + 1/((R−1)λ) + … + 1/λ = H_R / λ`, about `ln(R)/λ`.

# %% [markdown]
# **Predict before you run:** with `R = 100` clients of mean time 1 (`λ = 1`), how much longer is a synchronous
# round than a buffer of `b = 10`? Check both by simulation.

# %%
times = mine_or_reference(round_times, check_round_times)
rng = np.random.default_rng(0)
lam, b = 1.0, 10
Rs = np.array([10, 20, 50, 100, 200, 500])
sim_buffer, sim_sync = [], []
for R in Rs:
    sim_sync.append(rng.exponential(1 / lam, size=(4000, R)).max(axis=1).mean())
    # arrivals of R requests, each replaced at once: a Poisson process of rate R lam; the b-th arrival's time
    sim_buffer.append(rng.exponential(1 / (R * lam), size=(4000, b)).sum(axis=1).mean())
fig, ax = plt.subplots(figsize=(7, 3.6))
ax.plot(Rs, [times(b, R, lam)[1] for R in Rs], color="#7f7f7f", label="synchronous: H_R / λ (yours)")
ax.plot(Rs, sim_sync, "o", color="#7f7f7f", label="synchronous: simulated (4000 rounds)")
ax.plot(Rs, [times(b, R, lam)[0] for R in Rs], color="#1f77b4", label=f"buffer b = {b}: b / (Rλ) (yours)")
ax.plot(Rs, sim_buffer, "s", color="#1f77b4", label="buffer: simulated (4000 rounds)")
ax.set_xscale("log")
ax.set(xlabel="requests in flight R", ylabel="expected round time (simulated time units)",
       title=f"Waiting for the slowest of R against a buffer of {b} (λ = {lam})")
ax.legend(fontsize=8)
plt.show()
print(f"R = 100: synchronous {times(b, 100, lam)[1]:.2f}, buffered {times(b, 100, lam)[0]:.2f} time units")

# %% [markdown]
# **Answer.** About 52 times longer: `H_100 ≈ 5.19` time units against `10/100 = 0.1`. A synchronous round grows like
# `ln R`, a buffer's shrinks like `1/R`: more clients make synchronous rounds slower and buffered ones faster. The
# buffer pays with staleness instead (Theorem 1's asynchronous term, which Realloc keeps small).

# %% [markdown]
# ## Going further
#
# 1. In notebook `04_fedast`, section 4, compare your Realloc shares with the stacked `R_m` that FedAST measured.
# 2. The authors' code shares requests in proportion to `σ_m²` (and scales by `η_s/(η_c τ²)`, `variant="code"` in
#    `afl.theory.fedast.realloc_optimum`). For the three tasks above, how different is its split?
# 3. Show that `b / (Rλ)` holds for any `b ≤ R` only because each finished request is replaced at once. What if it
#    is not?
