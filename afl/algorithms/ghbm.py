"""Generalized heavy-ball momentum (Zaccone et al., "Communication-efficient federated learning with generalized
heavy-ball momentum"): GHBM (Algorithm 2, eq. (7)), LocalGHBM and FedHBM (Algorithm 1, Sec. 3.4), server-side
GHBM (App. C.8), and FedADC (Ozfatura et al. 2021), which the paper runs as GHBM with tau = 1.

GHBM: the server keeps its last tau + 1 models and every local step of round t moves along

    theta_i <- theta_i - eta_l g_i + beta/(tau J) (theta^{t-1} - theta^{t-tau-1})                    (7)

i.e. ``d' = d - beta/(eta_l tau J) (theta^{t-1} - theta^{t-tau-1})``: the average of the last tau server steps,
so the momentum reflects about tau/C clients' data instead of the last round's few (tau = 1/C is the choice
of Sec. 3.3). Clients are stateless; the server sends theta^{t-1} and theta^{t-tau-1} (1.5x FedAvg). The
momentum is zero until tau past models exist (the code's ``GHBMCenterServer``; the paper leaves it open).
Server-side GHBM (C.8) applies the same term once per round at the server:
``theta^t = theta^{t-1} - eta g + beta/tau (theta^{t-1} - theta^{t-tau-1})`` (with tau = 1, FedAvgM).

LocalGHBM: a client keeps the model it received at its last participation, ``theta^{t-tau_i-1}``, and uses
``beta/(tau_i J) (theta^{t-1} - theta^{t-tau_i-1})`` with tau_i its own participation period (Algorithm 1,
l. 8): no extra communication. FedHBM (l. 282) takes both ends on the client's own trajectory, recomputed at
every step: ``beta/(tau_i J) (theta_i^{t,j-1} - theta_i^{t-tau_i})``, with ``theta_i^{t-tau_i}`` the client's
final local model of its last participation. Both have no momentum at a client's first participation.
The GHBM code replaces ``1/tau_i`` by the participation ratio C (``LocalGHBMClient``: ``C * (anchor - model)``):
``momentum_scale="C"``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from ..errors import check_choice, check_int, check_real
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings


@dataclass(frozen=True)
class HeavyBallSettings(RoundSettings):
    """``beta``: the momentum factor (GHBM Table 7: 0.9; FedHBM: 1)."""

    beta: float = 0.9

    def __post_init__(self):
        super().__post_init__()
        check_real("beta", self.beta, 0)


@dataclass(frozen=True)
class GHBMSettings(HeavyBallSettings):
    """GHBM: ``tau`` server steps averaged into the momentum (the paper's sweep: 5, 10, 20, 40; 1/C = 10)."""

    tau: int = 10

    def __post_init__(self):
        super().__post_init__()
        check_int("tau", self.tau, 1)


class GHBM(RoundLearner):
    """GHBM learner; FedADC (no ``tau`` setting) is the same with tau = 1."""

    down, up = 2, 1
    hook = Drift()

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.tau = getattr(cfg, "tau", 1)
        self.past = deque([self.w], maxlen=self.tau + 1)       # theta^{t-tau-1} ... theta^{t-1}

    def momentum(self):
        """``(theta^{t-1} - theta^{t-tau-1}) / tau``, or None while fewer than tau + 1 models exist."""
        return (self.w - self.past[0]) / self.tau if len(self.past) == self.tau + 1 else None

    def client_state(self, client):
        m = self.momentum()
        return None if m is None else {"shift": -self.cfg.beta / (self.lr * self.K) * m}

    def server_step(self, clients, delta, pseudo):
        super().server_step(clients, delta, pseudo)
        self.past.append(self.w)


class ServerGHBM(GHBM):
    """Server-side GHBM (C.8): the momentum term is applied once per round, at the server."""

    down, up = 1, 1
    hook = None

    def client_state(self, client):
        return None

    def server_step(self, clients, delta, pseudo):
        m = self.momentum()
        self.w = self.w - self.cfg.server_lr * pseudo + (0 if m is None else self.cfg.beta * m)
        self.past.append(self.w)


@dataclass(frozen=True)
class LocalGHBMSettings(HeavyBallSettings):
    """LocalGHBM / FedHBM: ``momentum_scale`` ``"tau_i"`` (the paper's 1/tau_i) or ``"C"`` (the code's s/n)."""

    momentum_scale: str = "tau_i"

    def __post_init__(self):
        super().__post_init__()
        check_choice("momentum_scale", self.momentum_scale, ("tau_i", "C"))


@dataclass(frozen=True)
class FedHBMSettings(LocalGHBMSettings):
    """FedHBM: GHBM Table 7's beta = 1."""

    beta: float = 1.0


class LocalGHBM(RoundLearner):
    """LocalGHBM learner: each client's anchor is the server model it received last time."""

    hook = Drift()

    def __init__(self, fed, history, cfg: LocalGHBMSettings):
        super().__init__(fed, history, cfg)
        self.anchor = self.clients.table("anchor", 0.0)
        self.last = [None] * fed.n                    # round of each client's last participation

    def coefficient(self, client) -> float | None:
        """``beta / (tau_i J eta_l)`` (or with C for 1/tau_i); None at a first participation."""
        if self.last[client] is None:
            return None
        scale = 1.0 / (self.round - self.last[client]) if self.cfg.momentum_scale == "tau_i" else self.cfg.s / self.fed.n
        return self.cfg.beta * scale / (self.K * self.lr)

    def client_state(self, client):
        k = self.coefficient(client)
        return None if k is None else {"shift": -k * (self.w - self.anchor[client])}

    def on_start(self, client, t):
        super().on_start(client, t)
        self.anchor[client] = self.w
        self.last[client] = self.round


class FedHBM(LocalGHBM):
    """FedHBM learner: the pull towards the client's own last final model, at every local step."""

    def client_state(self, client):
        k = self.coefficient(client)
        return None if k is None else {"pull": torch.full_like(self.w, -k), "anchor": self.anchor[client].clone()}

    def on_start(self, client, t):
        RoundLearner.on_start(self, client, t)
        self.last[client] = self.round

    def server_step(self, clients, delta, pseudo):
        self.anchor[clients] = self.w - delta
        super().server_step(clients, delta, pseudo)


register("ghbm", GHBMSettings, GHBM, synchronous,
         "GHBM (Zaccone et al., Alg. 2): clients step along the average of the last tau server updates")
register("fedadc", HeavyBallSettings, GHBM, synchronous,
         "FedADC (Ozfatura et al.), as the GHBM paper runs it: GHBM with tau = 1 (classical heavy-ball)")
register("ghbm-server", GHBMSettings, ServerGHBM, synchronous,
         "Server-side GHBM (Zaccone et al., App. C.8): the GHBM momentum applied once per round by the server")
register("localghbm", LocalGHBMSettings, LocalGHBM, synchronous,
         "LocalGHBM (Zaccone et al., Alg. 1): each client's momentum from the model it received last time")
register("fedhbm", FedHBMSettings, FedHBM, synchronous,
         "FedHBM (Zaccone et al.): each step pulled along the client's own trajectory since its last round")
