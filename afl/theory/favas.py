"""FAVAS theory: reweighting constants, Lemma 2, Theorem 3, Corollary 4 and Table 1.

Paper: "FAVAS: Federated AVeraging with ASynchronous clients" (anonymous NeurIPS-style submission; arXiv
2305.16099 as "FAVANO"), ``shared/papers/001_*``. Notation follows the paper:

- ``n`` clients, ``s`` clients contacted per server step, at most ``K`` local steps between two contacts;
- ``E^i`` (``E_{t+1}^i``) is the random number of local steps client ``i`` could take before the server request;
  ``E ∧ K = min(E, K)`` is what it actually did (it stops at ``K`` and waits);
- the reweighting of eq. (1)::

      alpha^i = P(E^i > 0) (E^i ∧ K)     stochastic version
      alpha^i = E[E^i ∧ K]               deterministic version

  and the unbiased progress ``ȟ^i = (1/alpha^i) Σ_{q=1}^{E^i ∧ K} h̃^i_q`` (Sec. 4, line 182). Unbiasedness: when
  every local update has the same mean ``h``, ``E[ȟ^i] = h`` because ``E[(E∧K)/E[E∧K]] = 1`` (deterministic) and
  ``E[1(E>0)/P(E>0)] = 1`` (stochastic; a client with ``E = 0`` sends no progress, ``0/0 := 0``);
- ``L`` smoothness (A2), ``sigma2`` = σ² (A3), ``G2`` = G² and ``B2`` = B² (A4), ``F = f(μ_0) - f_*``.

Distributions of ``E`` are given as probability mass functions: ``pmf[e] = P(E = e)`` for ``e = 0, 1, 2, ...``;
the support may exceed ``K`` (``∧K`` is applied here). :func:`afl.sim.steps_completed_pmf` and :func:`afl.sim.contact_steps_pmf`
build such pmfs from a client's step-time model and the server clock (exactly for exponential step times,
the public QuAFL simulator's model that FAVAS reuses: fast clients mean step time 2, slow 8).

Time per server step (Table 1's ``C``): :func:`c_server_clock` (QuAFL, FAVAS) and :func:`c_fedavg` (FedAvg waits
for the slowest of its ``s`` clients) follow the paper's Sec. 5 description and the QuAFL simulator; FedBuff's and
AsyncSGD's ``C`` depend on the queueing regime (the paper's App. C.2, not in our copy) and are left as inputs.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from afl.errors import ParameterError, check, check_choice, check_int, check_real

__all__ = [
    "MODES",
    "truncated_moments",
    "alpha",
    "reweight_constants",
    "kappa",
    "max_step_size",
    "theorem3_terms",
    "theorem3_bound",
    "corollary4_steps",
    "table1_fedavg",
    "table1_fedbuff",
    "table1_asyncsgd",
    "table1_quafl",
    "table1_favas",
    "TABLE1",
    "c_server_clock",
    "c_fedavg",
]

MODES = ("stochastic", "deterministic")
PMF_TOL = 1e-9


# --------------------------------------------------------------------------------------------- argument checks
def _floats(name: str, value, allowed: str) -> np.ndarray:
    """``value`` as a float array, or :class:`ParameterError` when numpy cannot read it as numbers."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(name, value, allowed) from None


def _pmf(pmf, name: str = "pmf") -> np.ndarray:
    """A 1-D array of finite non-negative numbers summing to 1 (within ``PMF_TOL``)."""
    allowed = f"a 1-D sequence of non-negative probabilities P(E=0), P(E=1), ... summing to 1 (tolerance {PMF_TOL:g})"
    p = _floats(name, pmf, allowed)
    check(p.ndim == 1 and p.size >= 1, name, pmf, allowed)
    check(bool(np.all(np.isfinite(p))) and bool(np.all(p >= 0)), name, pmf, allowed)
    check(abs(float(p.sum()) - 1.0) <= PMF_TOL, name, pmf, allowed)
    return p


def _a_vector(a, n: int) -> np.ndarray:
    allowed = f"a 1-D sequence of {n} finite positive numbers (a^1..a^n of Theorem 3)"
    arr = _floats("a", a, allowed)
    check(arr.ndim == 1 and arr.size == n, "a", a, allowed)
    check(bool(np.all(np.isfinite(arr))) and bool(np.all(arr > 0)), "a", a, allowed)
    return arr


