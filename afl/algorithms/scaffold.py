"""SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II) and SCAFFOLD-M (Cheng et al. 2024, Algorithm 2).

SCAFFOLD: client i corrects every step by the control variates, ``d' = d + c - c_i``; after K steps

    c_i+ = c_i - c + (theta - y_i) / (K eta_l)                                   (option II)

and the server steps ``theta <- theta - eta g`` and ``c <- c + (1/N) sum_{i in S} (c_i+ - c_i)`` (N clients).
The GHBM code adds ``sum_{i in S} (c_i+ - c_i)`` without the 1/N (``scaffold_center_server.py``):
``controls="code"``. Sent each round: theta and c down, Delta_i and the control change up (2x FedAvg).

SCAFFOLD-M adds the server's momentum direction ``v`` (the last round's pseudo-gradient per local step):

    d' = beta (d + c - c_i) + (1 - beta) v,      v <- g / (K eta_l),      c_i+ = (1/K) sum_k d_k

with ``d_k`` the client's SGD directions (its gradients plus weight decay) of the round; theta and c as in
SCAFFOLD. Sent: theta, c, v down; Delta_i, control change up (2.5x).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check_choice, check_real
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings

CONTROLS = ("paper", "code")


@dataclass(frozen=True)
class ScaffoldSettings(RoundSettings):
    """SCAFFOLD: the server's control update, ``"paper"`` (1/N) or ``"code"`` (the GHBM code's sum)."""

    controls: str = "paper"

    def __post_init__(self):
        super().__post_init__()
        check_choice("controls", self.controls, CONTROLS)


class Scaffold(RoundLearner):
    down, up = 2, 2
    hook = Drift()

    def __init__(self, fed, history, cfg: ScaffoldSettings):
        super().__init__(fed, history, cfg)
        self.c = torch.zeros_like(self.w)
        self.control = self.clients.table("control", 0.0)

    def client_state(self, client):
        return {"shift": self.c - self.control[client]}

    def new_controls(self, clients, delta):
        return self.control[clients] - self.c + delta / (self.K * self.lr)

    def server_step(self, clients, delta, pseudo):
        new = self.new_controls(clients, delta)
        change = (new - self.control[clients]).sum(0)
        self.control[clients] = new
        super().server_step(clients, delta, pseudo)
        self.c = self.c + (change / self.fed.n if self.cfg.controls == "paper" else change)


@dataclass(frozen=True)
class ScaffoldMSettings(ScaffoldSettings):
    """SCAFFOLD-M: momentum ``beta`` (weight of the fresh direction; Cheng et al.'s beta)."""

    beta: float = 0.9

    def __post_init__(self):
        super().__post_init__()
        check_real("beta", self.beta, 0, 1, strict_low=True)


class ScaffoldM(Scaffold):
    down, up = 3, 2

    def __init__(self, fed, history, cfg: ScaffoldMSettings):
        super().__init__(fed, history, cfg)
        self.hook = Drift(scale=float(cfg.beta))
        self.v = torch.zeros_like(self.w)
        self.sums = {}

    def client_state(self, client):
        b = self.cfg.beta
        state = {"shift": b * (self.c - self.control[client]) + (1 - b) * self.v,
                 "direction_sum": torch.zeros_like(self.w)}
        self.sums[client] = state["direction_sum"]
        return state

    def new_controls(self, clients, delta):
        return torch.stack([self.sums.pop(c) for c in clients]) / self.K

    def server_step(self, clients, delta, pseudo):
        super().server_step(clients, delta, pseudo)
        self.v = pseudo / (self.K * self.lr)


register("scaffold", ScaffoldSettings, Scaffold, synchronous,
         "SCAFFOLD (Karimireddy et al.), option II: control variates c - c_i correct every local step")
register("scaffold-m", ScaffoldMSettings, ScaffoldM, synchronous,
         "SCAFFOLD-M (Cheng et al.): SCAFFOLD with the server's momentum direction mixed into every local step")
