"""FedBuff (Nguyen et al. 2022), as FAVAS (Leconte et al. 2023, Sec. 5) uses it and in its general form.

At most ``concurrency`` clients train at once; each trains K local steps from the server model it received
and uploads its update ``Delta_j = w_start - w_end``. The server buffers updates and, once Z have arrived,
steps

    g <- (1/Z) * sum_{j in buffer} s(tau_j) * Delta_j        (``reducer="mean"``; ``"sum"`` drops the 1/Z)
    m <- beta m + g,   w <- w - eta_g m                      (server SGD with momentum beta; beta = 0: w - eta_g g)

with server learning rate eta_g and staleness weight s(tau) of the update's staleness tau (server steps
since its client started): ``"none"`` (s = 1, as in FAVAS and the QuAFL code) or ``"sqrt"``
(s = 1 / sqrt(1 + tau), Nguyen et al. 2022). QAFeL's code (an FLSim fork) sums the buffer (``reducer="sum"``)
and steps with server momentum 0.3 (PyTorch's SGD momentum, the rule above).

After a server step the Z clients whose updates it used are idle again, and the server starts new clients,
drawn uniformly from the idle ones, on the new model until ``concurrency`` train
(:func:`afl.sim.schedule.simulate_buffered_schedule`).

With ``arrival_rate`` set, clients are not refilled after each server step but arrive at that rate (constant
gaps or Poisson), each drawn uniformly from the idle ones, as in QAFeL's FLSim code
(:func:`afl.sim.schedule.simulate_arrival_schedule`; ``concurrency`` then caps the clients in flight, and
server steps take no time, so ``server_time`` must be 0).

``concurrency=None`` -- every client trains all the time -- is how the public QuAFL code, which FAVAS built
its simulator on, runs FedBuff (with a local learning rate of ``lr Z / n``). With 100 always-busy clients and
Z = 10 the updates are about 9 server steps stale (19 for slow clients) and the first ten server steps all
apply updates computed at the initial model; Nguyen et al. bound the clients in flight by a concurrency.

:class:`Buffered` is the learner of this protocol without FedBuff's server step: QAFeL changes what clients start
from and receive, FedAsync, CA2FL and FADAS the server step (:meth:`Buffered.step`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import ParameterError, check_choice, check_int, check_real
from ..sim.arrivals import ARRIVALS
from .base import Learner, Settings
from .registry import buffered, register

#: named staleness weights s(tau): none (also "constant", FedAsync's name); FedBuff's 1/sqrt(1 + tau) (Nguyen et al.
#: 2022, the QAFeL paper's Fig. 3; "poly:0.5" below); FLSim's PolynomialStalenessWeight (exponent 0.5, avg_staleness
#: 1), the same divided by its value at tau = 1: sqrt(2 / (1 + tau)), a sqrt(2) larger step than "sqrt" at every tau
#: (QAFeL's code ran it)
STALENESS = {"none": lambda tau: 1.0, "constant": lambda tau: 1.0, "sqrt": lambda tau: 1.0 / math.sqrt(1.0 + tau),
             "sqrt-flsim": lambda tau: math.sqrt(2.0 / (1.0 + tau))}
#: FedAsync's families of staleness functions (Xie et al. 2019, Sec. 5) with its experiments' parameters as defaults:
#: ``poly:a`` is (1 + tau)^-a; ``hinge:a:b`` is 1 up to tau = b, then 1 / (a (tau - b) + 1)
STALENESS_FAMILIES = {"poly": (0.5,), "hinge": (10.0, 4.0)}
STALENESS_FORMS = ("'none' (or 'constant'), 'sqrt', 'sqrt-flsim', 'poly' or 'poly:a' (a > 0), 'hinge' or "
                   "'hinge:a:b' (a > 0, b >= 0)")
REDUCERS = ("mean", "sum")


def staleness_weight(spec: str, parameter: str = "staleness"):
    """``s(tau)`` from a spec (:data:`STALENESS`, :data:`STALENESS_FAMILIES`), one parser for every buffered method
    (FedBuff's and QAFeL's ``staleness``, FedAsync's ``mixing``); a bad spec is an error naming ``parameter``."""
    if spec in STALENESS:
        return STALENESS[spec]
    name, *values = str(spec).split(":")
    if name not in STALENESS_FAMILIES or len(values) not in (0, len(STALENESS_FAMILIES[name])):
        raise ParameterError(parameter, spec, STALENESS_FORMS)
    try:
        params = tuple(float(v) for v in values) or STALENESS_FAMILIES[name]
    except ValueError:
        raise ParameterError(parameter, spec, STALENESS_FORMS) from None
    if not all(math.isfinite(v) for v in params) or params[0] <= 0 or (name == "hinge" and params[1] < 0):
        raise ParameterError(parameter, spec, STALENESS_FORMS)
    if name == "poly":
        a = params[0]
        return lambda tau: (tau + 1.0) ** -a
    a, b = params
    return lambda tau: 1.0 if tau <= b else 1.0 / (a * (tau - b) + 1.0)


@dataclass(frozen=True)
class BufferedSettings(Settings):
    """What every buffered asynchronous method shares (FedBuff, QAFeL, FedAsync, CA2FL, FADAS): buffer ``Z``,
    ``concurrency`` (None: every client), the simulated time a server step takes (``server_time``, 10 in the QuAFL
    code), and optionally an ``arrival_rate`` of clients (``arrivals``: ``"constant"`` or ``"poisson"``)."""

    Z: int = 10
    concurrency: int | None = None
    server_time: float = 10.0
    arrival_rate: float | None = None
    arrivals: str = "constant"

    def __post_init__(self):
        super().__post_init__()
        check_int("Z", self.Z, 1)
        check_choice("arrivals", self.arrivals, ARRIVALS)
        if self.arrival_rate is not None:
            check_real("arrival_rate", self.arrival_rate, 0, strict_low=True)
            check_real("server_time", self.server_time, 0, 0, hint="0 with arrival_rate: server steps take no time "
                                                                   "in the arrival model")
        if self.concurrency is not None:
            check_int("concurrency", self.concurrency, self.Z, hint="at least Z, or None for every client")
        check_real("server_time", self.server_time, 0)

    def check_federation(self, fed) -> None:
        check_int("Z", self.Z, 1, fed.n, hint="n, the number of clients")
        if self.concurrency is not None:
            check_int("concurrency", self.concurrency, self.Z, fed.n, hint="Z to n, or None for every client")


@dataclass(frozen=True)
class FedBuffSettings(BufferedSettings):
    """FedBuff: server lr, momentum and reducer, and the staleness weight (FAVAS's FedBuff: none)."""

    server_lr: float = 1.0
    server_momentum: float = 0.0
    reducer: str = "mean"
    staleness: str = "none"

    def __post_init__(self):
        super().__post_init__()
        check_real("server_momentum", self.server_momentum, 0, 1, strict_high=True)
        check_choice("reducer", self.reducer, REDUCERS)
        check_real("server_lr", self.server_lr, 0, strict_low=True)
        staleness_weight(self.staleness)


class Buffered(Learner):
    """A buffered asynchronous learner: every started client trains K steps from what :meth:`start_model` gives
    it; at each server step the buffered updates ``Delta_j = w_start - w_end`` pass :meth:`received` (what the
    server holds of them) and :meth:`step` applies them; :meth:`after_step` follows (QAFeL broadcasts).
    ``self.hook``: a correction of the clients' local steps (FedAsync's proximal pull), None for plain SGD."""

    hook = None

    def __init__(self, fed, history, cfg: BufferedSettings):
        super().__init__(fed, history, cfg)
        self.version = 0
        self.jobs = {}

    def start_model(self):
        """The model a starting client downloads and trains from (the server model; counted as a download)."""
        self.history.counters["bytes_down"] += self.message_bytes()
        return self.w

    def received(self, updates):
        """What the server holds of the buffered updates ``(Z, P)`` (unchanged: full precision)."""
        return updates

    def step(self, clients: list[int], updates, starts: list, staleness: list[int]) -> None:
        """The server step from the buffered ``updates`` ``(Z, P)`` of ``clients``, trained from ``starts``,
        each ``staleness`` server steps old."""
        raise NotImplementedError

    def after_step(self) -> None:
        """After the server model changed (nothing here; QAFeL broadcasts)."""

    def on_start(self, client: int, t: float) -> None:
        start = self.start_model()
        job = self.queue.submit(client, start, self.K, self.lr, hook=self.hook)
        self.jobs[client] = (job, start, self.version)

    def on_server_step(self, t, contacts) -> None:
        self.history.record(t, self.w)
        updates, starts, staleness = [], [], []
        for c in contacts:
            job, start, version = self.jobs.pop(c.client)
            updates.append(start - job.result())
            starts.append(start)
            staleness.append(self.version - version)
        self.step([c.client for c in contacts], self.received(torch.stack(updates)), starts, staleness)
        self.version += 1
        self.count(contacts, downloads=0)
        self.after_step()


class FedBuff(Buffered):
    """FedBuff learner: the server applies the staleness-weighted mean (or sum) of Z updates with server momentum."""

    def __init__(self, fed, history, cfg: FedBuffSettings):
        super().__init__(fed, history, cfg)
        self.server_lr, self.weight = float(cfg.server_lr), staleness_weight(cfg.staleness)
        self.momentum, self.reducer = float(cfg.server_momentum), cfg.reducer
        self.velocity = torch.zeros_like(self.w)

    def step(self, clients, updates, starts, staleness) -> None:
        weights = torch.as_tensor([self.weight(tau) for tau in staleness], dtype=self.w.dtype, device=self.w.device)
        g = (weights[:, None] * updates).sum(0)
        if self.reducer == "mean":
            g = g / len(clients)
        self.velocity = self.momentum * self.velocity + g if self.momentum else g
        self.w = self.w - self.server_lr * self.velocity


register("fedbuff", FedBuffSettings, FedBuff, buffered,
         "FedBuff (Nguyen et al.): clients in flight up to a concurrency, server step per Z buffered updates")
