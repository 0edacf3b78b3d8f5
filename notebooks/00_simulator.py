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
# # 00 · The simulator: why do stragglers and asynchrony matter?
#
# In federated learning the clients are phones, laptops and servers of very different speeds. A **synchronous**
# server (FedAvg) waits for every selected client before it updates the model, so each round lasts as long as its
# slowest client: a *straggler*. **Asynchronous** servers do not wait, and pay for it differently:
#
# - **FAVAS / QuAFL** (FAVAS, Leconte et al. 2023, arXiv:2305.16099): the server ticks on its own clock and *interrupts* `s` random clients; each sends
#   whatever it has, `E_i ∧ K` local steps, so fast clients contribute more work than slow ones;
# - **FedBuff** (Nguyen et al., AISTATS 2022, arXiv:2106.06639; used by FAVAS and QAFeL): the server updates as soon as `Z` clients have finished their `K` steps, so its
#   buffer fills with the fast ones and the slow ones arrive with stale models.
#
# This notebook runs these schedules **without any training**: only simulated time, so that we can see who works
# when. Everything is seeded; the same cells give the same numbers.

# %% [markdown]
# **Learning goals.** Read a schedule (who trains when); explain why a synchronous round lasts as long as its
# slowest client, why FedBuff's buffer fills with fast clients, and why FAVAS's fast clients send more local steps.
# **Time:** 30 minutes. **Needs:** Python and NumPy. **Next:** `exercises/00_simulator_ex` (course map:
# `notebooks/README.md`).
#
# **Glossary.** `n` clients, `s` contacted (FAVAS/QuAFL) or sampled (FedAvg) per server step; `K` the cap on local
# steps; `E_i` the steps client i could finish before the server's request, so it sends `E_i ∧ K`; `Δ` the server
# clock's period; `Z` FedBuff's buffer (QAFeL's `K`); *staleness* `τ`: server steps since a client started.
# **Which meaning holds here:** `K` caps local steps and `τ` is a staleness (in 02 `τ` is GHBM's momentum window, in
# 04 FedAST's local steps). Every symbol: the course map's notation table (`afl.glossary`).

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

from afl.sim import (ConstantRate, Exponential, HalfNormal, ShiftedExponential, contact_steps_pmf,
                     plot_step_time_cdfs, plot_steps_histogram, plot_timeline,
                     rate_for_concurrency, simulate_async_schedule, simulate_buffered_schedule,
                     simulate_sync_schedule, truncated_steps_stats, two_speed)
from afl.sim.demo import compute_straggler_demo, plot_straggler_demo, quick
from afl.panels import panel
from afl.runtime import set_threads

set_threads(load_aware=True, say=True)      # the cores this kernel may use, less those others keep busy

SEED = 0
T_END = 600.0 if quick() else 2000.0  # simulated time for the statistics (AFL_QUICK=1: shorter)
T_SHOW = 80.0  # how much of it the Gantt charts show

# %% [markdown]
# ## 1. How long is one local step?
#
# Each paper models time differently. FAVAS uses the QuAFL simulator: every local step takes an **exponential**
# time, mean 2 for fast clients and 8 for slow ones. FedAST draws **shifted-exponential** times (a fixed cost plus
# an exponential part) and multiplies them by a speed factor 0.7 / 1 / 1.3. QAFeL draws whole training durations
# from a **half-normal** distribution and lets clients arrive at a constant rate.

# %%
families = {
    "fast": Exponential(2.0),
    "slow": Exponential(8.0),
    "FedAST normal client": ShiftedExponential.fedast(1.0),
    "FedAST slow client (x1.3)": ShiftedExponential.fedast(1.0).scaled(1.3),
    "QAFeL duration": HalfNormal(1.0),
}
plot_step_time_cdfs(families, t_max=20.0)
plt.show()
for label, dist in families.items():
    print(f"{label:28s} mean {dist.mean:6.3f}")
