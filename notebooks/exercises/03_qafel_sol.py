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
# # Exercise 03 · Buffers, staleness and quantized messages: FedBuff and QAFeL (solution)
#
# **Goal.** Write FedBuff's buffered server step with staleness weights (Nguyen et al. 2022); write a QSGD quantizer
# and count its bits exactly (QAFeL, Ortega & Jafarkhani 2023, Example B.1); write QAFeL's hidden-state update
# (eqs. (3)–(4)) and see why it matters.
#
# **Before:** notebooks `00_simulator` (FedBuff's schedule) and `03_qafel` (sections 1–3). **Time:** 50 minutes.
#
# **Glossary.** Buffer `Z` (the paper's `K`): updates the server waits for. `Δ_j = y_start − y_end`: client j's
# update. Staleness `τ_j`: server steps since client j started. `η_g`: the server learning rate. `bits`: bits per
# coordinate, the sign included; `s = 2^(bits−1) − 1` signed levels. `bucket`: coordinates sharing one scale.
# Hidden state `x̂`: the copy of the model that server and clients share.
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
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from afl.exercises import (check_buffered_step, check_hidden_state, check_qsgd, check_qsgd_bits,
                           mine_or_reference)

# %% [markdown]
# ## 1. The buffered server step
#
# Once `Z` updates are in, FedBuff takes one server step of rate `η_g` (`server_lr`) from them, each update weighed
# by a function `s(τ)` of its staleness (Nguyen et al. 2022, Alg. 1; the weight the QAFeL paper's Fig. 3 uses: find
# it). `deltas` holds one update `Δ_j = start − end` per row, `staleness` the `τ_j`.
#
# **Derive:** the server step should not grow with the buffer's size. Should the weighted sum be divided by `Z` or
# by the sum of the weights `Σ s(τ_j)`? Say what each choice does to a buffer of very stale updates.

# %%
def buffered_step(w, deltas, staleness, server_lr):
    """FedBuff's server step from a buffer of updates and their staleness (Nguyen et al. 2022)."""
    # your code here
    ### BEGIN SOLUTION
    weights = torch.tensor([1 / math.sqrt(1 + t) for t in staleness], dtype=deltas.dtype)
    return w - server_lr * (weights[:, None] * deltas).mean(0)
    ### END SOLUTION


# %%
check_buffered_step(buffered_step)

# %% [markdown]
# **Answer.** (Derive.) By `Z`: `w − η_g (1/Z) Σ_j Δ_j / √(1 + τ_j)`. Then a buffer of stale updates moves the model
# *less* in total, which is the point of the weights; dividing by `Σ s(τ_j)` would renormalize them away: a buffer
# of updates that are all very stale would step as far as a fresh one.

# %% [markdown]
# ## 2. QSGD, the quantizer of QAFeL's theory
#
# Send `x` (a vector) with `bits` bits per coordinate as QSGD does (the QAFeL paper's Example B.1): a scale `‖x‖₂`,
# and for each coordinate a signed level out of `s = 2^(bits − 1) − 1` (one bit carries the sign; not the `s`
# clients per step of FAVAS), reached by rounding `|x_i| s / ‖x‖₂` at random between its two neighbouring levels.
# Return what the receiver rebuilds. Draw the random numbers with `torch.rand(..., generator=generator)`.
#
# **Derive:** with which probability must `|x_i| s / ‖x‖₂` round up, so that `E[Q(x)] = x`?
#
# **Predict before you write:** why not round to the nearest level, which errs less?

# %%
def qsgd(x, bits, generator):
    """One QSGD message of x with `bits` bits per coordinate, decoded (QAFeL Example B.1)."""
    # your code here
    ### BEGIN SOLUTION
    s = 2 ** (bits - 1) - 1
    norm = x.norm()
    if norm == 0:
        return torch.zeros_like(x)
    r = x.abs() / norm * s
    low = torch.floor(r)
    up = torch.rand(x.shape, generator=generator, dtype=x.dtype) < (r - low)
    return torch.sign(x) * (low + up) * norm / s
    ### END SOLUTION


# %%
check_qsgd(qsgd)

# %% [markdown]
# **Answer.** Rounding to the nearest level is biased: `E[Q(x)] ≠ x`, and a biased error does not average out over
# many clients and rounds; QAFeL's analysis (Definition 2.1) needs `E[Q(x)] = x`. Stochastic rounding pays with
# variance instead, which averaging does reduce.

# %% [markdown]
# **Answer.** (Derive.) Write `r = |x_i| s / ‖x‖₂` between the levels `⌊r⌋` and `⌊r⌋ + 1`. Rounding up with
# probability `p` gives `E[ξ] = ⌊r⌋ + p`, which is `r` exactly when `p = r − ⌊r⌋`, the fractional part; then
# `E[‖x‖₂ / s · sign(x_i) ξ_i] = x_i`.

# %% [markdown]
# ## 3. Exact bits
#
# What must the receiver get to rebuild a message of `d` coordinates, quantized in buckets of `bucket` coordinates
# each with its own float32 scale (one bucket for the whole vector when `bucket` is None)? Write
# `qsgd_bits(d, bits, bucket)`, the message's exact size in bits.
#
# **Derive:** how many buckets, for every `d` and `bucket` (the last one may be shorter, or not)?

# %%
def qsgd_bits(d, bits, bucket):
    """Bits of one QSGD message of dimension d."""
    # your code here
    ### BEGIN SOLUTION
    scales = 1 if bucket is None else math.ceil(d / bucket)
    return bits * d + 32 * scales
    ### END SOLUTION


# %%
check_qsgd_bits(qsgd_bits)

