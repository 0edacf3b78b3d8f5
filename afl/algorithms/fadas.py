"""FADAS (Wang, Wang, Lu & Chen, ICML 2024, arXiv 2407.18365): buffered asynchronous aggregation with an
AMSGrad server step and a delay-adaptive server learning rate,

    Delta_t = (1/M) sum_{i in M_t} Delta_i
    m_t = beta1 m_{t-1} + (1 - beta1) Delta_t,    v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2
    v^_t = max(v^_{t-1}, v_t),                    x_{t+1} = x_t - eta_t m_t / (sqrt(v^_t) + eps)
    eta_t = eta if tau_max_t <= tau_c, else min(eta, 1 / tau_max_t)

(``Delta_i = w_start - w_end``, afl's sign; ``tau_max_t``: the largest staleness, in server steps, among the
buffer's updates; ``tau_c = None``: no delay adaptation, the paper's plain FADAS). Clients are FedBuff's
(:mod:`afl.algorithms.fedbuff`; ``Z`` is the paper's buffer size M).

``form="code"`` runs the authors' code (yujiaw98/FADAS, ``update.py``'s ``fedams`` and ``g_delay_adaptive.py``)
where it differs from the text: Adam's bias corrections, ``eta / (1 - beta1^t)`` and
``sqrt(v^_t) / sqrt(1 - beta2^t)``, and a delayed step of ``eta / tau_max_t`` rather than ``min(eta, 1/tau_max_t)``
(the two agree only at eta = 1, the code's default; with a small eta the text's rule never bites below
``1/eta`` steps of staleness). Defaults: beta1 0.9, beta2 0.99, eps 1e-8 and tau_c = 1 are the code's;
``server_lr`` 0.01 is ours (the code's default 1.0 moves every coordinate by about 1 per step).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check_choice, check_int, check_real
from .fedbuff import Buffered, BufferedSettings
from .registry import buffered, register

FORMS = ("paper", "code")


@dataclass(frozen=True)
class FADASSettings(BufferedSettings):
    """FADAS: server rate ``server_lr`` (eta), AMSGrad's ``beta1``, ``beta2``, ``eps``, the delay threshold
    ``tau_c`` (None: no delay adaptation) and ``form`` (the paper's text or the authors' code)."""

    server_lr: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    tau_c: int | None = 1
    form: str = "paper"

    def __post_init__(self):
        super().__post_init__()
        check_real("server_lr", self.server_lr, 0, strict_low=True)
        check_real("beta1", self.beta1, 0, 1, strict_high=True)
        check_real("beta2", self.beta2, 0, 1, strict_high=True)
        check_real("eps", self.eps, 0, strict_low=True)
        if self.tau_c is not None:
            check_int("tau_c", self.tau_c, 0, hint="a staleness in server steps, or None: no delay adaptation")
        check_choice("form", self.form, FORMS)


class FADAS(Buffered):
    """FADAS learner: AMSGrad on the buffer's mean update, its rate cut when the buffer is too stale."""

    def __init__(self, fed, history, cfg: FADASSettings):
        super().__init__(fed, history, cfg)
        self.eta, self.beta1, self.beta2, self.eps = float(cfg.server_lr), cfg.beta1, cfg.beta2, cfg.eps
        self.tau_c, self.code = cfg.tau_c, cfg.form == "code"
        self.m, self.v, self.v_max = (torch.zeros_like(self.w) for _ in range(3))
        self.steps = 0

    def rate(self, tau_max: int) -> float:
        """eta_t: eta, or the delayed rate once the buffer's largest staleness exceeds tau_c."""
        if self.tau_c is None or tau_max <= self.tau_c:
            return self.eta
        return self.eta / tau_max if self.code else min(self.eta, 1.0 / tau_max)

    def step(self, clients, updates, starts, staleness) -> None:
        self.steps += 1
        d = updates.mean(0)
        self.m = self.beta1 * self.m + (1 - self.beta1) * d
        self.v = self.beta2 * self.v + (1 - self.beta2) * d * d
        self.v_max = torch.maximum(self.v_max, self.v)
        eta, root = self.rate(max(staleness)), self.v_max.sqrt()
        if self.code:
            eta, root = eta / (1 - self.beta1 ** self.steps), root / (1 - self.beta2 ** self.steps) ** 0.5
        self.w = self.w - eta * self.m / (root + self.eps)


register("fadas", FADASSettings, FADAS, buffered,
         "FADAS (Wang et al.): FedBuff's buffer with an AMSGrad server step and a delay-adaptive rate")
