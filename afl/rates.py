"""Measured speeds: client-steps/s of a model or an experiment on a kind of machine, each computed from the committed
file that measured it, never typed in.

``results/measurements/rates.json`` lists the sources: ``{"key", "machine", "source"}`` and, for a benchmark's JSON
lines, ``"where"`` (the fields that pick its line). ``key`` is a model (``cnn-cifar``) or an experiment
(``fedast-fig7``, an end-to-end figure that includes its evaluations and schedule); ``machine`` a kind of machine
(``h100``, ``cpu-2``: this project's 2-core CPU). A source measures what its key names (a model's rate comes from
runs or a bench line of that model, an experiment's from a result of that experiment) and is

- a result that ``afl repro`` wrote (its runs computed by that command, none reused or resumed): its client steps
  over its wall seconds, the longest run's for a fleet or processes (their runs are live together), the sum
  otherwise; its machine line must name the device the kind implies; its methods take one mini-batch gradient a
  client step (a rate prices a job's gradients, :attr:`afl.budget.Work.cost`; MIME's runs take 2 to 3 and price
  nothing);
- a line of ``afl bench local-sgd --json`` (the engine alone: no evaluation, no server): ``engine_steps_per_s``.

:func:`load` recomputes every rate from its file; a missing, damaged or mismatched source is an error naming it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .algorithms.registry import REGISTRY
from .errors import ParameterError
from .repro import EXPERIMENTS, result_models

#: where the list of sources lives, under the repository
RATES = Path("results") / "measurements" / "rates.json"
#: the kinds of machine rates are kept for, with their words; a kind starting ``cpu`` runs on the CPU
MACHINES = {"h100": "one H100 GPU", "h200": "one H200 GPU", "cpu-2": "this project's 2-core CPU (AMD EPYC, AVX2)"}


@dataclass(frozen=True)
class Rate:
    """``value`` client-steps/s of ``key`` on ``machine``, measured by ``source`` (``what`` it ran)."""

    key: str
    machine: str
    value: float
    source: str
    what: str


class RatesError(ParameterError):
    """A rate's source is missing, damaged, or does not measure what its entry says."""

    def __init__(self, file, problem: str):
        super().__init__("rates", str(file), problem)


def measured(data: dict, file) -> tuple[int, float, str]:
    """``(client steps, wall seconds, what ran)`` of a result's runs, all computed by its command (a fleet's or
    processes' runs are live together: its longest run's wall time; otherwise the sum)."""
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise RatesError(file, "a result of afl repro with runs")
    if data.get("reused_runs") or data.get("resumed_runs"):
        raise RatesError(file, "a result whose runs its command computed (this one reused or resumed "
                         f"{data.get('reused_runs') or data.get('resumed_runs')} runs, so its wall time is not theirs)")
    steps, walls = 0, []
    for run in runs:
        name = str(run.get("method"))
        method = REGISTRY.get(name) or REGISTRY.get(name.split("-")[0])     # a variant by its base's name
        if method is not None and method.learner.gradients_per_job(1, 1) != 1:
            raise RatesError(file, f"a result of methods with one mini-batch gradient a client step (its "
                             f"{method.name} runs take more: a rate from them would price a job's gradients wrong)")
        parts = run["tasks"] if isinstance(run.get("tasks"), list) else [run]
        try:
            steps += sum(int(p.get("computed_client_steps", p.get("client_steps"))) for p in parts)
            walls.append(max(float(p["wall_seconds"]) for p in parts))
        except (KeyError, TypeError, ValueError):
            raise RatesError(file, "runs with client steps and wall seconds") from None
    execution = str(data.get("execution", ""))
    together = "fleet" in execution or "processes" in execution
    wall = max(walls) if together else sum(walls)
    if not (math.isfinite(wall) and wall > 0 and steps > 0):
        raise RatesError(file, "runs with positive client steps and wall seconds")
    return steps, wall, (f"{data.get('command', 'afl repro')}: {steps:,} client steps in {wall:,.0f} s "
                         f"({execution or 'runs one by one'}; {data.get('machine', 'machine not recorded')})")


