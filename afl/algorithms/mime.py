"""MIME, MimeMom and MimeLiteMom (Karimireddy et al. 2021, "Breaking the centralized barrier for cross-device FL").

Each round the sampled clients first send their full-batch gradients at the server model ``x``; their mean is
``c``. Then each trains with the server's optimizer state ``m`` held fixed:

    MIME:         d' = d - g_i(x; zeta) + c                       (SVRG correction on the step's own batch zeta)
    MimeMom:      d' = w (d - g_i(x; zeta) + c) + beta m
    MimeLiteMom:  d' = w d + beta m

and the server steps ``x <- x - eta g`` and (momentum variants) ``m <- beta m + w c`` (m starts at 0). The base
optimizer's momentum form sets ``w``: ``momentum="pytorch"`` (the default), ``w = 1``, is PyTorch's SGD momentum,
what the GHBM authors' code runs (``FedSGD``, ``mime_client.py``, ``mime_center_server.py``) and so the form
Table 7's rates were tuned in; ``momentum="dampened"``, ``w = 1 - beta``, is how Karimireddy et al. write SGDm.
The two are one method with ``eta_l`` and ``m`` rescaled: ``"dampened"`` at ``eta_l`` equals ``"pytorch"`` at
``(1 - beta) eta_l`` (a test checks it), so at equal rates the PyTorch form's clients move ``1 / (1 - beta)`` as
far. Full-batch gradients use no augmentation and no weight decay (as the code's).
Sent per participant: x and c (MIME; plus m for MimeMom; x and m for MimeLiteMom) down, the full gradient and
Delta_i up -- 2x, 2.5x and 2x FedAvg (the GHBM paper's Table 4 labels MimeMom 3x).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check_choice
from .fedavg import FedAvgMSettings
from .registry import register, synchronous
from .rounds import Drift, RoundLearner, RoundSettings

#: the base optimizer's momentum form: PyTorch's (the GHBM authors' code's) or Karimireddy et al.'s dampened one
MOMENTUM = ("pytorch", "dampened")


@dataclass(frozen=True)
class MimeSettings(RoundSettings):
    """MIME with SGD as the base optimizer (GHBM Table 7: eta = 1, eta_l = 0.01 on CIFAR)."""


@dataclass(frozen=True)
class MimeMomSettings(FedAvgMSettings):
    """MimeMom / MimeLiteMom: server momentum ``beta`` (GHBM Table 7: 0.9, eta = 0.1), FedAvgM's settings, and
    the ``momentum`` form (``"pytorch"``: the authors' code's; ``"dampened"``: Karimireddy et al.'s; see the
    module)."""

    momentum: str = "pytorch"

    def __post_init__(self):
        super().__post_init__()
        check_choice("momentum", self.momentum, MOMENTUM)


class Mime(RoundLearner):
    down, up = 2, 2
    momentum = False        # the server keeps m and clients add beta m
    corrected = True        # clients use the SVRG correction - g_i(x; zeta) + c

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.c = torch.zeros_like(self.w)
        self.m = torch.zeros_like(self.w)
        #: the weight of the fresh direction in a step and of c in m's update (1 - beta in the dampened form)
        self.fresh = 1 - cfg.beta if self.momentum and cfg.momentum == "dampened" else 1.0
        self.hook = Drift(scale=self.fresh, gradient_at="reference" if self.corrected else None)

    @classmethod
    def gradients_per_job(cls, K: int, batches: int) -> int:
        """K steps, each with a second gradient at the server model on the same batch where corrected (MIME,
        MimeMom), and the full-batch gradient at the round's start."""
        return K * (2 if cls.corrected else 1) + batches

    def on_round(self, t, clients):
        parts = [self.queue.streams.parts[c] for c in clients]
        self.c = self.queue.full_gradient(self.w.expand(len(clients), -1), parts).value().mean(0)

    def client_state(self, client):
        shift = self.fresh * self.c if self.corrected else torch.zeros_like(self.w)
        if self.momentum:
            shift += self.cfg.beta * self.m
        return {"shift": shift, "reference": self.w.clone()} if self.corrected else {"shift": shift}

    def server_step(self, clients, delta, pseudo):
        super().server_step(clients, delta, pseudo)
        if self.momentum:
            self.m = self.cfg.beta * self.m + self.fresh * self.c


class MimeMom(Mime):
    down, up = 3, 2
    momentum = True


class MimeLiteMom(Mime):
    down, up = 2, 2
    momentum, corrected = True, False


register("mime", MimeSettings, Mime, synchronous,
         "MIME (Karimireddy et al.), SGD base: SVRG-corrected local steps with the full-batch gradient mean c")
register("mimemom", MimeMomSettings, MimeMom, synchronous,
         "MimeMom (Karimireddy et al.): MIME with the server's momentum applied at every local step")
register("mimelitemom", MimeMomSettings, MimeLiteMom, synchronous,
         "MimeLiteMom (Karimireddy et al.): the server's momentum at every local step, no SVRG correction")
