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
# # Exercise 01 · FAVAS: reweight, upload, average (exercise)
#
# **Goal.** Write the three formulas that make FAVAS (Leconte et al. 2023) unbiased: the reweighting `α` of eq. (1),
# the upload of Algorithm 1 (line 24) and the server average of Sec. 4; then check that reweighted uploads carry
# the same expected progress for fast and slow clients, and see in accuracy what each ingredient does. Last,
# beyond the paper, FedAsync's server: how it mixes in a stale model.
#
# **Before:** exercise 00 and notebook `01_favas` (sections 1 and 4b). **Time:** 50 minutes.
#
# **Glossary.** `E_i`: the local steps client i could finish before the server's request; it sends `E_i ∧ K`.
# `pmf[e] = P(E = e)`. `α_i`: its reweighting (eq. (1); deterministic or stochastic, Sec. 4). `w_init`: the model
# the client started from; `w`: its model now. `s`: clients contacted per server step; `K`: the cap on local steps.
# Staleness (FedAsync): the server steps made since the arriving model's client started.
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

from afl.exercises import (check_alpha, check_fedasync_mix, check_server_average, check_unbiased_upload,
                           mine_or_reference)
from afl.plots import style
from afl.repro import committed
from afl.sim import Exponential, contact_steps_pmf

# %% [markdown]
# ## 1. The reweighting α (eq. (1))
#
# Write `alpha(pmf, K, mode, e=None)`: FAVAS's reweighting in its two modes (read eq. (1) and Sec. 4 of the paper:
# the deterministic α uses only the law of `E`, the stochastic one also the count `e` this upload observed). The pmf
# may reach past `K`: a client stops at `K`.
#
# **Derive:** show that with the deterministic α every client's upload carries, in expectation, the same progress
# (in local steps), whatever its speed.

# %%
def alpha(pmf, K, mode, e=None):
    """FAVAS's reweighting alpha (eq. (1), Sec. 4), mode "deterministic" or "stochastic"."""
    # your code here
    raise NotImplementedError


# %%
check_alpha(alpha)

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 2. The upload (Algorithm 1, line 24)
#
# A contacted client sends its model with its progress reweighted by `α` (Algorithm 1, line 24).
#
# **Derive:** which part of `w` is progress, and what does a client with `α = 0` (no step done, stochastic mode)
# send?

# %%
def unbiased_upload(w_init, w, alpha):
    """The reweighted model a contacted FAVAS client sends."""
    # your code here
    raise NotImplementedError


# %%
check_unbiased_upload(unbiased_upload)

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 3. The server average (Sec. 4)
#
# `uploads` holds the `s` uploads, one per row. **Predict before you write:** the server's own model is in the
# average; how many models are averaged?

# %%
def server_average(w_prev, uploads):
    """The server's new model from its previous one and the s uploads (FAVAS Sec. 4)."""
    # your code here
    raise NotImplementedError


# %%
check_server_average(server_average)

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 4. The unbiasedness check
#
# Take FAVAS's clients: exponential steps of mean 2 (fast) or 8 (slow), `n = 100`, `s = 20`, `K = 20`, a server
# step every `Δ = 10`. Suppose every local step makes the same progress `h`. A client that did `e` steps has
# progress `(e ∧ K) h`; reweighted, `(e ∧ K) h / α`. **Predict before you run:** without reweighting, how much more
# progress does a fast client's upload carry than a slow one's? With it?

# %%
alpha_fn = mine_or_reference(alpha, check_alpha)
K, n, s, interval = 20, 100, 20, 10.0
rng = np.random.default_rng(0)
rows = {}
for name, mean in (("fast", 2.0), ("slow", 8.0)):
    pmf = contact_steps_pmf(Exponential(mean), K, n, s, interval)
    e = rng.choice(len(pmf), size=200_000, p=pmf)                 # E ∧ K of 200,000 contacts
    raw = e.astype(float)
    det = raw / alpha_fn(pmf, K, "deterministic")
    sto = np.array([x / alpha_fn(pmf, K, "stochastic", int(x)) if x > 0 else 0.0 for x in e[:20_000]])
    rows[name] = (raw.mean(), det.mean(), sto.mean())
    print(f"{name}: mean progress per upload, in steps h: unweighted {raw.mean():.2f}, "
          f"deterministic α {det.mean():.3f}, stochastic α {sto.mean():.3f}")