def _n_s(n, s) -> tuple[int, int]:
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n)
    return n, s


def _assumptions(L, F, sigma2, G2, B2, b) -> tuple[float, ...]:
    """Theorem 3's constants: ``L > 0`` (A2), ``F, σ², G² >= 0`` (A3, A4), ``B² >= 1`` (A4) and ``b > 0``."""
    return (check_real("L", L, 0.0, strict_low=True), check_real("F", F, 0.0), check_real("sigma2", sigma2, 0.0),
            check_real("G2", G2, 0.0), check_real("B2", B2, 1.0), check_real("b", b, 0.0, strict_low=True))


# --------------------------------------------------------------------------------------------- reweighting
def truncated_moments(pmf, K: int) -> dict:
    """Moments of ``E ∧ K`` used by eq. (1) and Theorem 3.

    Returns ``{"p_pos": P(E > 0), "m1": E[E∧K], "m2": E[(E∧K)^2], "inv": E[1(E>0) / (E∧K)]}``.
    """
    K = check_int("K", K, 1)
    p = _pmf(pmf)
    e = np.arange(p.size)
    x = np.minimum(e, K).astype(float)
    p_pos = float(p[1:].sum())
    m1 = float(np.dot(p, x))
    m2 = float(np.dot(p, x * x))
    inv = float(np.dot(p[1:], 1.0 / x[1:])) if p.size > 1 else 0.0
    return {"p_pos": p_pos, "m1": m1, "m2": m2, "inv": inv}


def alpha(pmf, K: int, mode: str, e: int | None = None) -> float:
    """The FAVAS reweighting α^i of eq. (1) (also Algorithm 1, line 23).

    - ``mode="deterministic"``: ``α = E[E ∧ K]`` (``e`` is ignored; it may be given).
    - ``mode="stochastic"``: ``α = P(E > 0) · (e ∧ K)`` for the observed number of local steps ``e`` (required).
      For ``e = 0`` this is 0: the client has no progress to send and its contribution is ``w_init``
      (the convention ``0/0 = 0`` that makes ``E[1(E>0)/P(E>0)] = 1``).

    Raises :class:`ParameterError` (naming ``pmf``) when ``P(E > 0) = 0``: no reweighting can make such a client
    contribute.
    """
    check_choice("mode", mode, MODES)
    mom = truncated_moments(pmf, K)
    check(mom["p_pos"] > 0, "pmf", pmf, "a distribution with P(E > 0) > 0 (alpha would be 0)")
    if mode == "deterministic":
        if e is not None:
            check_int("e", e, 0)
        return mom["m1"]
    check(e is not None, "e", e, "the observed number of local steps (an integer >= 0) for mode='stochastic'")
    e = check_int("e", e, 0)
    return mom["p_pos"] * min(e, int(K))


def reweight_constants(pmfs: Sequence, K: int, mode: str) -> dict:
    """Theorem 3's constants ``a^i`` (one per client) and ``b``.

    Stochastic version, ``α^i = P(E^i>0)(E^i ∧ K)``::

        a^i = (1 / P(E^i>0)) · ( P(E^i>0) / K^2 + E[ 1(E^i>0) / (E^i ∧ K) ] ),     b = max_i 1 / P(E^i>0)

    Deterministic version, ``α^i = E[E^i ∧ K]``::

        a^i = 1 / E[E^i∧K] + E[(E^i∧K)^2] / (K^2 E[E^i∧K]),                      b = max_i E[(E^i∧K)^2] / E[E^i∧K]

    ``pmfs[i][e] = P(E^i = e)``. Returns ``{"a": np.ndarray of shape (n,), "b": float}``.
    Example: a point mass at ``E = K`` gives ``a^i = 2/K, b = K`` (deterministic) and ``a^i = 1/K^2 + 1/K, b = 1``
    (stochastic).
    """
    check_choice("mode", mode, MODES)
    K = check_int("K", K, 1)
    check(isinstance(pmfs, (list, tuple, np.ndarray)) and len(pmfs) >= 1, "pmfs", pmfs,
          "a non-empty sequence of per-client pmfs")
    a = np.empty(len(pmfs))
    b_terms = np.empty(len(pmfs))
    for i, pmf in enumerate(pmfs):
        name = f"pmfs[{i}]"
        p = _pmf(pmf, name)
        mom = truncated_moments(p, K)
        check(mom["p_pos"] > 0, name, pmf,
              "a distribution with P(E > 0) > 0 (this client would never make progress; alpha^i = 0)")
        if mode == "stochastic":
            a[i] = (mom["p_pos"] / K**2 + mom["inv"]) / mom["p_pos"]
            b_terms[i] = 1.0 / mom["p_pos"]
        else:
            a[i] = 1.0 / mom["m1"] + mom["m2"] / (K**2 * mom["m1"])
            b_terms[i] = mom["m2"] / mom["m1"]
    return {"a": a, "b": float(b_terms.max())}