assert families["slow"].mean == 4 * families["fast"].mean
assert abs(families["FedAST slow client (x1.3)"].mean - 1.3 * 3.0) < 1e-12

# %% [markdown]
# QAFeL sets the arrival rate so that, on average, a chosen number of clients train at the same time
# (Little's law: concurrency = rate × mean duration). Its rates 125, 627 and 1253 clients per unit of time are
# concurrencies 100, 500 and 1000 with half-normal durations of scale 1:

# %%
rates = [round(rate_for_concurrency(c, HalfNormal(1.0))) for c in (100, 500, 1000)]
print("arrival rates:", rates)
print("first arrivals at rate 125:", np.round(ConstantRate(125).next_times(np.random.default_rng(SEED), 0.0, 3), 4))
assert rates == [125, 627, 1253]

# %% [markdown]
# ## 2. A pool of fast and slow clients
#
# As in FAVAS, one third of the clients are slow. The class sizes are exact and the seed decides who is who.

# %%
profile = two_speed(20, slow_fraction=1 / 3, seed=SEED)
print(profile)
print("slow clients:", profile.clients_of("slow"))
assert profile.counts() == {"fast": 13, "slow": 7}

# %% [markdown]
# ## 3. The picture
#
# **Synchronous FedAvg.** Each round, `s = 4` random clients run `K = 5` steps; the server waits for all of them.
# One row per client (blue: fast, red: slow), the number in a bar is the steps it finished, grey is waiting,
# dotted lines are server steps.
#
# **Predict before you run:** in 80 time units, how many more local steps does a fast client (mean step 2) finish
# than a slow one (mean 8) under each protocol? Under which protocol do the fast clients wait?

# %%
K, S, INTERVAL, Z = 5, 4, 2.0, 4
sync = simulate_sync_schedule(profile, K=K, s=S, t_end=T_END, seed=SEED)
t_rounds = 1.05 * sync.timeline.server_steps[2]          # wide enough for the first three rounds
plot_timeline(sync.timeline, t_max=t_rounds, title=f"FedAvg: every round waits for its slowest client "
              f"(the first three rounds: {t_rounds:.0f} time units)")
plt.show()
round_time = np.diff([0.0, *sync.timeline.server_steps]).mean()
print(f"FedAvg: {sync.server_steps} server steps in {T_END:g} time units, mean round {round_time:.1f}")

# %% [markdown]
# **FAVAS / QuAFL.** Now every client trains all the time at its own pace, and every `2` time units the server
# interrupts `s = 4` random clients, takes what they have and sends back the new model.

# %%
asyn = simulate_async_schedule(profile, K=K, s=S, server_interval=INTERVAL, t_end=T_END, seed=SEED)
plot_timeline(asyn.timeline, t_max=T_SHOW, title="FAVAS/QuAFL: the server interrupts s = 4 clients every 2 units")
plt.show()
print(f"FAVAS/QuAFL: {asyn.server_steps} server steps in {T_END:g} time units")
assert asyn.server_steps == int(T_END / INTERVAL) > 3 * sync.server_steps

# %% [markdown]
# ### What to notice
#
# - Fast clients often finish their `K = 5` steps early and then **wait** (grey) until the server calls them.
# - Slow clients are usually **interrupted** (hatched: a step in progress whose work is lost) with `E_i < K`.
# - So an unweighted average of the returned models gives fast clients more say: the bias FAVAS corrects.

# %%
for name in profile.names:
    e = asyn.steps(name)
    print(f"{name}: {len(e)} contacts, mean E_i = {e.mean():.2f}, share with E_i < K = {np.mean(e < K):.0%}, "
          f"share with E_i = 0 = {np.mean(e == 0):.0%}")
assert asyn.steps("fast").mean() > 2 * asyn.steps("slow").mean()
assert np.mean(asyn.steps("slow") < K) > 0.9 > np.mean(asyn.steps("fast") < K)

