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
# # Exercise 00 · The simulator: how many steps does a client finish before the server asks? (solution)
#
# **Goal.** Predict `E[E ∧ K]`, the expected number of local steps a client has done when the server contacts it,
# first for a fixed window and then under FAVAS's server clock, and check the prediction against a simulated
# schedule. This number is FAVAS's `α` (eq. (1)) and the reason fast clients dominate an unweighted average.
#
# **Before:** notebook `00_simulator` (sections 1–3). **Time:** 30 minutes. **You will:** write two functions,
# each checked by `afl.exercises`; compare them with `afl.sim.simulate_async_schedule`.
#
# **Glossary.** `E_i`: the steps client i *could* finish before the server's request (a random count). `K`: the cap
# on local steps; a client that reaches it waits, so it sends `E_i ∧ K = min(E_i, K)` steps. `Δ` (`interval`): the
# server clock's period. `s` of `n` clients are contacted at each tick. Step times are exponential of mean `mean`
# (2 for fast clients, 8 for slow ones in FAVAS and QuAFL).
#
# How to work: write your code where a cell says `# your code here` (replace the `raise NotImplementedError`), run
# the cell, then run the check below it. A check answers in words; run it as often as you like (its cases are fixed
# for the assignment; a wrong answer first gets a hint about the idea, the formula only after a few tries).

# %%
try:                                        # without afl: how to get it, instead of an ImportError
    import afl  # noqa: F401
except ImportError:
    raise SystemExit("afl is not installed in this kernel: `pip install afl-*.whl` (a wheel from `make wheel`) or "
                     "`pip install -e .` in the afl repository; data: `afl data download mnist` (checksummed) or "
                     "AFL_DATA=/path/to/data") from None

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from afl.exercises import check_contact_steps, check_expected_steps, mine_or_reference
from afl.sim import Exponential, simulate_async_schedule, two_speed

# %% [markdown]
# ## 1. A fixed window
#
# A client restarts at time 0 and runs exponential steps of mean `mean`. The server asks at time `window`. Write
# `expected_steps(mean, window, K)` = `E[min(E, K)]`, where `E` is the number of steps finished by `window`. First
# work out the law of `E` (exponential gaps between steps: which counting process is that?). The `math` module is
# all you need (SciPy is not installed): `E ∧ K` takes the values `0, …, K`.
#
# **Derive:** why is `E[E ∧ K] = Σ_{k=1..K} P(E ≥ k)`? Show it from `E ∧ K = Σ_{k=1..K} 1(E ≥ k)`.
#
# **Predict before you write:** a fast client (mean 2) with `window = 10` and `K = 20`: is `E[E ∧ K]` closer to 5
# or to 20? And with `K = 3`?

# %%
def expected_steps(mean, window, K):
    """E[min(E, K)]: the steps, at most K, a client with exponential steps of mean `mean` finishes in `window`."""
    # your code here
    ### BEGIN SOLUTION
    lam = window / mean
    pmf = [math.exp(-lam) * lam ** k / math.factorial(k) for k in range(K)]      # P(E = k), k < K
    return sum(k * p for k, p in enumerate(pmf)) + K * (1 - sum(pmf))         # E = K or more counts as K
    ### END SOLUTION


# %%
check_expected_steps(expected_steps)

# %% [markdown]
# **Answer.** With `K = 20` the cap almost never binds (`P(Poisson(5) ≥ 20)` is about 10⁻⁷), so `E[E ∧ K] ≈ 5`.
# With `K = 3` most windows hit the cap (`P(E ≥ 3) ≈ 0.88`): `E[E ∧ 3] ≈ 2.8`, far below `E[E] = 5`.

# %% [markdown]
# **Answer.** (Derive.) Exponential gaps of mean `mean` are a Poisson process of rate `1/mean`, so the count in
# `[0, window]` is `E ~ Poisson(window / mean)`. For any count, `E ∧ K = Σ_{k=1..K} 1(E ≥ k)` (one for each of the
# first `K` steps that was finished); the expectation of an indicator is its probability, so
# `E[E ∧ K] = Σ_{k=1..K} P(E ≥ k)`, with `P(E ≥ k) = 1 − Σ_{j<k} P(E = j)`.

# %%
steps = mine_or_reference(expected_steps, check_expected_steps)
for K in (20, 3):
    print(f"fast client, window 10, K = {K}: E[E ∧ K] = {steps(2.0, 10.0, K):.3f}")

