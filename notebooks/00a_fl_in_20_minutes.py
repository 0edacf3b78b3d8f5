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
# # 00a · Federated learning in 20 minutes: FedAvg, local steps and client drift
#
# In **federated learning** the data stays where it was made: on `n` clients (phones, hospitals, laptops). A server
# holds the model `x` and wants to minimise the clients' average loss `f(x) = (1/n) Σᵢ fᵢ(x)`, but it never sees
# the data, only what clients send back. Sending a model is slow and costly, so **FedAvg** (McMahan et al., 2017)
# lets each client take **`K` local steps** of gradient descent on its own loss before it answers; the server
# averages the answers, and that is one **round**.
#
# **The question of this notebook:** does taking `K` steps before averaging still minimise `f`? We answer it on a
# toy problem small enough to see whole, where every number is exact: ten clients, each with a quadratic loss in
# two dimensions.
#
# **Learning goals.** Write what a FedAvg round does; explain why `K > 1` saves rounds, and why, when the clients'
# losses differ in *shape*, it settles at the wrong point (**client drift**); say what the knobs `K`, the step
# size, the clients per round `s` and gradient noise change. **Time:** 20 minutes (every cell answers in a second or
# two). **Needs:** gradient descent; NumPy; a 2 × 2 matrix. **Next:** `00_simulator` (course map:
# `notebooks/README.md`).
#
# **Notation in this notebook.** `n` clients, `s` of them per round; `K` local steps per round; `lr` (η) the
# step size; client i's loss `fᵢ(x) = ½ (x − cᵢ)ᵀ Aᵢ (x − cᵢ)`: its own minimiser `cᵢ`, its curvature `Aᵢ`; `x*`
# the minimiser of `f`. (`afl.glossary` lists every symbol of the course and what it means in each notebook.)

# %%
try:                                        # without afl: how to get it, instead of an ImportError
    import afl  # noqa: F401
except ImportError:
    raise SystemExit("afl is not installed in this kernel: `pip install afl-*.whl` (a wheel from `make wheel`) or "
                     "`pip install -e .` in the afl repository; data: `afl data download mnist` (checksummed) or "
                     "AFL_DATA=/path/to/data") from None

# %%
import inspect

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from afl.panels import panel
from afl.runtime import set_threads
from afl.toy import fedavg, fedavg_fixed_point, local_steps, max_stable_lr, quadratic_clients

threads = set_threads(load_aware=True, say=True)   # the cores this kernel may use, less those others keep busy

# %% [markdown]
# ## 1. Ten clients, ten different losses
#
# Each client's loss is a bowl: its minimiser `cᵢ` (where that client alone would put the model) and its
# curvature `Aᵢ` (how steep the bowl is in each direction; here one direction is 10 times steeper than the other,
# turned at random). The federation's loss `f` is their average; its minimiser `x*` weighs each `cᵢ` by its
# curvature: `x* = (Σ Aᵢ)⁻¹ Σ Aᵢ cᵢ`, not the plain mean of the `cᵢ`.

# %%
clients = quadratic_clients(n=10, dim=2, spread=1.0, curvature=10.0, seed=0)
x_star = clients.optimum()
print(f"x* = {np.round(x_star, 3)}, the mean of the clients' own minimisers = {np.round(clients.c.mean(0), 3)}")


def contours(ax, q, lim=2.6):
    """The federation's loss f as contour lines, each client's minimiser and the level set fᵢ = 0.5 around it."""
    g = np.linspace(-lim, lim, 161)
    X, Y = np.meshgrid(g, g)
    pts = np.stack([X.ravel(), Y.ravel()], 1)
    F = np.array([q.loss(p) for p in pts]).reshape(X.shape)
    ax.contour(X, Y, F, levels=np.quantile(F, [0.01, 0.05, 0.15, 0.3, 0.5, 0.7]), colors="lightgrey",
               linewidths=0.8)
    t = np.linspace(0, 2 * np.pi, 100)
    for i in range(q.n):                       # fᵢ(x) = 0.5: the ellipse (x − cᵢ)ᵀ Aᵢ (x − cᵢ) = 1
        w, V = np.linalg.eigh(q.A[i])
        ellipse = q.c[i][:, None] + V @ (np.stack([np.cos(t), np.sin(t)]) / np.sqrt(w)[:, None])
        ax.plot(*ellipse, color="tab:purple", lw=0.6, alpha=0.5)
    ax.scatter(*q.c.T, s=18, color="tab:purple", label="a client's own minimiser cᵢ (ellipse: fᵢ = ½)")
    ax.scatter(*q.optimum(), marker="*", s=220, color="black", zorder=5, label="x*, the federation's minimiser")
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="x₁ (model coordinate)",
           ylabel="x₂ (model coordinate)")