# --------------------------------------------------------------------------------------------- Lemma 2
def kappa(n: int, s: int) -> float:
    """Lemma 2's contraction of the potential ``Φ_t``: ``κ = (1/n) · s(n−s) / (2(n+1)(s+1))``, ``1 <= s <= n``."""
    n, s = _n_s(n, s)
    return s * (n - s) / (2.0 * (n + 1) * (s + 1)) / n


# --------------------------------------------------------------------------------------------- Theorem 3
def max_step_size(s: int, K: int, L: float, B2: float, b: float) -> float:
    """Theorem 3's step-size condition: ``η <= 1 / (20 B² b K L s)``."""
    s = check_int("s", s, 1)
    K = check_int("K", K, 1)
    L = check_real("L", L, 0.0, strict_low=True)
    B2 = check_real("B2", B2, 1.0)
    b = check_real("b", b, 0.0, strict_low=True)
    return 1.0 / (20.0 * B2 * b * K * L * s)


def theorem3_terms(T: int, eta: float, n: int, s: int, K: int, L: float, F: float, sigma2: float, G2: float,
                   B2: float, a, b: float, check_step_size: bool = True) -> dict:
    """The three terms of Theorem 3's right-hand side (bound on ``(1/T) Σ_t E||∇f(μ_t)||²``)::

        2(n+1)F / (T s η)  +  (L s / (n+1)) (σ²/n Σ_i a^i + 8 G² b) η  +  L² s² (720 σ²/n Σ_i a^i + 5600 b G²) η²

    Returns ``{"initial", "linear", "quadratic", "total", "eta_max", "step_size_ok"}``.
    The theorem assumes ``η <= 1/(20 B² b K L s)`` (``eta_max``). With ``check_step_size=True`` (default) a larger
    ``eta`` raises :class:`ParameterError` naming ``eta``; with ``False`` the formula is evaluated anyway and
    ``step_size_ok`` tells whether the theorem applies.
    """
    T = check_int("T", T, 1)
    n, s = _n_s(n, s)
    K = check_int("K", K, 1)
    eta = check_real("eta", eta, 0.0, strict_low=True)
    L, F, sigma2, G2, B2, b = _assumptions(L, F, sigma2, G2, B2, b)
    a = _a_vector(a, n)
    eta_max = max_step_size(s, K, L, B2, b)
    ok = eta <= eta_max * (1 + 1e-12)
    if check_step_size:
        check(ok, "eta", eta, f"0 < eta <= 1/(20 B^2 b K L s) = {eta_max:.6g} (Theorem 3's condition)")
    a_mean = float(a.mean())
    initial = 2.0 * (n + 1) * F / (T * s * eta)
    linear = L * s / (n + 1) * (sigma2 * a_mean + 8.0 * G2 * b) * eta
    quadratic = L**2 * s**2 * (720.0 * sigma2 * a_mean + 5600.0 * b * G2) * eta**2
    return {"initial": initial, "linear": linear, "quadratic": quadratic, "total": initial + linear + quadratic,
            "eta_max": eta_max, "step_size_ok": bool(ok)}


def theorem3_bound(T: int, eta: float, n: int, s: int, K: int, L: float, F: float, sigma2: float, G2: float,
                   B2: float, a, b: float, check_step_size: bool = True) -> float:
    """Theorem 3's right-hand side (see :func:`theorem3_terms`); raises on ``η > 1/(20 B² b K L s)`` by default."""
    return theorem3_terms(T, eta, n, s, K, L, F, sigma2, G2, B2, a, b, check_step_size)["total"]