# %% [markdown]
# ## 2. Under the server clock
#
# FAVAS's server contacts `s` of the `n` clients, uniformly, every `interval`. A client restarts when it is
# contacted, so the window between two of its contacts is `G × interval`, with `G` the number of ticks until it is
# drawn again. Work out the law of `G` (at each tick the client is one of the `s` drawn out of `n`, independently of
# the other ticks), then write `contact_steps(mean, K, n, s, interval)` = `E[E ∧ K]` at a contact (you may call
# `expected_steps`). The sum over `g` is infinite: the check uses `s / n` as small as `1/50`, so a fixed number of
# terms is not enough; stop when the probability left is negligible.
#
# **Predict before you write:** is the answer larger or smaller than `expected_steps(mean, interval * n / s, K)`,
# the fixed window of the same mean length?
#
# **Derive:** the law of `G`, and its mean.

# %%
def contact_steps(mean, K, n, s, interval):
    """E[E ∧ K] at a contact of FAVAS's server clock (s of n clients every `interval`)."""
    # your code here
    ### BEGIN SOLUTION
    p, total, mass, g = s / n, 0.0, 0.0, 1
    while mass < 1 - 1e-12:
        weight = p * (1 - p) ** (g - 1)
        total += weight * expected_steps(mean, g * interval, K)
        mass, g = mass + weight, g + 1
    return total
    ### END SOLUTION


# %%
check_contact_steps(contact_steps)

# %% [markdown]
# **Answer.** Smaller: `min(·, K)` is concave in the window, so averaging over random windows gives less than the
# window of average length (Jensen). Long windows are wasted at the cap, short ones are not made up for.

# %% [markdown]
# **Answer.** (Derive.) At each tick the client is drawn with probability `p = s / n` (`s` of `n`, uniformly),
# independently of other ticks; `G = g` means `g − 1` ticks without it, then one with it:
# `P(G = g) = p (1 − p)^(g − 1)`, a geometric law of mean `1/p = n / s` ticks, so the mean window is
# `interval · n / s`.

# %% [markdown]
# ## 3. Check it against the simulator
#
# The simulator draws every step time and every contact (nothing is trained). Its clients of each class should
# show, on average, the number your function predicts. FAVAS's Sec. 5 setting: 100 clients, a third of them slow,
# `s = 20`, `K = 20`, `Δ = 10`.

# %%
contact = mine_or_reference(contact_steps, check_contact_steps)
n, s, K, interval = 100, 20, 20, 10.0
profile = two_speed(n, slow_fraction=1 / 3, seed=0)
schedule = simulate_async_schedule(profile, K=K, s=s, server_interval=interval, t_end=20_000.0, seed=0)
means = {"fast": 2.0, "slow": 8.0}
predicted = {c: contact(means[c], K, n, s, interval) for c in means}
simulated = {c: schedule.steps(c).mean() for c in means}
for c in means:
    print(f"{c}: predicted E[E ∧ K] = {predicted[c]:.2f}, simulated mean over {len(schedule.steps(c))} contacts "
          f"= {simulated[c]:.2f}")

fig, ax = plt.subplots(figsize=(7, 3.5))
for c, color in (("fast", "#1f77b4"), ("slow", "#ff7f0e")):
    ax.hist(schedule.steps(c), bins=np.arange(K + 2) - 0.5, density=True, alpha=0.5, color=color,
            label=f"{c} clients (simulated)")
    ax.axvline(predicted[c], color=color, ls="--", label=f"{c}: your E[E ∧ K] = {predicted[c]:.2f}")
ax.set(xlabel="local steps sent at a contact, E ∧ K", ylabel="share of contacts",
       title="Steps per contact: simulated schedule vs. your prediction")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# **What to notice.** The dashed lines sit at the centres of mass of the histograms: a fast client sends about
# two and a half times as many steps as a slow one (not four, the ratio of their speeds: the fast ones waste long
# windows at the cap `K = 20`, where a pile of them sits). An unweighted average of their models counts each fast
# client's data two and a half times as much as a slow client's: the bias FAVAS's `1/α` removes (exercise 01).
#
# ## Going further
#
# 1. Lower `K` to 5: how do the two predictions move, and which class hits the cap?
# 2. Make the slow clients slower (mean 32): does the simulated mean still agree with your function?
# 3. Replace `Exponential` by `afl.sim.HalfNormal` step times: `E` is no longer Poisson. Estimate `E[E ∧ K]` by
#    Monte Carlo and compare with `afl.sim.steps_completed_pmf(HalfNormal(2.0), window, K)`.