fig, ax = plt.subplots(figsize=(6, 6))
contours(ax, clients)
ax.set_title("Ten clients' losses and the federation's (grey contours of f)")
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %% [markdown]
# What to notice: the clients disagree. Each would put the model somewhere else, and their bowls are turned in
# different directions. The server wants the black star.

# %% [markdown]
# ## 2. FedAvg, all of it
#
# Here is the whole algorithm as afl's toy module writes it (`afl.toy`): a client's local steps, then the rounds.

# %%
print(inspect.getsource(local_steps))
print(inspect.getsource(fedavg))

# %% [markdown]
# **Predict before you run:** every client takes part, no noise, step size 0.05. With `K = 1` FedAvg is plain
# gradient descent on `f` (the mean of the clients' gradients is `f`'s gradient). With `K = 20` local steps a
# round, where does it end: at `x*`, or somewhere else?

# %%
lr = 0.05
print(f"the largest stable step size (2 / the steepest curvature): {max_stable_lr(clients):.3f}")
fig, ax = plt.subplots(figsize=(6, 6))
contours(ax, clients)
x0 = np.array([-2.2, 2.2])
zoom = ax.inset_axes([0.62, 0.62, 0.36, 0.36])          # the last rounds, around x*: the fixed points sit close
fixed_points = []
for K, color in ((1, "tab:grey"), (5, "tab:blue"), (20, "tab:red")):
    path = fedavg(clients, rounds=60, K=K, lr=lr, x0=x0)
    fixed = fedavg_fixed_point(clients, K, lr)
    fixed_points.append(fixed)
    for axis in (ax, zoom):
        axis.plot(*path.T, ".-", color=color, ms=3, lw=1, label=f"FedAvg, K = {K}: 60 rounds")
        axis.scatter(*fixed, marker="X", s=90, color=color, edgecolor="white", zorder=6)
    print(f"K = {K:>2}: after 60 rounds {np.round(path[-1], 3)}; the fixed point {np.round(fixed, 3)}, "
          f"{np.linalg.norm(fixed - x_star):.3f} from x*")
reach = max(np.abs(np.array(fixed_points) - x_star).max(), 0.05) * 1.6
zoom.scatter(*x_star, marker="*", s=160, color="black", zorder=7)
zoom.set(xlim=(x_star[0] - reach, x_star[0] + reach), ylim=(x_star[1] - reach, x_star[1] + reach))
zoom.text(0.04, 0.04, f"zoom: ±{reach:.2f} around x*", transform=zoom.transAxes, fontsize=8)
zoom.tick_params(labelsize=7)
ax.indicate_inset_zoom(zoom, edgecolor="0.4")
ax.set_title("FedAvg's server model, round by round (X: where it settles)")
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %% [markdown]
# <details><summary><b>Answer</b> (predict first, then open)</summary>
#
# With `K = 1` it walks to `x*`. With `K = 5` and `K = 20` it walks faster (more progress per round:
# that is why FedAvg takes local steps), but it **settles beside `x*`**, and the farther the more local steps. The
# X marks are computed, not simulated: on a quadratic, `K` steps of client i from `x` land exactly at
# `cᵢ + Mᵢᴷ (x − cᵢ)` with `Mᵢ = I − lr·Aᵢ`, so FedAvg's fixed point solves `x = meanᵢ [cᵢ + Mᵢᴷ (x − cᵢ)]`
# (`afl.toy.fedavg_fixed_point`), and the simulated rounds end on it.
#
# </details>

