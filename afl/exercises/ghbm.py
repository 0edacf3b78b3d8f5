"""Exercises on generalized heavy-ball momentum (notebook 02; Zaccone et al., eq. (7), Lemma 4.4, Cor. 4.5).

* :data:`check_ghbm_momentum`: ``ghbm_momentum(past, beta, J)``: what eq. (7) adds at every local step,
  ``beta / (tau J) (theta^{t-1} - theta^{t-tau-1})``, from the server's last ``tau + 1`` models
  ``past = [theta^{t-tau-1}, ..., theta^{t-1}]`` (oldest first);
* :data:`check_unseen_fraction`: ``unseen_fraction(n, s, tau)`` = ``E[((n - |S_tau|) / n)^2]`` under uniform
  sampling of s of n clients per round (the factor of Lemma 4.4's bound);
* :data:`check_smallest_tau`: ``smallest_tau(n, s, eps)``: the fewest rounds tau for which that factor is at most
  eps (cyclic sampling needs only ``ceil(n / s)``).
"""
from __future__ import annotations

import math
from collections import deque
from types import SimpleNamespace

import torch

from ..algorithms.ghbm import GHBM
from ..theory.ghbm import unseen_fraction_moment
from .checking import Exercise, Mistake


def _momentum(past, beta, J):
    """afl's GHBM: its ``momentum()`` on these past models, times beta / J."""
    server = SimpleNamespace(w=past[-1], past=deque(past), tau=len(past) - 1)
    return beta / J * GHBM.momentum(server)


def _momentum_cases(rng):
    for tau, J in ((1, 1), (1, 4), (3, 1)):                  # the shortest window; one local step
        yield {"past": [torch.tensor(rng.normal(size=3)) for _ in range(tau + 1)], "beta": 0.9, "J": J}
    for _ in range(8):
        tau, d = int(rng.integers(2, 7)), int(rng.integers(2, 6))
        yield {"past": [torch.tensor(rng.normal(size=d)) for _ in range(tau + 1)],
               "beta": round(float(rng.uniform(0.5, 1)), 3), "J": int(rng.integers(2, 10))}


check_ghbm_momentum = Exercise(
    name="check_ghbm_momentum", signature="ghbm_momentum(past, beta, J)", reference=_momentum,
    cases=_momentum_cases, source="GHBM eq. (7)",
    idea="GHBM eq. (7): the momentum is the server's average progress over the last tau rounds, spread over the J "
         "local steps of a round.",
    hint="tau = len(past) - 1; the term is beta / (tau J) (past[-1] - past[0]): the mean of the last tau server "
         "steps, spread over the J local steps.",
    mistakes=(
        Mistake(lambda past, beta, J: beta / J * (past[-1] - past[0]),
                "divide by tau = len(past) - 1: the momentum is the average of the last tau server steps."),
        Mistake(lambda past, beta, J: beta / (len(past) - 1) * (past[-1] - past[0]),
                "divide by J too: the term is added at each of the J local steps, so that a round adds it once."),
        Mistake(lambda past, beta, J: beta / ((len(past) - 1) * J) * (past[-1] - past[1]),
                "the window reaches back to theta^{t-tau-1}, the oldest of the tau + 1 models: past[0]."),
        Mistake(lambda past, beta, J: beta / ((len(past) - 1) * J) * (past[0] - past[-1]),
                "the momentum points along the server's recent progress: newest minus oldest, past[-1] - past[0]."),
        Mistake(lambda past, beta, J: beta / (len(past) * J) * (past[-1] - past[0]),
                "tau + 1 models span tau steps: divide by len(past) - 1."),
    ))