# --------------------------------------------------------------------------------------------- Corollary 4
def corollary4_steps(eps: float, n: int, s: int, K: int, L: float, F: float, sigma2: float, G2: float, B2: float,
                     a, b: float) -> float:
    """Corollary 4: server steps for FAVAS to reach ε precision, up to numerical constants, as printed::

        F L (σ²/n Σ a^i + 8 G² b) / ε²
          + (n+1) ( F L² (K² σ² + L² K² G² + s² σ²/n Σ a^i + s² G² b)^{1/2} / (s ε^{3/2})  +  F B² K L b / ε )
    """
    eps = check_real("eps", eps, 0.0, strict_low=True)
    n, s = _n_s(n, s)
    K = check_int("K", K, 1)
    L, F, sigma2, G2, B2, b = _assumptions(L, F, sigma2, G2, B2, b)
    A = float(_a_vector(a, n).mean())
    first = F * L * (sigma2 * A + 8.0 * G2 * b) / eps**2
    root = math.sqrt(K**2 * sigma2 + L**2 * K**2 * G2 + s**2 * sigma2 * A + s**2 * G2 * b)
    second = F * L**2 * root / (s * eps**1.5)
    third = F * B2 * K * L * b / eps
    return first + (n + 1) * (second + third)


# --------------------------------------------------------------------------------------------- Table 1
def _common(eps, F, L, sigma2, G2, C):
    return (check_real("eps", eps, 0.0, strict_low=True), check_real("F", F, 0.0),
            check_real("L", L, 0.0, strict_low=True), check_real("sigma2", sigma2, 0.0), check_real("G2", G2, 0.0),
            check_real("C", C, 0.0, strict_low=True))


def table1_fedavg(eps: float, F: float, L: float, sigma2: float, G2: float, B2: float, K: int, s: int, n: int, *,
                  C: float = 1.0, a_fedavg: float | None = None) -> float:
    """Table 1, FedAvg row (units of time to reach ε; constants dropped)::

        ( (F L σ² + (1 − a_i/n) K G²) / (s K) · ε^-2  +  F L^{1/2} G ε^-3/2  +  L F B² ε^-1 ) · C_FedAvg

    Interpretation of ``(1 − a_i/n)``: in the FedAvg row ``a_i`` cannot be FAVAS's ``a^i`` (FedAvg has no
    reweighting, and a per-client index would be unbound); the row is the FedAvg bound of SCAFFOLD
    (Karimireddy et al. 2020, Thm. I), whose heterogeneity term carries the client-sampling factor
    ``(1 − S/N)``. We therefore read ``a_i`` as the number of sampled clients ``s``: default ``a_fedavg=None``
    uses ``s`` (so the factor vanishes under full participation). Pass ``a_fedavg`` to substitute another value.
    The grouping is the printed one: ``F L`` multiplies σ² only. ``C`` (``C_FedAvg``, time per round) defaults
    to 1, which gives server rounds; see :func:`c_fedavg`.
    """
    eps, F, L, sigma2, G2, C = _common(eps, F, L, sigma2, G2, C)
    B2 = check_real("B2", B2, 1.0)
    K = check_int("K", K, 1)
    n, s = _n_s(n, s)
    av = float(s) if a_fedavg is None else check_real("a_fedavg", a_fedavg, 0.0)
    G = math.sqrt(G2)
    bracket = ((F * L * sigma2 + (1.0 - av / n) * K * G2) / (s * K) * eps**-2
               + F * math.sqrt(L) * G * eps**-1.5 + L * F * B2 / eps)
    return bracket * C


def table1_fedbuff(eps: float, F: float, L: float, sigma2: float, G2: float, n: int, s: int, tau_max: float, *,
                   C: float = 1.0) -> float:
    """Table 1, FedBuff row::

        ( F L (σ² + G²) ε^-2  +  F L ((τ_max / s² + 1)(σ² + n G²))^{1/2} ε^-3/2  +  F L ε^-1 ) · C_FedBuff

    ``s`` is the number of updates per server step (the buffer size Z in FAVAS's experiments); ``τ_max`` the
    maximal staleness. ``C_FedBuff`` (time to fill the buffer) is an input: it depends on the queueing regime.
    """
    eps, F, L, sigma2, G2, C = _common(eps, F, L, sigma2, G2, C)
    n, s = _n_s(n, s)
    tau_max = check_real("tau_max", tau_max, 0.0)
    bracket = (F * L * (sigma2 + G2) * eps**-2
               + F * L * math.sqrt((tau_max / s**2 + 1.0) * (sigma2 + n * G2)) * eps**-1.5
               + F * L / eps)
    return bracket * C