# %% [markdown]
# ### The exact distribution of E_i, and FAVAS's weights
#
# A client restarts at each contact, and is contacted at each server step with probability `s/n`, so the time
# between its contacts is `G × interval` with `G` geometric. With exponential steps the number of steps finished
# in a window of length `T` is Poisson(`T / mean`), capped at `K`. Mixing over `G` gives the exact histogram
# (black marks) that the simulation (bars) should reproduce. FAVAS divides each client's update by
# `α_i = E[E_i ∧ K]` (or uses `P(E_i > 0)`): these are the numbers it needs.

# %%
theory = {name: contact_steps_pmf(profile.step_times[c], K, profile.n, S, INTERVAL)
          for c, name in enumerate(profile.names)}
plot_steps_histogram(asyn, theory=theory)
plt.show()
for name in profile.names:
    mean, p_pos = truncated_steps_stats(theory[name])
    print(f"{name}: alpha = E[E ∧ K] = {mean:.3f}   P(E > 0) = {p_pos:.3f}")
    gap = np.abs(asyn.steps_pmf(name) - theory[name]).max()
    assert gap < 5 * 0.5 / np.sqrt(len(asyn.steps(name))), (name, gap)

# %% [markdown]
# **FedBuff.** Every client runs its `K` steps and delivers; the server steps as soon as `Z = 4` updates are in its
# buffer (triangles), and those clients restart from the new model.

# %%
buff = simulate_buffered_schedule(profile, K=K, Z=Z, t_end=T_END, seed=SEED)
plot_timeline(buff.timeline, t_max=T_SHOW, title="FedBuff: the server steps when Z = 4 clients have delivered")
plt.show()
shares = buff.class_shares()
for name in profile.names:
    print(f"{name}: {profile.counts()[name] / profile.n:.0%} of the clients, {shares[name]:.0%} of the updates, "
          f"mean staleness {buff.staleness(name).mean():.1f} server steps")
assert shares["slow"] < profile.counts()["slow"] / profile.n / 2
assert buff.staleness("slow").mean() > buff.staleness("fast").mean()

# %% [markdown]
# The buffer fills **mostly with fast clients**, and what the slow clients send was computed on an old model.
# FAVAS (Sec. 5) observes exactly this: FedBuff can get stuck when most clients are slow.

# %% [markdown]
# **Bounded concurrency.** Above, every client trains all the time (as the QuAFL code simulates FedBuff). FedBuff as
# Nguyen et al. define it keeps only `c` clients *in flight*: after each server step the server starts clients drawn
# at random from the idle ones until `c` train again. Blank stretches are clients the server has not selected.
# Fewer clients in flight means fresher updates, but fewer of them per unit of time.

# %%
CONCURRENCY = 8
buff_c = simulate_buffered_schedule(profile, K=K, Z=Z, t_end=T_END, seed=SEED, concurrency=CONCURRENCY)
plot_timeline(buff_c.timeline, t_max=T_SHOW, title=f"FedBuff with concurrency {CONCURRENCY}: at most "
              f"{CONCURRENCY} clients in flight, Z = {Z}")
plt.show()
for label, r in (("all clients in flight", buff), (f"concurrency {CONCURRENCY}", buff_c)):
    print(f"{label:22s} server steps {r.server_steps:4d}   mean staleness {r.staleness().mean():4.2f}   "
          f"slow clients' share of the updates {r.class_shares()['slow']:.0%}")
assert buff_c.staleness().mean() < buff.staleness().mean() / 2

# %% [markdown]
# ## 4. The knobs
#
# Move the sliders: fraction of slow clients, clients per server step `s`, local steps `K`, the server's
# interval, FedBuff's buffer size `Z` and its concurrency (at least `Z`; 20 = every client). Try `K = 1`
# (everyone finishes: no bias), a long server interval (slow clients catch up), or a large fraction of slow clients
# with a small `Z`. The pictures are redrawn when a slider is released.