# %% [markdown]
# **Answer.** (Derive.) `⌈d / bucket⌉` buckets: `d // bucket` full ones, plus a shorter last one only when
# `bucket` does not divide `d` (`d // bucket + 1` counts one too many when it does). So
# `bits · d + 32 ⌈d / bucket⌉` bits, or `bits · d + 32` with a single scale.

# %%
count = mine_or_reference(qsgd_bits, check_qsgd_bits)
d = 29_282                                   # QAFeL's CelebA CNN (afl's celeba-cnn, variant "fedbuff")
for bits in (8, 4, 2):
    print(f"{bits}-bit QSGD of the CelebA CNN: {count(d, bits, None) / 8:,.0f} bytes "
          f"(float32: {32 * d / 8:,.0f} bytes, {32 * d / count(d, bits, None):.1f}x smaller)")

# %% [markdown]
# ## 4. The hidden state
#
# QAFeL's server does not broadcast its model `x`: it broadcasts `q = Q(x − x̂)`, the change since the shared
# hidden state, and both sides set `x̂ ← x̂ + q`. Write `hidden_update(hidden, w_new, quantize)`.
#
# **Derive:** after one broadcast, how far is the new hidden state from the server's model, in terms of the
# quantizer's error? Why does that error not pile up from one broadcast to the next?

# %%
def hidden_update(hidden, w_new, quantize):
    """QAFeL eqs. (3)-(4): the new hidden state after one broadcast."""
    # your code here
    ### BEGIN SOLUTION
    return hidden + quantize(w_new - hidden)
    ### END SOLUTION


# %%
check_hidden_state(hidden_update)

# %% [markdown]
# **Answer.** (Derive.) With `e = x − x̂` the change to send, `x̂_new − x = x̂ + Q(e) − x = Q(e) − e`: the new
# hidden state is off by the quantizer's error on `e` alone. The next broadcast quantizes `x' − x̂_new`, which
# contains that error, so it is sent again and corrected: the errors do not add up (they shrink when
# `E‖Q(e) − e‖² ≤ (1 − δ)‖e‖²`, Definition 2.1), whereas quantizing the model itself leaves each error in place.

# %% [markdown]
# **Predict before you run:** a server model drifts slowly (a small step each round, plus noise) for 200 rounds and
# is broadcast with 4-bit QSGD. How far from the true model are the clients' copies, with the hidden state and
# when the server quantizes its model itself (QAFeL's ablation)?
#
# One subtlety first. The hidden state corrects each broadcast's error in the next one only if the quantizer
# *shrinks* errors: QAFeL's Definition 2.1 asks `E‖Q(x) − x‖² ≤ (1 − δ)‖x‖²` with `δ > 0`. L2 QSGD on a long vector
# is not such a quantizer (Example B.1: the error can reach `√(2d)/s` times `‖x‖²`, far above 1 at d = 400), so we
# quantize buckets of 8 coordinates, each with its own scale, where the bound is `min(2·8/s², 4/s) ≈ 0.33`.

# %%
update = mine_or_reference(hidden_update, check_hidden_state)
quantize_fn = mine_or_reference(qsgd, check_qsgd)
gen = torch.Generator().manual_seed(0)


def bucketed(v, bits=4, bucket=8):
    """Your QSGD on each bucket of 8 coordinates (32 extra bits of scale per bucket)."""
    return torch.cat([quantize_fn(chunk, bits, gen) for chunk in v.split(bucket)])


d, rounds = 400, 200
x = torch.randn(d, generator=gen, dtype=torch.float64)
hidden = x.clone()                                            # both sides start from the same model
errors = {"hidden state": [], "model quantized itself (ablation)": []}
for t in range(rounds):
    x = x + 0.01 * torch.randn(d, generator=gen, dtype=torch.float64) - 0.002 * x
    hidden = update(hidden, x, bucketed)
    errors["hidden state"].append(float((hidden - x).norm() / x.norm()))
    errors["model quantized itself (ablation)"].append(float((bucketed(x) - x).norm() / x.norm()))

fig, ax = plt.subplots(figsize=(7, 3.6))
ax.semilogy(errors["hidden state"], color="#d62728", label="QAFeL: hidden state x̂ (yours)")
ax.semilogy(errors["model quantized itself (ablation)"], color="#9467bd", ls="--",
            label="no hidden state: Q(x) broadcast (ablation)")
ax.set(xlabel="server step", ylabel="‖client copy − x‖ / ‖x‖",
       title="4-bit QSGD (buckets of 8) broadcasts of a drifting model")
ax.legend(fontsize=8)
plt.show()
print(f"after {rounds} steps: hidden state {errors['hidden state'][-1]:.4f}, "
      f"model quantized itself {errors['model quantized itself (ablation)'][-1]:.4f} (relative errors)")

# %% [markdown]
# **Answer.** Quantizing the model itself errs by a fixed fraction of the model's *size* at every broadcast. With
# the hidden state each broadcast quantizes only the *change* since the last one, and the error left by one
# broadcast is part of the next difference, so it is corrected instead of piling up: here the copy stays about 60
# times closer (0.25 % of the model against 17 %), at a level set by the size of one step, not of the model.

# %% [markdown]
# ## Going further
#
# 1. Run the hidden-state cell with one scale for the whole vector (`bucket=400`): the copy's error *grows* every
#    step. Why? (Hint: the error of a broadcast is quantized again with the next difference.) How many bits per
#    coordinate does each bucket size cost (`qsgd_bits`)?
# 2. In `buffered_step`, drop the staleness weights: in notebook `03_qafel` which runs get worse?
# 3. QAFeL's CelebA tables use FLSim's deterministic 8/4/2-bit scalar quantizer, not QSGD
#    (`afl.compress.ScalarQuantizer`): which of the three checks above would it fail, and why is that fine for the
#    hidden state?