def table1_asyncsgd(eps: float, F: float, L: float, sigma2: float, G2: float, s: int, tau_avg: float,
                    tau_max: float, *, C: float = 1.0) -> float:
    """Table 1, AsyncSGD row (Koloskova et al. 2022)::

        ( F L (3σ² + 4G²) ε^-2  +  F L G (s τ_avg)^{1/2} ε^-3/2  +  (s τ_max F)^{1/2} ε^-1 ) · C_AsyncSGD
    """
    eps, F, L, sigma2, G2, C = _common(eps, F, L, sigma2, G2, C)
    s = check_int("s", s, 1)
    tau_avg = check_real("tau_avg", tau_avg, 0.0)
    tau_max = check_real("tau_max", tau_max, 0.0)
    G = math.sqrt(G2)
    bracket = (F * L * (3.0 * sigma2 + 4.0 * G2) * eps**-2
               + F * L * G * math.sqrt(s * tau_avg) * eps**-1.5
               + math.sqrt(s * tau_max * F) / eps)
    return bracket * C


def table1_quafl(eps: float, F: float, L: float, sigma2: float, G2: float, B2: float, K: int, n: int, s: int,
                 E: float, *, C: float = 1.0) -> float:
    """Table 1, QuAFL row (``E``: QuAFL's expected number of local steps per interaction)::

        (1/E²) F L K (σ² + 2 K G²) ε^-2  +  (n√n / (E√E s)) F K L (σ² + 2 K G²)^{1/2} ε^-3/2
          +  (1/(E√s)) n√n F B K² L ε^-1

    The row is printed without a ``C`` factor (a QuAFL server step has a fixed duration, see
    :func:`c_server_clock`); ``C`` defaults to 1. The last term has ``B`` (not ``B²``) as printed: ``B = sqrt(B2)``.
    """
    eps, F, L, sigma2, G2, C = _common(eps, F, L, sigma2, G2, C)
    B = math.sqrt(check_real("B2", B2, 1.0))
    K = check_int("K", K, 1)
    n, s = _n_s(n, s)
    E = check_real("E", E, 0.0, strict_low=True)
    v = sigma2 + 2.0 * K * G2
    nn = n * math.sqrt(n)
    bracket = (F * L * K * v / E**2 * eps**-2
               + nn / (E * math.sqrt(E) * s) * F * K * L * math.sqrt(v) * eps**-1.5
               + nn / (E * math.sqrt(s)) * F * B * K**2 * L / eps)
    return bracket * C


def table1_favas(eps: float, F: float, L: float, sigma2: float, G2: float, B2: float, K: int, n: int, s: int, a,
                 b: float, *, C: float = 1.0) -> float:
    """Table 1, FAVAS row (Corollary 4 with ``n+1 → n``)::

        F L (σ² Σ_i a_i/n + 8 G² b) ε^-2
          +  (n/s) F L² (K² σ² + L² K² G² + s² σ² Σ_i a_i/n + s² G² b)^{1/2} ε^-3/2  +  n F B² K L b ε^-1

    Printed without a ``C`` factor (fixed server-step duration, :func:`c_server_clock`); ``C`` defaults to 1.
    """
    eps, F, L, sigma2, G2, C = _common(eps, F, L, sigma2, G2, C)
    B2 = check_real("B2", B2, 1.0)
    K = check_int("K", K, 1)
    n, s = _n_s(n, s)
    b = check_real("b", b, 0.0, strict_low=True)
    A = float(_a_vector(a, n).mean())
    root = math.sqrt(K**2 * sigma2 + L**2 * K**2 * G2 + s**2 * sigma2 * A + s**2 * G2 * b)
    bracket = (F * L * (sigma2 * A + 8.0 * G2 * b) * eps**-2
               + n / s * F * L**2 * root * eps**-1.5
               + n * F * B2 * K * L * b / eps)
    return bracket * C


TABLE1 = {
    "fedavg": table1_fedavg,
    "fedbuff": table1_fedbuff,
    "asyncsgd": table1_asyncsgd,
    "quafl": table1_quafl,
    "favas": table1_favas,
}