def _unseen_cases(rng):
    yield {"n": 10, "s": 10, "tau": 1}                         # every client drawn: nothing unseen
    yield {"n": 10, "s": 9, "tau": 1}                          # one left out a round: two are never unseen together
    yield {"n": 20, "s": 1, "tau": 1}                          # a single client a round
    for _ in range(10):                              # moderate windows: the factor neither 1 nor vanishing
        n = int(rng.integers(5, 150))
        s = int(rng.integers(1, max(2, n // 4)))
        yield {"n": n, "s": s, "tau": int(rng.integers(1, math.ceil(2 * n / s) + 1))}


def _p1(n, s, tau):
    return ((n - s) / n) ** tau


check_unseen_fraction = Exercise(
    name="check_unseen_fraction", signature="unseen_fraction(n, s, tau)", reference=unseen_fraction_moment,
    cases=_unseen_cases, source="E[(unseen fraction)²] under uniform sampling (GHBM Lemma 4.4)",
    implementations=("afl.theory.ghbm:unseen_fraction_moment",),
    idea="write U, the clients never drawn in tau rounds, as a sum of indicators; E[U^2] needs the chance that one"
         " client is never drawn and that two given clients are never drawn.",
    hint="with U the number of unseen clients, E[U^2] = n p1 + n (n - 1) p2, p1 = ((n-s)/n)^tau (one client "
         "never drawn), p2 = ((n-s)(n-s-1) / (n(n-1)))^tau (two given clients never drawn); return E[U^2] / n^2.",
    mistakes=(
        Mistake(lambda n, s, tau: _p1(n, s, tau) ** 2,
                "(E[U] / n)^2 is the square of the mean; the bound needs the mean of the square, E[U^2] / n^2 "
                "(two clients unseen together: p2)."),
        Mistake(lambda n, s, tau: _p1(n, s, tau),
                "that is E[U / n], the expected unseen fraction; Lemma 4.4 needs E[(U / n)^2]."),
        Mistake(lambda n, s, tau: max(1 - tau * s / n, 0.0) ** 2,
                "that is cyclic sampling (Corollary 4.5); here the s clients of each round are drawn uniformly."),
        Mistake(lambda n, s, tau: (n * (1 - 1 / n) ** (s * tau) + n * (n - 1) * (1 - 2 / n) ** (s * tau)) / n ** 2,
                "the s clients of one round are drawn without replacement: P(a client not drawn in a round) = "
                "(n - s) / n."),
    ))


def _smallest_tau(n, s, eps):
    tau = 1
    while unseen_fraction_moment(n, s, tau) > eps:
        tau += 1
    return tau


def _tau_cases(rng):
    yield {"n": 50, "s": 5, "eps": 1.0}                        # one round is already enough
    yield {"n": 12, "s": 12, "eps": 1e-3}                      # every client each round
    yield {"n": 100, "s": 1, "eps": 0.05}                      # a single client a round
    for _ in range(8):
        n = int(rng.integers(10, 200))
        yield {"n": n, "s": int(rng.integers(1, max(2, n // 5))), "eps": float(10 ** rng.uniform(-3, -1))}


check_smallest_tau = Exercise(
    name="check_smallest_tau", signature="smallest_tau(n, s, eps)", reference=_smallest_tau, cases=_tau_cases,
    source="the first τ at or below ε (GHBM Lemma 4.4)",
    implementations=("afl.theory.ghbm:unseen_fraction_moment",),
    inner=(("unseen_fraction", unseen_fraction_moment),),
    idea="the factor shrinks as tau grows: find the first tau at which it is at most eps.",
    hint="increase tau from 1 until unseen_fraction(n, s, tau) <= eps; the answer is that first tau.",
    mistakes=(
        Mistake(lambda n, s, eps: math.ceil(n / s),
                "ceil(n / s) = 1/C is enough for cyclic sampling only; uniform sampling sees some clients twice "
                "and needs more rounds."),
        Mistake(lambda n, s, eps: _smallest_tau(n, s, eps) - 1,
                "one round too few: return the first tau at which the factor is at most eps."),
        Mistake(lambda n, s, eps: _smallest_tau(n, s, eps) + 1,
                "one round too many: return the first tau at which the factor is at most eps."),
    ))

__all__ = ["check_ghbm_momentum", "check_unseen_fraction", "check_smallest_tau"]