# %% [markdown]
# ## 3. Client drift: why the fixed point moves
#
# During its `K` steps a client follows *its own* gradient, so it drifts towards *its own* minimiser `cᵢ`, and
# steep clients drift faster than flat ones. The average of the drifted models is not a step towards `x*` any
# more. Two limits make it clear:
#
# - `K = 1`: no drift, the average gradient is `f`'s;
# - `K → ∞`: each client reaches `cᵢ`, and FedAvg returns the plain mean of the `cᵢ`, which ignores the curvatures.
#
# **Predict before you run:** if every client had the *same* curvature (`Aᵢ = I`) but kept its own minimiser, would
# FedAvg still drift?

# %%
Ks = np.unique(np.geomspace(1, 400, 40).astype(int))
fig, ax = plt.subplots(figsize=(7, 4))
for curvature, color in ((1.0, "tab:green"), (3.0, "tab:blue"), (10.0, "tab:red")):
    q = quadratic_clients(n=10, dim=2, spread=1.0, curvature=curvature, seed=0)
    drift = [np.linalg.norm(fedavg_fixed_point(q, int(K), lr) - q.optimum()) for K in Ks]
    same = " (every Aᵢ = I)" if curvature == 1 else ""
    ax.plot(Ks, drift, color=color, label=f"curvature ratio {curvature:g}{same}")
    ax.axhline(np.linalg.norm(q.c.mean(0) - q.optimum()), color=color, ls=":", lw=0.8)
