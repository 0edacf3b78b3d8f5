"""FedAsync (Xie, Koyejo & Gupta 2019, arXiv 1903.03934, Algorithm 1): the server mixes each arriving client
model into its own as soon as it arrives,

    x_t = (1 - alpha_t) x_{t-1} + alpha_t x_new,        alpha_t = alpha * s(t - tau)

where ``x_new`` is the client's model after its local steps, trained from the server model of version ``tau``
(``t - tau``: its staleness in server steps), and ``s`` the paper's staleness function (its Sec. 5.2;
:func:`afl.algorithms.fedbuff.staleness_weight`):

    constant  s = 1
    poly:a    s = (t - tau + 1)^(-a)                               (the paper's experiments: a = 0.5)
    hinge:a:b s = 1 if t - tau <= b, else 1 / (a (t - tau - b) + 1)   (a = 10, b = 4)

The clients solve the regularized local problem ``f_i(z) + rho/2 ||z - x_tau||^2`` with SGD (the proximal pull
of :class:`afl.algorithms.rounds.Drift`; ``rho = 0``, our default, is plain local SGD; the paper's CIFAR-10 runs
took 0.005 or 0.01). One update per server step: the buffered protocol with ``Z = 1``
(:func:`afl.algorithms.registry.buffered`). The paper's alpha in {0.6, 0.9}; 0.6 is our default.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import check_int, check_real
from .fedbuff import Buffered, BufferedSettings, staleness_weight
from .registry import buffered, register
from .rounds import Drift


@dataclass(frozen=True)
class FedAsyncSettings(BufferedSettings):
    """FedAsync: mixing weight ``alpha`` in (0, 1], the staleness function ``mixing`` and the clients' proximal
    weight ``rho``; ``Z`` is 1 (every arrival is a server step)."""

    Z: int = 1
    alpha: float = 0.6
    mixing: str = "constant"
    rho: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        check_int("Z", self.Z, 1, 1, hint="1: FedAsync mixes each update in as it arrives")
        check_real("alpha", self.alpha, 0, 1, strict_low=True)
        staleness_weight(self.mixing, "mixing")
        check_real("rho", self.rho, 0)


class FedAsync(Buffered):
    """FedAsync learner: ``x <- (1 - alpha s(tau)) x + alpha s(tau) x_new`` per arrival."""

    def __init__(self, fed, history, cfg: FedAsyncSettings):
        super().__init__(fed, history, cfg)
        self.alpha, self.s = float(cfg.alpha), staleness_weight(cfg.mixing, "mixing")
        self.hook = Drift(pull=float(cfg.rho)) if cfg.rho else None

    def step(self, clients, updates, starts, staleness) -> None:
        (update,), (start,), (tau,) = updates, starts, staleness
        alpha_t = self.alpha * self.s(tau)
        self.w = (1.0 - alpha_t) * self.w + alpha_t * (start - update)


register("fedasync", FedAsyncSettings, FedAsync, buffered,
         "FedAsync (Xie et al.): each arriving model mixed in with weight alpha * s(staleness)")
