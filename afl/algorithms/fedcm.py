"""FedCM (Xu et al. 2021, "FedCM: Federated learning with client-level momentum").

The server sends its model and the last round's pseudo-gradient ``g`` (zero at first); every local step mixes
the fresh direction with it,

    d' = alpha d + (1 - alpha) g / (K eta_l)

and the server steps ``theta <- theta - eta g`` (GHBM code, ``fedcm_client.py``). With eta = 1 this is GHBM with
tau = 1 (:mod:`afl.algorithms.ghbm`) with ``beta = 1 - alpha`` and GHBM's ``eta_l`` equal to ``alpha eta_l``
(tests check it). Sent: theta and g down, Delta_i up (1.5x FedAvg).

``momentum="code"`` is what the GHBM authors' code runs instead. Its server builds the message as
``{"momentum": torch.clone(p) for p in state.momentum}`` (``fedcm_center_server.py``), a dict comprehension
that keeps one entry: the *last* parameter tensor's pseudo-gradient (the output layer's bias). The client
zips its parameter tensors with that tensor (``fedcm_client.py``), so tensor ``i`` gets entry ``i`` of it,
broadcast, for as many tensors as the bias has entries; the rest get no momentum and no ``alpha``. The
gradient is scaled before the optimizer adds weight decay, which is therefore not scaled. Sent: theta and the
one tensor down.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ParameterError, check_choice, check_real
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings

#: what the clients receive as the momentum: the whole pseudo-gradient (the paper) or the authors' code's
MOMENTUM = ("paper", "code")


@dataclass(frozen=True)
class FedCMSettings(RoundSettings):
    """FedCM: ``alpha``, the weight of the fresh gradient (GHBM Table 7: 0.1, i.e. momentum 0.9), and which
    ``momentum`` the clients get (``"paper"``, or ``"code"``: the authors' code's, see the module)."""

    alpha: float = 0.1
    momentum: str = "paper"

    def __post_init__(self):
        super().__post_init__()
        check_real("alpha", self.alpha, 0, 1, strict_low=True)
        check_choice("momentum", self.momentum, MOMENTUM)


class FedCM(RoundLearner):
    down, up = 2, 1

    def __init__(self, fed, history, cfg: FedCMSettings):
        super().__init__(fed, history, cfg)
        self.g = torch.zeros_like(self.w)
        if cfg.momentum == "paper":
            self.hook = Drift(scale=float(cfg.alpha))
            return
        self.hook = Drift()
        model = fed.engine.model
        self.spread = last_tensor_spread(model.names, model.shapes, model.numels)
        paired = self.spread(torch.ones_like(self.w)) != 0         # the tensors the client's zip reaches
        alpha = torch.full_like(self.w, cfg.alpha)
        self.scale = torch.where(paired, alpha, torch.ones_like(self.w))
        self.pull = (1 - self.scale) * cfg.weight_decay           # alpha (g + wd w) + (1 - alpha) wd w
        self.down = 1 + model.numels[-1] / model.size

    def client_state(self, client):
        g = self.g if self.cfg.momentum == "paper" else self.spread(self.g)
        state = {"shift": (1 - self.cfg.alpha) / (self.K * self.lr) * g}
        if self.cfg.momentum == "code":
            state["scale"] = self.scale.clone()
            if self.cfg.weight_decay:
                state |= {"pull": self.pull.clone(), "anchor": torch.zeros_like(self.w)}
        return state

    def server_step(self, clients, delta, pseudo):
        super().server_step(clients, delta, pseudo)
        self.g = pseudo


def last_tensor_spread(names, shapes, numels):
    """The authors' FedCM message as a flat vector: ``g -> v`` where parameter tensor ``i`` of ``v`` is entry
    ``i`` of the last tensor of ``g`` broadcast to its shape, for ``i`` below that tensor's first dimension, and
    zero after. A :class:`ParameterError` if an entry cannot broadcast to a tensor (a last tensor that is not a
    bias)."""
    last_shape = shapes[-1]
    for i, shape in enumerate(shapes[:last_shape[0]]):
        try:
            torch.broadcast_shapes(last_shape[1:], shape)
        except RuntimeError:
            raise ParameterError("momentum", "code", f"a model whose last parameter is a bias; entry {i} of "
                                 f"{names[-1]} {tuple(last_shape)} does not broadcast to {names[i]} "
                                 f"{tuple(shape)}") from None

    def spread(g: Tensor) -> Tensor:
        last = g[-numels[-1]:].view(last_shape)
        return torch.cat([torch.broadcast_to(last[i], shape).reshape(-1) if i < len(last) else g.new_zeros(n)
                          for i, (shape, n) in enumerate(zip(shapes, numels))])
    return spread


register("fedcm", FedCMSettings, FedCM, synchronous,
         "FedCM (Xu et al.): every local step mixes in the last round's server pseudo-gradient")
