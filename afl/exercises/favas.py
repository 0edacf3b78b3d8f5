"""Exercises on FAVAS (notebook 01; Leconte et al. 2023, eq. (1), Algorithm 1 and Sec. 4).

* :data:`check_alpha`: ``alpha(pmf, K, mode, e)``, the reweighting of eq. (1) from the pmf of E
  (``pmf[e] = P(E = e)``, the support may exceed K): ``E[E ∧ K]`` or ``P(E > 0) (e ∧ K)``;
* :data:`check_unbiased_upload`: ``unbiased_upload(w_init, w, alpha)`` = ``w_init + (w - w_init) / alpha``
  (Alg. 1, l. 24), and ``w_init`` when ``alpha = 0`` (a client without progress);
* :data:`check_server_average`: ``server_average(w_prev, uploads)`` = ``(w_prev + sum_i upload_i) / (s + 1)``.
"""
from __future__ import annotations

import numpy as np
import torch

from ..theory.favas import alpha as reference_alpha
from .checking import Exercise, Mistake


def _pmf(rng) -> list[float]:
    p = rng.dirichlet(np.full(int(rng.integers(3, 12)), 0.7)) + 0.01     # some mass everywhere, E = 0 included
    p = np.round(p / p.sum(), 4)
    p[0] = 1 - p[1:].sum()                                                 # short to read, and sums to 1
    return [float(x) for x in p]


def _alpha_cases(rng):
    pmf = _pmf(rng)
    top = len(pmf) - 1
    yield {"pmf": pmf, "K": 1, "mode": "deterministic", "e": None}             # the cap binds: mass beyond K = 1
    yield {"pmf": pmf, "K": top + 2, "mode": "deterministic", "e": None}       # K beyond the support: no cap
    yield {"pmf": pmf, "K": 2, "mode": "stochastic", "e": top + 2}             # more steps observed than K
    yield {"pmf": pmf, "K": 2, "mode": "stochastic", "e": 0}                   # no progress
    yield {"pmf": pmf, "K": top, "mode": "stochastic", "e": 1}
    for i in range(10):
        pmf = _pmf(rng)
        K = int(rng.integers(1, len(pmf)))
        mode = ("deterministic", "stochastic")[i % 2]
        e = int(rng.integers(1, len(pmf) + 2)) if mode == "stochastic" else None
        yield {"pmf": pmf, "K": K, "mode": mode, "e": e}


def _mean(pmf, cap=None):
    e = np.arange(len(pmf))
    return float(np.dot(pmf, e if cap is None else np.minimum(e, cap)))


def _uncapped(pmf, K, mode, e=None):
    return _mean(pmf) if mode == "deterministic" else (1 - pmf[0]) * e


def _without_p(pmf, K, mode, e=None):
    return _mean(pmf, K) if mode == "deterministic" else min(e, K)


def _expected_count(pmf, K, mode, e=None):
    return _mean(pmf, K) if mode == "deterministic" else (1 - pmf[0]) * _mean(pmf, K)


check_alpha = Exercise(
    name="check_alpha", signature="alpha(pmf, K, mode, e=None)", source="FAVAS's α (Sec. 4)",
    implementations=("afl.theory.favas:alpha",),
    reference=lambda pmf, K, mode, e=None: reference_alpha(pmf, K, mode, e), cases=_alpha_cases,
    idea="FAVAS eq. (1) and Sec. 4: alpha is what makes an upload's expected progress the same for every client; a"
         " client never does more than K steps.",
    hint="deterministic: alpha = E[E ∧ K] = sum_e min(e, K) pmf[e]; stochastic: alpha = P(E > 0) min(e, K) for "
         "the observed e.",
    mistakes=(
        Mistake(_uncapped, "forgetting the cap at K: a client stops after K steps, so use min(e, K) everywhere."),
        Mistake(_without_p, "the stochastic alpha is P(E > 0) times (e ∧ K): without the factor P(E > 0) the "
                            "uploads are not unbiased (E[1(E > 0) / P(E > 0)] = 1 needs it)."),
        Mistake(_expected_count, "the stochastic alpha uses the observed count e of this upload, not its "
                                 "expectation: alpha = P(E > 0) min(e, K)."),
    ))