fig, ax = plt.subplots(figsize=(7, 3.5))
x = np.arange(3)
for i, (name, color) in enumerate((("fast", "#1f77b4"), ("slow", "#ff7f0e"))):
    ax.bar(x + (i - 0.5) * 0.38, rows[name], width=0.38, color=color, label=f"{name} clients")
ax.set_xticks(x, ["unweighted: e ∧ K", "deterministic: (e ∧ K)/α", "stochastic: (e ∧ K)/α"])
ax.set(ylabel="mean progress per upload (local steps h)", title="Reweighting makes every upload worth one step")
ax.legend()
plt.show()

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 5. Each ingredient in accuracy: the ablation
#
# FAVAS has two ingredients beyond QuAFL: the reweighting and the restart from the server model (QuAFL's clients
# keep their own model, mixed with the server's). afl can switch each off: `reweighting="none"` and
# `client_mixing=True` (`afl.algorithms.favas.FavasSettings`). The table below was computed by
# `afl repro favas-ablation` on FAVAS's Table 2 setting (MNIST, 100 clients, simulated time 5000), and is read from
# `results/`. **Predict before you look:** which ingredient matters more on non-IID data?

# %%
result = committed("favas-ablation")                  # None (saying how to make it) until it is run
if result is not None:
    table = result["rows"]
    splits = list(next(iter(table.values())))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(table)
    for i, (method, cells) in enumerate(table.items()):
        st = style(method)
        means = [cells[sp]["mean"] for sp in splits]
        stds = [cells[sp]["std"] for sp in splits]
        ax.bar(np.arange(len(splits)) + (i - (len(table) - 1) / 2) * width, means, width, yerr=stds,
               color=st["color"], hatch={"-": "", "--": "//", ":": "..", "-.": "xx"}.get(st["linestyle"], ""),
               edgecolor="white", label=st["label"])
    ax.set_xticks(np.arange(len(splits)), splits)
    ax.set(ylabel="final test accuracy (%)", ylim=(0, 100),
           title=f"FAVAS ablation, MNIST, {len(next(iter(table['favas'].values()))['per_seed'])} seeds "
                 "(error bars: ± std over seeds)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    plt.show()

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## 6. Beyond the paper: FedAsync's mixing (walkthrough section 4b)
#
# FedAsync takes every arriving model at once and blends it into the server's, trusting it less the staler it is.
# Write the server's new model from its current one `w`, the arriving model `x_new`, the arriving model's staleness
# (server steps since its client started), the mixing weight `alpha` and the polynomial staleness function's
# exponent `a`. **Predict before you write:** with `a = 1`, how stale must a model be for its weight to fall to a
# quarter of `alpha`?

# %%
def fedasync_mix(w, x_new, staleness, alpha, a):
    """The server's model after FedAsync mixes in ``x_new``, ``staleness`` steps old (Xie et al. 2019, Alg. 1)."""
    # your code here
    raise NotImplementedError


# %%
check_fedasync_mix(fedasync_mix)

# %% [markdown]
# **Derive.** FedAsync with a constant weight (`a = 0`) and FedBuff with a buffer of one (`Z = 1`, no staleness
# weight, server lr `η`) both move the server model towards each arriving client. Write both steps with
# `Δ = x_start − x_new` and say when they are the same step.

# %% [markdown]
# **Your answer.** *(Write it here before you run on; your teacher has a model answer.)*

# %% [markdown]
# ## Going further
#
# 1. With `K = 1` (notebook 01's knobs), what are `α` for both classes? Is there still a bias to correct?
# 2. Compute `(e ∧ K)/α` with the `α` of a client's *own* speed class but the pmf of the other class: how large is
#    the bias when a client's speed is misestimated?
# 3. Run `afl repro favas-ablation --quick` and compare with the committed paper-setting result.
