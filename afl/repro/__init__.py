"""Paper reproductions: each paper's experiments as settings (quick and paper scale) plus compute/plot functions."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import check, check_choice
from .runner import read_result
from . import favas, fedast, ghbm, qafel

#: experiment name -> module that computes it
EXPERIMENTS = {name: module for module in (favas, qafel, ghbm, fedast) for name in module.EXPERIMENTS}


def run_experiment(name: str, **kwargs):
    """Compute experiment ``name`` and write its JSON, markdown table and figure (see the paper's module)."""
    check_choice("experiment", name, EXPERIMENTS)
    return EXPERIMENTS[name].run_experiment(name, **kwargs)


def replot(name: str, out="results"):
    """Rewrite experiment ``name``'s markdown, figure and the JSON's summary rows from the runs of its JSON in
    ``out``, computing nothing (the runs are kept as they are: a summary changed since, e.g. the ddof-1 std of
    :mod:`afl.stats`, reaches every file)."""
    check_choice("experiment", name, EXPERIMENTS)
    path = Path(out) / f"{name}.json"
    check(path.is_file(), "out", str(out), f"a folder holding {name}.json (run the experiment first)")
    result = read_result(path, "out")
    check(result["experiment"] == name, "out", str(out), f"a folder holding {name}.json written by afl repro {name} "
          f"(it holds {result['experiment']}'s result)")
    return EXPERIMENTS[name].write_result(result, out)


def report(result: dict, per_run: bool = True) -> str:
    """The markdown of a result JSON written by ``afl repro`` (by its paper's module)."""
    return EXPERIMENTS[result["experiment"]].report(result, per_run=per_run)


__all__ = ["EXPERIMENTS", "run_experiment", "replot", "report"]