ax.set_xscale("log")
ax.set(xlabel="local steps per round, K", ylabel="‖fixed point − x*‖",
       title="Client drift: how far FedAvg settles from x* (dotted: the mean of the cᵢ, K → ∞)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# <details><summary><b>Answer</b> (predict first, then open)</summary>
#
# No: with equal curvatures the green line stays at zero for every `K`. Different minimisers alone do
# not bias FedAvg on quadratics; what biases it is clients whose losses have different *shapes*, so that `K` local
# steps move them by different amounts. In deep learning every client's loss has its own shape, so drift is the
# rule; and it grows with `K` until it reaches the dotted line, the plain mean of the clients' own solutions.
#
# </details>

# %% [markdown]
# ## 4. Rounds against accuracy: the trade-off
#
# Real clients compute *stochastic* gradients (a mini-batch, not all their data), and often only `s` of the `n`
# clients take part in a round. Both add noise. The picture follows the loss gap `f(x) − f(x*)` round by round for
# several `K`, every client taking part, with gradient noise of standard deviation 1 (mean of 10 seeds).

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for K, color in ((1, "tab:grey"), (5, "tab:blue"), (20, "tab:red"), (50, "tab:purple")):
    gaps = np.array([[clients.gap(x) for x in fedavg(clients, rounds=80, K=K, lr=0.02, noise=1.0, x0=x0, seed=seed)]
                     for seed in range(10)])
    ax.plot(gaps.mean(0), color=color, label=f"K = {K}")
ax.set_yscale("log")
ax.set(xlabel="round (one exchange of models)", ylabel="f(x) − f(x*)  (mean of 10 seeds)",
       title="More local steps: fewer rounds to get close, a higher floor (lr 0.02, every client, noise 1)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# What to notice: `K = 1` is slow but keeps going down; `K = 5`, `20` and `50` get close in a few rounds, then
# stop at a floor that rises with `K`: the drift of section 3 (with `K = 1` the noise alone leaves far less).
# Sampling only some clients per round raises every floor further (try `s` in the knobs below). In federated
# learning rounds are the expensive part, so `K > 1` is worth it, and much of the research this course follows is
# about lowering that floor: SCAFFOLD corrects each client's drift; **GHBM** (notebook 02) uses a momentum built
# from past rounds, which carries the clients a round did not sample.

# %% [markdown]
# ## 5. Your turn: the knobs
#
# Move the knobs; the picture redraws in about a second. Try: `K = 1` against `K = 50`; curvature ratio 1 (no
# drift); a step size close to the stable limit 0.2; one client per round; no noise against noise 2.

# %%
def explore(K=20, lr=0.05, curvature=10.0, s=10, noise=0.0):
    q = quadratic_clients(n=10, dim=2, spread=1.0, curvature=curvature, seed=0)
    path = fedavg(q, rounds=60, K=K, lr=lr, s=s, noise=noise, x0=x0, seed=0)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    contours(ax1, q)
    ax1.plot(*path.T, ".-", color="tab:red", ms=3, lw=1, label=f"FedAvg, K = {K}, s = {s}")
    if s == q.n and noise == 0:
        ax1.scatter(*fedavg_fixed_point(q, K, lr), marker="X", s=90, color="tab:red", edgecolor="white", zorder=6,
                    label="its fixed point")
    ax1.set_title("the server model, 60 rounds")
    ax1.legend(fontsize=8, loc="lower left")
    ax2.plot([q.gap(x) for x in path], color="tab:red")
    ax2.set_yscale("log")
    ax2.set(xlabel="round", ylabel="f(x) − f(x*)", title=f"the loss gap (largest stable lr: {max_stable_lr(q):.3f})")
    plt.show()


knobs = {"K": widgets.IntSlider(value=20, min=1, max=100, description="K", continuous_update=False),
         "lr": widgets.FloatSlider(value=0.05, min=0.005, max=0.19, step=0.005, description="lr",
                                   continuous_update=False),
         "curvature": widgets.FloatSlider(value=10.0, min=1.0, max=10.0, step=0.5, description="curvature",
                                          continuous_update=False),
         "s": widgets.IntSlider(value=10, min=1, max=10, description="s of 10", continuous_update=False),
         "noise": widgets.FloatSlider(value=0.0, min=0.0, max=2.0, step=0.25, description="noise",
                                      continuous_update=False)}
panel(explore, knobs, rows=[list(knobs)[:3], list(knobs)[3:]])

# %% [markdown]
# ## Check yourself
#
# A few questions on this notebook. Fill `answers` (a letter for a multiple choice, else a number) and run the
# check: it says why where an answer is off, and records the verdict like the exercises' checks.

# %%
from afl.exercises import QUIZZES

quiz = QUIZZES["knowledge_00a"]
quiz.show()

# %%
answers = quiz.blank()            # e.g. answers["q1"] = "a"
quiz(answers)

# %% [markdown]
# > **What to remember.**
# > - FedAvg with `K` local steps settles at a fixed point beside `x*`: client drift, set by how differently the clients' losses are shaped.
# > - More local steps buy progress per round (fewer messages) and pay with a floor that grows with `K`.
# > - Drift is not about different minimisers alone: equal curvatures do not drift.

# %% [markdown]
# ## Where this goes
#
# Everything here was synchronous: the server waited for every client of the round. Real clients differ in speed
# as much as in data, and the rest of the course is about what that changes:
#
# - `00_simulator`: who trains when, when clients have different speeds; why waiting for the slowest hurts;
# - `01_favas`: a server that does not wait; fast clients then do more local steps than slow ones, a drift of its
#   own, which FAVAS corrects by reweighting;
# - `02_ghbm`: momentum from past rounds against drift when few clients take part;
# - `03_qafel`: shorter messages (quantization) without losing accuracy;
# - `04_fedast`: one pool of clients training several models at once.
#
# **Exercises.** (1) Show that `K = 1` with every client is gradient descent on `f`. (2) For `n = 2` clients in one
# dimension (`A₁ = a`, `A₂ = b`), compute FedAvg's fixed point for `K = 2` by hand and compare it with `x*`; when do
# they agree? (3) In section 4, what does halving the step size do to the floor and to the speed?
#
# **References.** H. B. McMahan et al., *Communication-Efficient Learning of Deep Networks from Decentralized
# Data*, AISTATS 2017 (FedAvg). S. P. Karimireddy et al., *SCAFFOLD: Stochastic Controlled Averaging for Federated
# Learning*, ICML 2020 (client drift, Sec. 3). J. Wang et al., *A Field Guide to Federated Optimization*, 2021.