# --------------------------------------------------------------------------------------------- time model
def c_server_clock(interaction_time: float, waiting_time: float = 0.0, bits: int = 32) -> float:
    """``C_QuAFL`` / ``C_FAVAS``: a server step lasts ``interaction_time · bits/32 + waiting_time``.

    FAVAS Sec. 5: "each global step has a predefined duration that depends on the central server clock". In the
    QuAFL simulator FAVAS builds on, ``server.time += server_interaction_time + server_waiting_time`` per step, and
    the notebooks scale the interaction time by ``bits/32`` for quantized exchanges (e.g. 10 → 4.375 for 14 bits).
    """
    it = check_real("interaction_time", interaction_time, 0.0)
    wt = check_real("waiting_time", waiting_time, 0.0)
    bits = check_int("bits", bits, 1, 32)
    return it * bits / 32.0 + wt


def _erlang_cdf(x: np.ndarray, K: int, mu: float) -> np.ndarray:
    """CDF of the sum of ``K`` i.i.d. ``Exp(mean mu)``: ``1 − e^{−x/mu} Σ_{k<K} (x/mu)^k / k!``."""
    y = np.asarray(x, dtype=float) / mu
    k = np.arange(K)
    with np.errstate(divide="ignore", invalid="ignore"):
        logy = np.log(y)[:, None]
        logt = -y[:, None] + k[None, :] * logy - np.array([math.lgamma(j + 1.0) for j in k])[None, :]
    logt[:, 0] = -y  # k = 0 term (also right at y = 0)
    return np.clip(1.0 - np.exp(logt).sum(axis=1), 0.0, 1.0)


def c_fedavg(K: int, s: int, n_fast: int, n_slow: int, mean_fast: float = 2.0, mean_slow: float = 8.0,
             interaction_time: float = 0.0, grid: int = 20001) -> float:
    """``C_FedAvg``: expected duration of a FedAvg round in the QuAFL/FAVAS simulator.

    A round samples ``s`` of the ``n_fast + n_slow`` clients uniformly without replacement; each runs exactly ``K``
    steps with i.i.d. exponential step times (mean ``mean_fast`` or ``mean_slow``); the server waits for the slowest
    and then spends ``interaction_time``::

        C = E[ max_{i in S} Γ(K, mean_i) ] + interaction_time

    (FAVAS Sec. 5: FedAvg's time "depends on the maximum number of local steps K and the slowest client runtime";
    QuAFL ``trainer.py``: ``server.time += max(run_times) + server_interaction_time``.) The expectation is computed
    exactly over the hypergeometric number of slow clients and by Simpson integration of
    ``∫ (1 − F_slow(x)^j F_fast(x)^{s−j}) dx``.
    """
    K = check_int("K", K, 1)
    n_fast = check_int("n_fast", n_fast, 0)
    n_slow = check_int("n_slow", n_slow, 0)
    n = n_fast + n_slow
    check(n >= 1, "n_fast", n_fast, "n_fast + n_slow >= 1")
    s = check_int("s", s, 1, n)
    mf = check_real("mean_fast", mean_fast, 0.0, strict_low=True)
    ms = check_real("mean_slow", mean_slow, 0.0, strict_low=True)
    it = check_real("interaction_time", interaction_time, 0.0)
    grid = check_int("grid", grid, 101)
    if grid % 2 == 0:
        grid += 1
    mmax = max(mf if n_fast else 0.0, ms if n_slow else 0.0)
    xmax = mmax * (K + 15.0 * math.sqrt(K) + 60.0 + 2.0 * math.log(s + 1.0))
    x = np.linspace(0.0, xmax, grid)
    Ff = _erlang_cdf(x, K, mf)
    Fs = _erlang_cdf(x, K, ms)
    h = x[1] - x[0]
    wts = np.ones(grid)
    wts[1:-1:2] = 4.0
    wts[2:-1:2] = 2.0
    total = 0.0
    denom = math.comb(n, s)
    for j in range(max(0, s - n_fast), min(s, n_slow) + 1):
        pj = math.comb(n_slow, j) * math.comb(n_fast, s - j) / denom
        integrand = 1.0 - Fs**j * Ff ** (s - j)
        total += pj * float(h / 3.0 * np.dot(wts, integrand))
    return total + it
