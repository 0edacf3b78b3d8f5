"""Algorithms by name: each registers its settings dataclass, its learner and its protocol.

Adding an algorithm touches one module: it defines ``Settings`` (a dataclass extending
:class:`~afl.algorithms.base.Settings`, defaults from its paper), a learner, and calls :func:`register` with
one of the protocols below (or its own). :func:`afl.algorithms.run_algorithm` looks the name up and builds
the settings from keyword arguments; a key the algorithm does not have is an error naming the allowed ones
(and the algorithms it belongs to, if any).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable

from ..errors import ParameterError, check_choice
from ..sim.arrivals import make_arrivals
from ..sim.schedule import (ScheduleResult, simulate_arrival_schedule, simulate_async_schedule,
                            simulate_buffered_schedule, simulate_rounds, simulate_sync_schedule)


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: ``settings`` class, ``learner`` class, and ``protocol(fed, cfg, learner, t_end)``
    that runs the simulator with the learner attached and returns its :class:`~afl.sim.ScheduleResult`."""

    name: str
    settings: type
    learner: type
    protocol: Callable[..., ScheduleResult]
    summary: str

    def setting_names(self) -> list[str]:
        return [f.name for f in fields(self.settings)]

    def make_settings(self, **values):
        """The algorithm's settings from keyword arguments (its paper's defaults for the rest)."""
        allowed = self.setting_names()
        for key, value in values.items():
            if key not in allowed:
                owners = [a.name for a in REGISTRY.values() if key in a.setting_names()]
                where = f"; {key!r} is a setting of {', '.join(owners)}" if owners else ""
                raise ParameterError(key, value, f"a setting of {self.name!r}: {', '.join(allowed)}{where}")
        return self.settings(**values)


REGISTRY: dict[str, Algorithm] = {}


def register(name: str, settings: type, learner: type, protocol: Callable[..., ScheduleResult], summary: str) -> None:
    """Make algorithm ``name`` available to :func:`afl.algorithms.run_algorithm`."""
    REGISTRY[name] = Algorithm(name, settings, learner, protocol, summary)


def get(name: str) -> Algorithm:
    check_choice("algorithm", name, REGISTRY)
    return REGISTRY[name]


# -- protocols: the simulator's schedules, with settings taken from the algorithm's dataclass --------------

def server_clock(fed, cfg, learner, t_end: float, checkpoint=None) -> ScheduleResult:
    """Every ``cfg.server_interval`` the server contacts ``cfg.s`` uniform clients (FAVAS, QuAFL). ``checkpoint``
    (every protocol takes one): a :class:`afl.checkpoint.RunCheckpoint` the run saves to and goes on from."""
    return simulate_async_schedule(fed.profile, K=cfg.K, s=cfg.s, server_interval=cfg.contact_interval(),
                                   t_end=t_end, seed=fed.seed, learner=learner, checkpoint=checkpoint)


def buffered(fed, cfg, learner, t_end: float, checkpoint=None) -> ScheduleResult:
    """At most ``cfg.concurrency`` clients train K steps; the server steps per ``cfg.Z`` updates (FedBuff). With
    ``cfg.arrival_rate``, clients arrive at that rate instead of being refilled after each server step."""
    if getattr(cfg, "arrival_rate", None) is not None:
        return simulate_arrival_schedule(fed.profile, K=cfg.K, Z=cfg.Z, arrivals=make_arrivals(cfg.arrivals,
                                         cfg.arrival_rate), t_end=t_end, seed=fed.seed, concurrency=cfg.concurrency,
                                         learner=learner, checkpoint=checkpoint)
    return simulate_buffered_schedule(fed.profile, K=cfg.K, Z=cfg.Z, t_end=t_end, seed=fed.seed,
                                      server_time=cfg.server_time, concurrency=cfg.concurrency, learner=learner,
                                      checkpoint=checkpoint)


def synchronous(fed, cfg, learner, t_end: float, checkpoint=None) -> ScheduleResult:
    """Rounds of ``cfg.s`` clients: unit-time rounds, uniform or cyclic (``cfg.timing == "rounds"``, GHBM), or
    rounds that end with their slowest client plus ``cfg.server_time`` (``"slowest"``, FAVAS's FedAvg)."""
    if cfg.timing == "rounds":
        return simulate_rounds(fed.profile, cfg.K, cfg.s, t_end, seed=fed.seed, sampling=cfg.sampling,
                               learner=learner, checkpoint=checkpoint)
    return simulate_sync_schedule(fed.profile, K=cfg.K, s=cfg.s, t_end=t_end, seed=fed.seed,
                                  server_time=cfg.server_time, learner=learner, checkpoint=checkpoint)


__all__ = ["Algorithm", "REGISTRY", "register", "get", "server_clock", "buffered", "synchronous"]