# %%
# NBVAL_IGNORE_OUTPUT
controls = {
    "slow_fraction": widgets.FloatSlider(value=1 / 3, min=0.0, max=0.9, step=0.05, description="slow fraction",
                                         continuous_update=False),
    "s": widgets.IntSlider(value=S, min=1, max=20, description="s", continuous_update=False),
    "K": widgets.IntSlider(value=K, min=1, max=20, description="K", continuous_update=False),
    "server_interval": widgets.FloatSlider(value=INTERVAL, min=0.5, max=10.0, step=0.5, description="interval",
                                           continuous_update=False),
    "Z": widgets.IntSlider(value=Z, min=1, max=20, description="buffer Z", continuous_update=False),
    "concurrency": widgets.IntSlider(value=20, min=1, max=20, description="concurrency", continuous_update=False),
}


def show(**knobs):
    if knobs["concurrency"] < knobs["Z"]:
        print(f"concurrency {knobs['concurrency']} < Z = {knobs['Z']}: the buffer could never fill; "
              f"drawing concurrency = Z instead")
        knobs["concurrency"] = knobs["Z"]
    plot_straggler_demo(compute_straggler_demo(n=20, t_show=T_SHOW, t_end=T_END, seed=SEED, **knobs))
    plt.show()


panel(show, controls, rows=[list(controls)[:3], list(controls)[3:]])

# %% [markdown]
# ## What we saw
#
# - Synchronous rounds last as long as their slowest client: with a third of slow clients, few server steps happen.
# - FAVAS/QuAFL's server keeps its own pace, but fast clients return more local steps than slow ones (`E_i`):
#   unweighted averaging favours them, FAVAS's `α_i = E[E_i ∧ K]` reweighting undoes that.
# - FedBuff's buffer is fed mostly by fast clients; slow clients' updates are stale.
#
# The same simulator (`afl.sim`) drives the training notebooks that follow: the schedules there are these ones,
# with real local SGD inside the bars.

# %% [markdown]
# ## Check yourself
#
# A few questions on this notebook. Fill `answers` (a letter for a multiple choice, else a number) and run the
# check: it says why where an answer is off, and records the verdict like the exercises' checks.

# %%
from afl.exercises import QUIZZES

quiz = QUIZZES["knowledge_00"]
quiz.show()

# %%
answers = quiz.blank()            # e.g. answers["q1"] = "a"
quiz(answers)

# %% [markdown]
# > **What to remember.**
# > - A client's steps in a window are a count with a law (Poisson for exponential steps); what it sends is capped at `K`: `E[E ∧ K]`.
# > - Under a server clock that contacts `s` of `n`, the wait between contacts is geometric: random windows, and `min(·, K)` makes their average smaller than the average window's.
# > - Fast clients' uploads carry more steps: an unweighted average leans towards them.

# %% [markdown]
# ## References
#
# - L. Leconte, V. M. Nguyen, E. Moulines. *FAVAS: Federated AVeraging with ASynchronous clients.*
#   arXiv:2305.16099, 2023 (later versions titled FAVANO). Its simulator is QuAFL's.
# - H. Zakerinia, S. Talaei, G. Nadiradze, D. Alistarh. *QuAFL: Federated Averaging Can Be Both Asynchronous and
#   Communication-Efficient.* arXiv:2206.10032, 2022. Code: github.com/ShayanTalaei/QuAFL.
# - J. Nguyen, K. Malik, H. Zhan, A. Yousefpour, M. Rabbat, M. Malek, D. Huba. *Federated Learning with Buffered
#   Asynchronous Aggregation* (FedBuff). AISTATS 2022, arXiv:2106.06639.
# - T. Ortega, H. Jafarkhani. *Asynchronous Federated Learning with Bidirectional Quantized Communications and
#   Buffered Aggregation* (QAFeL). ICML 2023 Workshop on Federated Learning, arXiv:2308.00263.
# - B. Askin, P. Sharma, C. Joe-Wong, G. Joshi. *FedAST: Federated Asynchronous Simultaneous Training.* UAI 2024,
#   arXiv:2406.00302.
