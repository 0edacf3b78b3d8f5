"""How much a run or a command computes, estimated before it starts, and the limits above which afl asks first.

A mistyped ``total_time=1e300`` or ``eval_every=1e-9`` would compute with no end in sight; a huge ``rounds`` would
run for years. Each experiment's setting estimates its work per run (:class:`Work`: client steps and evaluations,
an upper bound from the setting alone, and the fields that set them); a command multiplies it by its runs, and
:func:`check_work` refuses what lies above :data:`MAX_CLIENT_STEPS` or :data:`MAX_EVALUATIONS`, naming the field,
the estimate and the flag that allows it. The limits lie far above every paper setting: GHBM's whole CIFAR-10
Table 2 is 2.1e8 client steps and 2.6e4 evaluations; 1e9 client steps are about four days of an H100 on cnn-cifar.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError

#: client steps (local SGD steps of one client) a command or a run computes without being allowed more
MAX_CLIENT_STEPS = 1e9
#: evaluations of a server model a command or a run makes without being allowed more
MAX_EVALUATIONS = 1e6
#: samples of one client's batch at most (the papers use 32 to 128; one client's batch is one tensor in memory)
MAX_BATCH = 65_536
#: samples the clients of a federation hold together at most (their index tensors; a dataset has far fewer)
MAX_HELD = 10**8
#: clients of the sample whose speeds stand for a federation's in an estimate (divisible by 4 and 9: FAVAS's and
#: FedAST's speed classes come out in their exact proportions)
SAMPLE_CLIENTS = 900


@dataclass(frozen=True)
class Work:
    """At most ``client_steps`` and ``evaluations`` in ``runs`` runs; ``steps_set_by`` and ``evaluations_set_by``:
    the fields of the setting that set each, ``{field: value}``, the first the one an error names unless the user
    changed another (:func:`check_work`). ``gradients``: the mini-batch gradients those runs compute at most, where
    a method computes more than one per client step (MIME's SVRG correction and full-batch pass); None: one per
    step. A measured rate of client steps per second prices the gradients (:attr:`cost`, :mod:`afl.plan`)."""

    client_steps: float
    evaluations: float
    steps_set_by: dict
    evaluations_set_by: dict
    runs: int = 1
    gradients: float | None = None

    @property
    def cost(self) -> float:
        """Mini-batch gradients computed at most: what a rate measured in client steps per second (of a method with
        one gradient a step) prices."""
        return self.client_steps if self.gradients is None else self.gradients

    def times(self, runs: int) -> "Work":
        """The work of ``runs`` such runs."""
        return Work(self.client_steps * runs, self.evaluations * runs, self.steps_set_by, self.evaluations_set_by,
                    self.runs * runs, None if self.gradients is None else self.gradients * runs)

    def share(self, runs: int) -> "Work":
        """The work of ``runs`` of these runs, all alike (``runs`` of :attr:`runs`)."""
        f = runs / self.runs
        return Work(self.client_steps * f, self.evaluations * f, self.steps_set_by, self.evaluations_set_by, runs,
                    None if self.gradients is None else self.gradients * f)

    def describe(self) -> str:
        per = f" ({self.runs:,} runs)" if self.runs != 1 else ""
        return f"about {_n(self.client_steps)} client steps and {_n(self.evaluations)} evaluations{per}"


def evaluations(horizon: float, every: float) -> float:
    """Evaluations on the grid ``0, every, 2 every, ... <= horizon``."""
    return math.floor(horizon / every) + 1 if math.isfinite(horizon / every) else math.inf


def busy_clients_work(mean_step_times, total_time: float, eval_every: float, models: int = 1,
                      clients: int | None = None) -> Work:
    """At most the work of clients that train without a pause for ``total_time`` (a client cannot compute faster
    than its mean step time: ``total_time * sum_i 1 / E[step time_i]`` client steps), with ``models`` server models
    evaluated every ``eval_every``. ``clients``: that many clients in the proportions of ``mean_step_times`` (a
    sample of the federation: a setting's estimate never builds a profile of a billion clients)."""
    mean_step_times = np.asarray(mean_step_times, dtype=float)
    rate = float(np.sum(1.0 / mean_step_times)) * (1 if clients is None else clients / len(mean_step_times))
    return Work(total_time * rate, models * evaluations(total_time, eval_every), {"total_time": total_time},
                {"eval_every": eval_every, "total_time": total_time})


def fields_of(setting, *names: str) -> dict:
    """``{name: value}`` of the fields ``names`` of ``setting`` (what sets a :class:`Work`)."""
    return {name: getattr(setting, name) for name in names}


def check_work(work: Work, allow: bool, flag: str, changed=()) -> Work:
    """``work`` if it lies within the limits or ``allow`` is set; a :class:`~afl.errors.ParameterError` otherwise,
    naming a field that sets the part over its limit (one of ``changed``, the fields the user set, where one is),
    the estimate, and ``flag`` (what allows it)."""
    if allow:
        return work
    for amount, limit, set_by, what in (
            (work.client_steps, MAX_CLIENT_STEPS, work.steps_set_by, "client steps"),
            (work.evaluations, MAX_EVALUATIONS, work.evaluations_set_by, "evaluations")):
        if not amount <= limit:
            field = next((f for f in set_by if f in changed), next(iter(set_by)))
            value = set_by[field]
            raise ParameterError(field, value, f"a setting of at most {_n(limit)} {what} (this one computes "
                                 f"{work.describe()}); {flag} runs it anyway")
    return work


def _n(x: float) -> str:
    return "unboundedly many" if not math.isfinite(x) else f"{x:,.0f}" if x < 1e6 else f"{x:.2g}"


__all__ = ["MAX_CLIENT_STEPS", "MAX_EVALUATIONS", "MAX_BATCH", "MAX_HELD", "SAMPLE_CLIENTS", "Work", "evaluations",
           "fields_of", "busy_clients_work", "check_work"]
