"""Paper reproductions: each paper's experiments as settings (quick and paper scale) plus compute/plot functions."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..errors import check, check_choice
from .runner import Estimated, estimating, read_result
from . import favas, fedast, ghbm, qafel

#: the four papers' folders of results/ (an experiment named ``<paper>-...`` lives in its paper's)
PAPER_FOLDERS = ("favas", "qafel", "ghbm", "fedast")
#: experiment name -> module that computes it
EXPERIMENTS = {name: module for module in (favas, qafel, ghbm, fedast) for name in module.EXPERIMENTS}


def canonical_out(name: str, quick: bool = False, **overrides) -> str:
    """``results/<paper>/<experiment>``: where experiment ``name``'s canonical result lives, the default ``--out``
    (``results/<experiment>`` for one beyond the four papers);
    GHBM's Table 2 by its dataset (``results/ghbm/cifar10``, ``/shakespeare``, ``/fashion-mnist``). A run of another
    setting lives beside it, in a sub-folder whose name says the setting."""
    check_choice("experiment", name, EXPERIMENTS)
    paper, _, short = name.partition("-")
    if paper not in PAPER_FOLDERS:                  # beyond the four papers (``async-family``): a folder of its own
        return f"results/{name}"
    if name == "ghbm-table2":
        short = ghbm.setting(name, quick=quick, **overrides).dataset.removesuffix("-jpeg")
    return f"results/{paper}/{short}"


#: the keywords of :func:`run_experiment` that are not fields of the experiment's setting
RUN_OPTIONS = ("quick", "seeds", "out", "root", "device", "progress", "fresh", "reuse", "fleet", "fleet_size", "ray",
               "processes", "allow_large")


def run_experiment(name: str, out=None, **kwargs):
    """Compute experiment ``name`` and write its JSON, markdown table and figure (see the paper's module) into
    ``out`` (default: :func:`canonical_out`)."""
    check_choice("experiment", name, EXPERIMENTS)
    if out is None:
        out = canonical_out(name, quick=kwargs.get("quick", False),
                            **{k: v for k, v in kwargs.items() if k not in RUN_OPTIONS})
    return EXPERIMENTS[name].run_experiment(name, out=out, **kwargs)


def estimate(name: str, quick: bool = False, seeds: int | None = None, **overrides):
    """What ``afl repro NAME`` with these options would compute, without computing or creating anything: its
    :class:`afl.budget.Work` (client steps and evaluations of the whole grid)."""
    with estimating():
        try:
            run_experiment(name, quick=quick, seeds=seeds, out=str(Path(tempfile.gettempdir()) / "afl-estimate"),
                           progress=False, **overrides)
        except Estimated as done:
            return done.work
    raise RuntimeError(f"afl repro {name} computed without estimating its work")   # every grid goes through execute


def trained_models(name: str, cfg) -> tuple:
    """The models experiment ``name`` trains in setting ``cfg`` (FedAST's: each task's, in order)."""
    if isinstance(getattr(cfg, "model", None), str):
        return (cfg.model,)
    if hasattr(cfg, "tasksets"):
        return tuple(dict.fromkeys(cfg.model(d)[0] for t in cfg.tasksets for d in fedast.parse_taskset(t)))
    return (EXPERIMENTS[name].MODEL,)


def result_models(result: dict) -> tuple:
    """The models a result of ``afl repro`` (:func:`read_result`) trained, read from its saved setting."""
    name = result["experiment"]
    check_choice("experiment", name, EXPERIMENTS)
    cfg = EXPERIMENTS[name].setting(name, quick=bool(result.get("quick")), **result["config"])
    return trained_models(name, cfg)


def repo_root(start=None) -> Path:
    """The afl checkout holding ``start`` (default: the current folder; a notebook runs in ``notebooks/``), else
    the one this package was imported from."""
    start = Path(start or Path.cwd()).resolve()
    for d in (start, *start.parents):
        if (d / "pyproject.toml").is_file() and (d / "afl").is_dir():
            return d
    return Path(__file__).resolve().parents[2]


def committed(path: str, root=None) -> dict | None:
    """A result committed under ``results/`` by ``afl repro``: ``path`` is an experiment's name (its canonical
    folder, :func:`canonical_out`) or a path under ``results/`` without ``.json`` (``"ghbm/shakespeare/ghbm-table2"``).
    None, after printing the command that makes it, while it is not committed."""
    if "/" not in path:
        path = f"{canonical_out(path).removeprefix('results/')}/{path}"
    file = repo_root(root) / "results" / f"{path}.json"
    if not file.is_file():
        name = Path(path).name
        print(f"results/{path}.json is missing: run `afl repro {name} --out {Path('results', path).parent}` "
              "(or with --quick) first")
        return None
    return json.loads(file.read_text())


def replot(name: str, out=None):
    """Rewrite experiment ``name``'s markdown, figure and the JSON's summary rows from the runs of its JSON in
    ``out``, computing nothing (the runs are kept as they are: a summary changed since, e.g. the ddof-1 std of
    :mod:`afl.stats`, reaches every file)."""
    check_choice("experiment", name, EXPERIMENTS)
    out = canonical_out(name) if out is None else out
    path = Path(out) / f"{name}.json"
    check(path.is_file(), "out", str(out), f"a folder holding {name}.json (run the experiment first)")
    result = read_result(path, "out")
    check(result["experiment"] == name, "out", str(out), f"a folder holding {name}.json written by afl repro {name} "
          f"(it holds {result['experiment']}'s result)")
    return EXPERIMENTS[name].write_result(result, out)


def report(result: dict, per_run: bool = True) -> str:
    """The markdown of a result JSON written by ``afl repro`` (by its paper's module)."""
    return EXPERIMENTS[result["experiment"]].report(result, per_run=per_run)


__all__ = ["EXPERIMENTS", "PAPER_FOLDERS", "canonical_out", "committed", "estimate", "repo_root", "result_models",
           "run_experiment", "replot", "report", "trained_models"]