def _vectors(rng, d):
    return (torch.tensor(rng.normal(size=d)), torch.tensor(rng.normal(size=d)))


def _upload_cases(rng):
    for alpha in (0.0, 1.0):                                  # no progress; one step's worth
        w_init, w = _vectors(rng, 3)
        yield {"w_init": w_init, "w": w, "alpha": alpha}
    for i in range(8):
        w_init, w = _vectors(rng, int(rng.integers(2, 7)))
        yield {"w_init": w_init, "w": w, "alpha": 0.0 if i == 5 else round(float(rng.uniform(0.2, 9)), 3)}


def _upload(w_init, w, alpha):
    return w_init.clone() if alpha == 0 else w_init + (w - w_init) / alpha


check_unbiased_upload = Exercise(
    name="check_unbiased_upload", signature="unbiased_upload(w_init, w, alpha)", reference=_upload,
    cases=_upload_cases, source="FAVAS Algorithm 1, line 24",
    idea="Algorithm 1, line 24: only the progress made since w_init is reweighted; think about a client that made "
         "none.",
    hint="reweight the progress only: w_init + (w - w_init) / alpha; a client with alpha = 0 sends w_init.",
    mistakes=(
        Mistake(lambda w_init, w, alpha: w / alpha if alpha else w_init,
                "divide the progress w - w_init by alpha, not the model w itself."),
        Mistake(lambda w_init, w, alpha: (w - w_init) / alpha if alpha else 0 * w,
                "(w - w_init) / alpha is the reweighted progress; the upload is a model: add it to w_init."),
        Mistake(lambda w_init, w, alpha: w_init + (w - w_init) * alpha,
                "multiply by 1 / alpha: a fast client (large alpha) must count less, not more."),
        Mistake(lambda w_init, w, alpha: w_init + (w - w_init) / alpha,
                "with alpha = 0 (no progress, E = 0) there is nothing to send: return w_init (0/0 := 0), never "
                "an infinity."),
    ))


def _average_cases(rng):
    yield {"w_prev": torch.tensor(rng.normal(size=3)), "uploads": torch.tensor(rng.normal(size=(1, 3)))}   # s = 1
    for _ in range(8):
        s, d = int(rng.integers(1, 6)), int(rng.integers(2, 6))
        yield {"w_prev": torch.tensor(rng.normal(size=d)), "uploads": torch.tensor(rng.normal(size=(s, d)))}


check_server_average = Exercise(
    name="check_server_average", signature="server_average(w_prev, uploads)",
    reference=lambda w_prev, uploads: (w_prev + uploads.sum(0)) / (len(uploads) + 1), cases=_average_cases,
    source="FAVAS Sec. 4's server average",
    idea="FAVAS Sec. 4: the server averages the contacted clients' uploads together with its own model.",
    hint="the server's own model counts as one of s + 1: (w_prev + sum of the s uploads) / (s + 1).",
    mistakes=(
        Mistake(lambda w_prev, uploads: (w_prev + uploads.sum(0)) / len(uploads),
                "divide by s + 1, not s: s uploads plus the server's own model are averaged."),
        Mistake(lambda w_prev, uploads: uploads.mean(0),
                "the server's previous model is part of the average: (w_prev + sum of uploads) / (s + 1)."),
        Mistake(lambda w_prev, uploads: (w_prev + uploads.mean(0)) / 2,
                "each upload weighs as much as the server model: (w_prev + sum) / (s + 1), not (w_prev + mean) / 2."),
    ))

__all__ = ["check_alpha", "check_unbiased_upload", "check_server_average"]
