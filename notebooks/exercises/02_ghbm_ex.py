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
# # Exercise 02 · GHBM: momentum from the server's past models (exercise)
#
# **Goal.** Write GHBM's momentum term (Zaccone et al., eq. (7)) from the server's last `τ + 1` models; compute the
# factor of Lemma 4.4 that says how much of the federation a `τ`-round window has not seen; and find how many rounds
# uniform sampling needs, against `1/C` for cyclic sampling (Corollary 4.5). Then compare with the measured best `τ`.
#
# **Before:** notebook `02_ghbm` (sections 1–3). **Time:** 40 minutes.
#
# **Glossary.** `θ^t`: the server model after round t. `τ`: the rounds averaged into the momentum. `J`: local steps
# per round. `β`: the momentum factor (0.9). `n` clients, `s` of them per round, `C = s/n` the participation
# ratio. `|S_τ|`: the distinct clients seen in the last `τ` rounds; `U = n − |S_τ|` those not seen.
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
import torch

from afl.exercises import check_ghbm_momentum, check_smallest_tau, check_unseen_fraction, mine_or_reference
from afl.repro import committed

# %% [markdown]
# ## 1. The momentum term (eq. (7))
#
# At every local step of round t a GHBM client adds a momentum term to its gradient step (the paper's eq. (7)): the
# server's average step over its last `τ` rounds, scaled by `β` and spread over the `J` local steps of the round.
# `past` is the list `[θ^{t−τ−1}, …, θ^{t−1}]` of the server's last `τ + 1` models, oldest first.
#
# **Derive:** the server's last `τ` steps are `θ^{t−k} − θ^{t−k−1}`, `k = 1..τ`. What does their sum telescope to,
# and so what is their average, from `past` alone?

# %%
def ghbm_momentum(past, beta, J):
    """What GHBM's eq. (7) adds at each local step, from the server's last tau + 1 models."""
    # your code here
    raise NotImplementedError


# %%
check_ghbm_momentum(ghbm_momentum)

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# **Predict before you run:** the server moved by the same vector `v` in each of its last 10 rounds. With
# `τ = 10`, `J = 8`, `β = 0.9`, how far does a whole round of local steps move along the momentum?

# %%
momentum = mine_or_reference(ghbm_momentum, check_ghbm_momentum)
v = torch.tensor([1.0, -2.0])
past = [k * v for k in range(11)]                 # theta^{t-11} ... theta^{t-1}, one step v per round
print("one local step:", momentum(past, 0.9, 8), "  a round of J = 8 steps:", 8 * momentum(past, 0.9, 8))

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 2. What a window of τ rounds has not seen (Lemma 4.4)
#
# Lemma 4.4 bounds how far the `τ`-round average of updates is from the full gradient by
# `8 E[(U/n)²] (G² + ‖∇f‖²)`. Write `unseen_fraction(n, s, tau)` = `E[(U/n)²]` when each round draws `s` of the `n`
# clients uniformly (without replacement within a round, independently across rounds).
#
# **Derive:** write `U` as a sum of indicators, one per client, and expand `E[U²]`: which two probabilities does it
# need, and what are they under this sampling?

# %%
def unseen_fraction(n, s, tau):
    """E[(U/n)^2], U the clients never drawn in tau rounds of s of n (GHBM Lemma 4.4)."""
    # your code here
    raise NotImplementedError


# %%
check_unseen_fraction(unseen_fraction)

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 3. How many rounds does uniform sampling need?
#
# Cyclic sampling (Assumption 4.3) sees everybody in `1/C = n/s` rounds, and the factor is then 0. Uniform sampling
# never quite gets there. Write `smallest_tau(n, s, eps)`: the first `τ` at which `unseen_fraction(n, s, τ) ≤ eps`.
#
# **Predict before you write:** for `n = 100`, `s = 10` (`1/C = 10`) and `eps = 0.01`, is it about 10, 20 or 50?

# %%
def smallest_tau(n, s, eps):
    """The fewest rounds tau at which unseen_fraction(n, s, tau) <= eps."""
    # your code here
    raise NotImplementedError


# %%
check_smallest_tau(smallest_tau)

# %%
unseen = mine_or_reference(unseen_fraction, check_unseen_fraction)
smallest = mine_or_reference(smallest_tau, check_smallest_tau)
n, s = 100, 10
taus = np.arange(1, 61)
fig, ax = plt.subplots(figsize=(7, 3.6))
ax.semilogy(taus, [unseen(n, s, t) for t in taus], color="#393b79", label="uniform sampling (yours)")
# cyclic sampling sees s new clients a round: (1 - τ s / n)² until τ = 1/C, then 0 (drawn at 1e-6)
ax.semilogy(taus, [max((1 - t * s / n) ** 2 * (t * s < n), 1e-6) for t in taus], color="#843c39", ls="--",
            label="cyclic sampling (0 from τ = 1/C, drawn at 1e-6)")
ax.axvline(n / s, color="grey", lw=0.8, ls=":", label="τ = 1/C = 10")
for eps in (0.1, 0.01):
    ax.axhline(eps, color="grey", lw=0.5)
    ax.annotate(f"eps = {eps}: τ = {smallest(n, s, eps)}", (smallest(n, s, eps), eps), xytext=(4, 4),
                textcoords="offset points", fontsize=8)
ax.set(xlabel="τ (rounds in the momentum window)", ylabel="E[(unseen fraction)²]",
       title=f"Lemma 4.4's factor, n = {n}, s = {s}")
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 4. The best τ in practice
#
# A longer window sees more of the federation, but it averages older models: its momentum lags. The paper picks
# `τ = 1/C`. `afl repro ghbm-tau` measured GHBM's final accuracy against `τ` (read from `results/`). **Predict
# before you look:** where is the peak, and why does the curve fall beyond it?

# %%
result = committed("ghbm-tau")                  # None (saying how to make it) until it is run
if result is not None:
    rows = result["rows"]
    tau = [int(t) for t in rows]
    mean = np.array([rows[t]["mean"] for t in rows])
    std = np.array([rows[t]["std"] for t in rows])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.errorbar(tau, mean, yerr=std, color="#393b79", marker="o", capsize=3,
                label=f"GHBM, {len(next(iter(rows.values()))['per_seed'])} seeds (± std)")
    ax.axvline(10, color="grey", lw=0.8, ls=":", label="τ = 1/C = 10")
    ax.set_xscale("log")
    ax.set(xlabel="τ", ylabel="final test accuracy (%)", title="GHBM against τ (measured: results/ghbm/tau/ghbm-tau.json)")
    ax.legend(fontsize=8)
    plt.show()
    print("command:", result["command"])

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## Going further
#
# 1. Prove `E[U] = n ((n − s)/n)^τ` and use it to show that `(E[U]/n)²` underestimates `E[(U/n)²]`.
# 2. For `n = 500`, `s = 10` (C = 0.02), how many rounds does uniform sampling need for `eps = 0.01`?
# 3. GHBM with `τ = 1` is FedCM / FedADC (`afl.algorithms`: `fedadc`). In notebook `02_ghbm` run both on the
#    quadratic and see the gap.
