"""Changes of meaning: commits after which a setting computes something else than before, without a field to say
so (a field added later is recorded by the setting's ``BEFORE``). A result computed before one of these is marked on
the board (``results/provenance.json``, written by ``tools/provenance.py``, says which result predates which)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Change:
    """A change of meaning: ``id``, the ``commit`` that made it and its ``date``, the ``experiments`` it touches,
    what changed (``what``), and which saved settings it touches (``applies``, given the result's ``config``)."""

    id: str
    commit: str
    date: str
    experiments: tuple
    what: str
    applies: Callable[[dict], bool] = lambda config: True


CHANGES = (
    Change("fedast-finish-and-realloc", "93c5ffde5340fd57a3eb036bde348de172ff2644", "2026-11-26",
           ("fedast-fig2", "fedast-fig5", "fedast-fig7", "fedast-d6"),
           "Sync-ST finishes a task at the aggregation that reaches its target, and FedAST's dynamic Realloc splits "
           "the requests in exact proportion (eq. 3)"),
    Change("dropout-seeding", "f041dbf", "2026-11-26", ("qafel-table1", "qafel-table2", "qafel-fig3"),
           "dropout masks are drawn from each run's own generator (before, a run with dropout depended on the "
           "process it ran in)", applies=lambda config: bool(config.get("dropout", 0.0))),
    Change("evaluation-after-step", "b229d860c5e8169a4559cbbea34530e741ef5588", "2026-11-27",
           ("favas-table2", "favas-fig1", "favas-fig2", "favas-ablation", "favas-fig3a", "favas-fig3b", "ghbm-table2",
            "ghbm-tau", "ghbm-alpha", "ghbm-fig1"),
           "an evaluation at the time of a server step sees the model after it, as the papers evaluate after the "
           "round (before, the model before it: GHBM's last-rounds average and FAVAS's final accuracy move by one "
           "step)"),
    Change("dropout-per-run", "b229d860c5e8169a4559cbbea34530e741ef5588", "2026-11-27", ("qafel-table1", "qafel-table2", "qafel-fig3"),
           "in a fleet, each dropout run trains in engine calls of its own (before, its masks depended on the runs "
           "beside it)", applies=lambda config: bool(config.get("dropout", 0.0))),
    Change("fedast-target-at-aggregation", "b229d860c5e8169a4559cbbea34530e741ef5588", "2026-11-27",
           ("fedast-fig2", "fedast-fig5", "fedast-fig7", "fedast-d6", "fedast-fig8", "fedast-fig9"),
           "FedAST tests its target after every aggregation as Sync-ST does, and both report that aggregation's time "
           "(before, FedAST noticed it on the evaluation grid and Sync-ST reported the next grid time)"),
)

__all__ = ["Change", "CHANGES"]