def _bench_rate(lines: list[str], where: dict, key: str, file) -> tuple[float, str]:
    rows = []
    for k, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except ValueError:
            raise RatesError(f"{file}:{k}", "a JSON object per line (afl bench --json)") from None
        if isinstance(row, dict) and all(row.get(f) == v for f, v in where.items()):
            rows.append(row)
    if len(rows) != 1 or not isinstance(rows[0].get("engine_steps_per_s"), (int, float)):
        raise RatesError(file, f"one line of afl bench local-sgd --json with {where} (it has {len(rows)})")
    row = rows[0]
    if row.get("model") != key:
        raise RatesError(file, f"a bench line of {key} (the line {where} picks ran {row.get('model')})")
    return float(row["engine_steps_per_s"]), (
        f"afl bench local-sgd, the engine alone (no evaluation or server step): {row.get('model')}, "
        f"{row.get('clients')} clients a call, {row.get('precision')}, on {row.get('card', 'the machine')}")


def _check_trained(data: dict, key: str, file) -> None:
    """That a result measures ``key``: a result of that experiment, or one whose runs trained only that model (a
    quick setting may replace a task's model: FedAST's quick Fashion-MNIST runs the MLP, not LeNet-5)."""
    if key in EXPERIMENTS:
        if data.get("experiment") != key:
            raise RatesError(file, f"a result of {key} (it is one of {data.get('experiment')})")
        return
    try:
        models = result_models(data)
    except (ParameterError, KeyError, TypeError) as error:
        raise RatesError(file, f"a result whose setting afl reads ({error})") from None
    if set(models) != {key}:
        raise RatesError(file, f"a result whose runs train {key} alone (they train {', '.join(models)})")


def measure(entry: dict, root: Path) -> Rate:
    """An entry of the rates file, its rate computed from its source under ``root``."""
    try:
        key, machine, source = entry["key"], entry["machine"], entry["source"]
    except (KeyError, TypeError):
        raise RatesError(root / RATES, "entries of key, machine and source") from None
    if machine not in MACHINES:
        raise RatesError(root / RATES, f"a machine among {', '.join(MACHINES)} (an entry says {machine!r})")
    file = (root / source).resolve()
    if not file.is_relative_to(root.resolve() / "results") or not file.is_file():
        raise RatesError(source, "a committed file under results/ (it is missing)")
    text = file.read_text()
    if file.suffix == ".jsonl":
        value, what = _bench_rate(text.splitlines(), entry.get("where") or {}, key, source)
    else:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise RatesError(source, f"a JSON result ({error})") from None
        steps, wall, what = measured(data, source)
        _check_trained(data, key, source)
        value = steps / wall
        device = "device cpu" if machine.startswith("cpu") else "device cuda"
        if device not in str(data.get("machine", "")):
            raise RatesError(source, f"a result computed with {device} (the kind {machine!r} implies)")
    return Rate(key, machine, value, source, what)


def load(root: Path) -> list[Rate]:
    """Every rate the repository at ``root`` measured (:data:`RATES`), recomputed from its source."""
    path = Path(root) / RATES
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise RatesError(path, f"a readable list of measured rates ({error.strerror})") from None
    except ValueError as error:
        raise RatesError(path, f"a JSON list of measured rates ({error})") from None
    entries = data.get("rates") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise RatesError(path, 'a JSON object {"rates": [{key, machine, source}, ...]}')
    rates = [measure(e, Path(root)) for e in entries]
    seen = set()
    for r in rates:
        if (r.key, r.machine) in seen:
            raise RatesError(path, f"one source per key and machine ({r.key} on {r.machine} is listed twice)")
        seen.add((r.key, r.machine))
    return rates


def lookup(rates: list[Rate], keys, machine: str) -> Rate | None:
    """The rate of the first of ``keys`` (an experiment, then models) measured on ``machine``; for several models
    the slowest's (a run of several models goes no faster than its slowest); None if none is measured."""
    for key in keys:
        if isinstance(key, tuple):
            found = [r for r in rates if r.machine == machine and r.key in key]
            if found and {r.key for r in found} == set(key):
                return min(found, key=lambda r: r.value)
            continue
        found = [r for r in rates if r.machine == machine and r.key == key]
        if found:
            return found[0]
    return None


__all__ = ["RATES", "MACHINES", "Rate", "RatesError", "measured", "measure", "load", "lookup"]
