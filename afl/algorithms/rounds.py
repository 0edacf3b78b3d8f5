"""Synchronous rounds with partial participation: what FedAvg and the methods the GHBM paper compares share.

Each round the server sends its model ``theta`` (and whatever else a method sends) to ``s`` sampled clients; each
runs ``K`` (the paper's J) local SGD steps, corrected at every step by the method's :class:`Drift` term, and
returns ``y_i``. With ``Delta_i = theta - y_i`` and weights ``p_i`` (proportional to the clients' data sizes,
GHBM code's ``aggregation_policy: weighted``, or uniform), the server forms the pseudo-gradient

    g = sum_i p_i Delta_i                       and FedAvg steps  theta <- theta - eta g

(Reddi et al. 2021's server learning rate eta; eta = 1 is McMahan et al.'s average). A method changes three
things: what clients start from and carry (:meth:`RoundLearner.client_state`), the per-step correction
(:class:`Drift`), and the server step (:meth:`RoundLearner.server_step`). Per-client tensors that live across
rounds sit in ``self.clients`` (:class:`~afl.algorithms.state.ClientState`).

``timing`` (:func:`afl.algorithms.registry.synchronous`): ``"rounds"`` -- every round lasts one unit of simulated
time (GHBM: "simulated time is rounds"; uniform or cyclic sampling) -- or ``"slowest"`` -- a round lasts as long as
its slowest client's K steps plus ``server_time`` (FAVAS's FedAvg).

Communication is counted from what is sent: ``down`` and ``up`` model-sized vectors per participant and round
(GHBM Table 4's "1x, 1.5x, 2x, 3x of FedAvg" is ``(down + up) / 2``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from ..errors import ParameterError, check_choice, check_int, check_real
from ..sim.schedule import SAMPLINGS
from .base import Learner, Settings

TIMINGS = ("rounds", "slowest")
WEIGHTINGS = ("size", "uniform")


@dataclass(frozen=True)
class RoundSettings(Settings):
    """Defaults: the GHBM paper's CIFAR LeNet setting (App. C.4, Table 7): J = K = 8 steps (one epoch of 500
    samples at batch 64), local lr 0.01, 10 of 100 clients per round (C = 0.1), server lr 1, no weight decay
    unless given (the paper tunes it per dataset: 1e-3 for LeNet, 1e-5 for ResNet-20, 0 for Shakespeare)."""

    K: int = 8
    lr: float = 0.01
    s: int = 10
    server_lr: float = 1.0
    weight_decay: float = 0.0
    sampling: str = "uniform"
    weighting: str = "size"
    timing: str = "rounds"
    server_time: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        check_int("s", self.s, 1)
        check_real("server_lr", self.server_lr, 0, strict_low=True)
        check_real("weight_decay", self.weight_decay, 0)
        check_choice("sampling", self.sampling, SAMPLINGS)
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_choice("timing", self.timing, TIMINGS)
        check_real("server_time", self.server_time, 0)
        if self.timing == "slowest" and self.sampling != "uniform":
            raise ParameterError("sampling", self.sampling, "'uniform' with timing='slowest' (cyclic sampling is "
                                 "defined for unit-time rounds)")

    def check_federation(self, fed) -> None:
        check_int("s", self.s, 1, fed.n, hint="n, the number of clients")
        if self.sampling == "cyclic" and fed.n % self.s:
            raise ParameterError("s", self.s, f"a divisor of n = {fed.n} for cyclic sampling")


@dataclass(frozen=True)
class Drift:
    """A client's corrected local direction (the engine's correction hook, :class:`afl.engine.Correction`):

        d' = scale * (d - grad f_i(reference; same batch)) + shift + pull * (w - anchor)

    ``d`` is the SGD direction (gradient plus weight decay) at the local model ``w``. Each term is present when
    its per-client state is submitted with the job: ``scale`` (a per-coordinate vector; else the constant
    ``self.scale``), ``shift`` (control variates, momentum), ``anchor`` (default: the start model ``w0``),
    ``pull`` (a per-client coefficient vector; else the constant ``self.pull``),
    ``reference`` (MIME's server model; the engine passes its gradient as ``gradient_at``). A state entry
    ``direction_sum`` accumulates the raw ``d`` of every step (SCAFFOLD-M's new control variate).
    """

    scale: float = 1.0
    pull: float = 0.0
    gradient_at: str | None = None
    graph_safe: ClassVar[bool] = True     # pure: its calls may be replayed from CUDA graphs (afl.graphs)

    def __call__(self, t: int, w: Tensor, d: Tensor, w0: Tensor, state: dict[str, Tensor]) -> Tensor:
        if "direction_sum" in state:
            state["direction_sum"] += d
        out = d - state["gradient_at"] if self.gradient_at is not None else d
        if "scale" in state:
            out = out * state["scale"]
        elif self.scale != 1.0:
            out = out * self.scale
        if "shift" in state:
            out = out + state["shift"]
        if self.pull != 0.0 or "pull" in state:
            out = out + state.get("pull", self.pull) * (w - state.get("anchor", w0))
        return out


class RoundLearner(Learner):
    """A method on synchronous rounds (see the module docstring). Subclasses set ``hook``, ``down`` and ``up``
    and override :meth:`client_state`, :meth:`on_round` and :meth:`server_step` as their update rules need."""

    hook: Drift | None = None
    down, up = 1, 1

    def __init__(self, fed, history, cfg: RoundSettings):
        super().__init__(fed, history, cfg)
        self.cfg = cfg
        self.jobs = {}
        sizes = [len(p) for p in fed.queue.streams.parts]
        self.sizes = torch.tensor(sizes, dtype=self.w.dtype, device=self.w.device)
        self.round = 0                       # rounds completed (server steps so far)

    # -- client side -------------------------------------------------------------------------------------
    def on_start(self, client: int, t: float) -> None:
        self.jobs[client] = self.queue.submit(client, self.start_model(client), self.K, self.lr,
                                              self.cfg.weight_decay, hook=self.hook,
                                              state=self.client_state(client))

    def start_model(self, client: int) -> Tensor:
        return self.w

    def client_state(self, client: int) -> dict[str, Tensor] | None:
        """The per-client ``(P,)`` tensors the job's :class:`Drift` reads (fresh tensors: the engine may write)."""
        return None

    # -- server side -------------------------------------------------------------------------------------
    def weights(self, clients: list[int]) -> Tensor:
        if self.cfg.weighting == "uniform":
            return torch.full((len(clients),), 1.0 / len(clients), dtype=self.w.dtype, device=self.w.device)
        sizes = self.sizes[clients]
        return sizes / sizes.sum()

    def on_server_step(self, t: float, contacts) -> None:
        self.history.record(t, self.w)
        clients = [c.client for c in contacts]
        delta = self.w - torch.stack([self.jobs.pop(c).result() for c in clients])
        self.server_step(clients, delta, self.weights(clients) @ delta)
        self.round += 1
        self.count(contacts, up_messages=self.up, down_messages=self.down)

    def server_step(self, clients: list[int], delta: Tensor, pseudo: Tensor) -> None:
        """Update the server (and the participants' stored state) from ``delta`` ``(k, P)`` (``Delta_i``) and the
        weighted pseudo-gradient ``pseudo``; FedAvg: ``theta <- theta - eta * pseudo``."""
        self.w = self.w - self.cfg.server_lr * pseudo


__all__ = ["RoundSettings", "RoundLearner", "Drift", "TIMINGS", "WEIGHTINGS"]
