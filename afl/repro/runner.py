"""An experiment's grid of runs, whatever the paper: compute every run (as one fleet, one by one, or as fleets
on Ray), save each as it ends, resume an interrupted invocation, reuse the same runs from other results, and
record how and where it all ran.

A paper's module says what its runs are (a :class:`Grid`): their keys in table order, the function that
computes a list of keys on one machine, and whether a saved run is still the run it would compute now.
"""
from __future__ import annotations

import contextvars
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, fields, replace
from functools import partial as partial_fn
from pathlib import Path
from typing import Callable

import torch

from ..algorithms import get as get_algorithm
from ..budget import check_work
from ..checkpoint import every_s
from ..compress import Quantizer
from ..errors import ParameterError, RunsFailed, check, check_choice, check_int
from ..fleet import (DEFAULT_SIZE, check_ray_address, process_parts, process_threads, run_fleet, run_in_processes,
                     run_on_ray, run_one_by_one)
from ..results import PartialRuns, RunProgress, output_dir, rescue_dir, setting_key
from ..runtime import cpu_kind, flush_denormals


#: seeds a grid takes at most (a grid's keys are made before it runs: a billion seeds took 9 GB in 20 s)
MAX_SEEDS = 10_000


@dataclass
class Grid:
    """The runs of experiment ``name`` under setting ``cfg`` (a dataclass).

    ``work(keys, on_outcome=...)`` computes runs on one machine and returns their :class:`~afl.fleet.Outcome`
    list (a picklable ``functools.partial`` of a module function, so that Ray can ship it); ``key_of(run)`` is
    a saved run's key; ``current(run)`` says whether a saved run is still what ``work`` would compute (its
    method's settings may have changed since). ``selection``: the fields of ``cfg`` that only choose which
    runs are made (seeds, methods, ...); runs saved under settings equal in all other fields are reusable.
    ``checkpoints``: whether ``work`` takes ``checkpoints=FOLDER``, where its runs save their state as they go
    (:mod:`afl.checkpoint`) and from which a stopped run goes on. ``unread(key)``: the fields of ``cfg`` the run of
    ``key`` does not read (one method's options, for the other methods): a saved run is reusable under settings
    that differ only there too.
    """

    name: str
    cfg: object
    keys: list[tuple]
    work: Callable
    key_of: Callable[[dict], tuple]
    current: Callable[[dict], bool] = lambda run: True
    selection: tuple = ("seeds",)
    checkpoints: bool = False
    unread: Callable[[tuple], tuple] = lambda key: ()

    @property
    def setting_key(self) -> str:
        return setting_key(self.cfg, self.selection)


def compute(grid: Grid, *, done=(), partial: PartialRuns | None = None, progress: bool = True,
            fleet: bool = True, ray: str | None = None, processes: int | None = None, device="cpu",
            checkpoints=None) -> list[dict]:
    """Every run of ``grid`` in key order: those in ``done`` as they are, the others computed by ``grid.work``
    (in ``processes`` processes of this machine, or as Ray tasks, each running ``grid.work`` on a part of the
    keys: :func:`~afl.fleet.run_in_processes`, :func:`~afl.fleet.run_on_ray`) and appended to ``partial`` as each
    ends. ``checkpoints``: the folder of the runs' checkpoints, for a grid that saves them.
    A failed run fails alone: the others finish and are saved, then :class:`~afl.errors.RunsFailed` names each
    failed run with its error."""
    check_spread(processes, ray)
    have = {grid.key_of(r): r for r in done}
    todo = [k for k in grid.keys if k not in have]
    work = partial_fn(grid.work, checkpoints=str(checkpoints)) if grid.checkpoints and checkpoints else grid.work
    failed = []
    with RunProgress(len(grid.keys), progress, done=len(grid.keys) - len(todo),
                     description="fleet" if fleet else "one by one",
                     at_most=getattr(grid.cfg, "target", None) is not None) as bar:
        def finished(outcome) -> None:
            if outcome.ok:
                have[outcome.key] = outcome.value
                if partial is not None:
                    partial.append(outcome.value)
            else:
                failed.append(outcome)
            bar.finished(outcome.key)

        if ray is None and (processes or 1) == 1:
            work(todo, on_outcome=finished)
        elif ray is None:
            run_in_processes(work, todo, processes, on_outcome=finished)
        else:
            run_on_ray(work, todo, address=ray, num_gpus=1 if torch.device(device).type == "cuda" else 0,
                       on_outcome=finished)
    if failed:
        raise RunsFailed([(o.key, o.error) for o in failed])
    return [have[k] for k in grid.keys]


def check_spread(processes: int | None, ray: str | None) -> None:
    """How a grid is spread: ``processes`` (at least one) or a Ray address, not both."""
    if processes is not None:
        check_int("processes", processes, 1)
        check(ray is None, "processes", processes, "no Ray address as well (Ray places its own tasks)")


def run_tasks(tasks: list, *, fleet: bool = True, fleet_size: int | None = None, on_outcome=None) -> list:
    """Run ``(key, task)`` pairs on this machine as one fleet (at most ``fleet_size`` live) or one by one; the
    :class:`~afl.fleet.Outcome` of each, in order."""
    if fleet:
        return run_fleet(tasks, size=fleet_size, on_outcome=on_outcome)
    return run_one_by_one(tasks, on_outcome=on_outcome)


def settings_record(cfg) -> dict:
    """An algorithm's settings as they are stored with a run (JSON: a quantizer by its spec)."""
    return {k: (v.spec if isinstance(v, Quantizer) else v) for k, v in asdict(cfg).items()}


def same_settings(recorded: dict | None, algorithm: str, ignore=(), **values) -> bool:
    """Whether the settings a saved run recorded are those ``algorithm`` gets from ``values`` now (``ignore``: keys
    left out of the comparison; no record: False). A setting the record lacks was added to the algorithm after the
    run was saved: it counts as its default, so that older results stay reusable exactly where they are still the
    same runs."""
    if recorded is None:
        return False
    algo = get_algorithm(algorithm)
    want = settings_record(algo.make_settings(**values))
    default = settings_record(algo.make_settings())
    if not set(recorded) <= set(want):
        return False
    return all(recorded.get(k, default[k]) == v for k, v in want.items() if k not in ignore)


def read_result(path, name: str) -> dict:
    """A result JSON written by ``afl repro`` (its ``experiment``, ``config`` and ``runs``); a :class:`ParameterError`
    naming ``name`` (the option that gave the path) and the file otherwise."""
    try:
        result = json.loads(Path(path).read_text())
        ok = isinstance(result, dict) and {"experiment", "config", "runs"} <= set(result)
        why = ""
    except (OSError, ValueError) as error:
        ok, why = False, f": {error}"
    if not ok:
        raise ParameterError(name, str(path), f"a result JSON written by afl repro, with its experiment, config and "
                             f"runs{why}")
    return result


def saved_config(cls: type, config: dict) -> dict:
    """A saved result's setting (``config``) with every field of ``cls`` it lacks: what the run was computed with
    before the field existed, ``cls.BEFORE[field]`` where the setting names it (QAFeL's dropout was 0 before it
    became a field; ``BEFORE`` may be a function of the saved config), else the field's default."""
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    before = getattr(cls, "BEFORE", {})
    return defaults | (before(config) if callable(before) else before) | config


def same_setting(saved: dict, grid: Grid) -> bool:
    """Whether a saved result's setting is ``grid``'s apart from the selection fields (:func:`saved_config`)."""
    config = saved_config(type(grid.cfg), saved["config"])
    return setting_key(config, grid.selection) == grid.setting_key


def reusable_runs(other: dict, grid: Grid) -> list[dict]:
    """The runs of another experiment's result (:func:`read_result`) that ``grid`` would compute exactly so: same
    setting (:func:`same_setting`) but for the fields each run does not read (``grid.unread``), and each still
    current."""
    if same_setting(other, grid):
        return [r for r in other["runs"] if grid.current(r)]
    config = saved_config(type(grid.cfg), other["config"])

    def same(run: dict) -> bool:
        unread = tuple(grid.unread(grid.key_of(run)))
        ignore = (*grid.selection, *unread)
        return bool(unread) and setting_key(config, ignore) == setting_key(grid.cfg, ignore)
    return [r for r in other["runs"] if same(r) and grid.current(r)]


def check_replaceable(grid: Grid, out) -> None:
    """Refuse, before anything is computed, to replace ``OUT/<name>.json`` when it holds runs the new result would
    not contain (another setting, or runs the new grid does not make): ``--fresh`` replaces it, ``--out`` writes
    elsewhere. A result of the same setting whose runs are all in the new grid is replaced (they are computed again,
    or resumed, or reused)."""
    path = Path(out) / f"{grid.name}.json"
    if not path.is_file():
        return
    try:
        saved = json.loads(path.read_text())
        kept = same_setting(saved, grid) and {grid.key_of(r) for r in saved["runs"]} <= set(grid.keys)
        held = f"{len(saved['runs'])} runs"
    except (ValueError, KeyError, TypeError):
        kept, held = False, "something afl cannot read as a result"
    if not kept:
        raise ParameterError("--out", str(out), f"a folder whose {path.name} this command may replace: it holds {held} "
                             "that this result would not contain (another setting, or fewer runs); add --fresh to "
                             "replace it, or write elsewhere with --out")


class OutputLock:
    """One ``afl repro`` of an experiment at a time in an output folder: an exclusive ``flock`` on
    ``OUT/.<name>.lock`` (the system frees it when the process ends, however it ends), holding the holder's pid."""

    def __init__(self, out: Path, name: str):
        import fcntl
        self.path = out / f".{name}.lock"
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise ParameterError("--out", str(out), f"a folder no other afl command is writing {name} in (process "
                                 f"{holder} is; wait for it to end, or use another --out)") from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()

    def release(self) -> None:
        if not self.file.closed:
            self.path.unlink(missing_ok=True)
            self.file.close()


@dataclass
class Execution:
    """What :func:`execute` computed and how: the runs in key order, the partial file to discard once the
    results are written, the record that goes into the result JSON, and the output folder's lock."""

    runs: list[dict]
    partial: PartialRuns
    record: dict
    lock: OutputLock | None = None

    def publish(self, fields: dict, out, write: Callable[[dict, Path], list[Path]]) -> list[Path]:
        """Write the result (the record, ``fields`` and the runs) with ``write``, then discard the partial file and
        free the folder."""
        result = self.record | fields | {"runs": self.runs}
        try:
            paths = write(result, Path(out))
            self.partial.discard()
        except OSError as error:         # the folder became unwritable: the result goes elsewhere, and says where
            rescue = rescue_dir() / f"{self.record['experiment']}.json"
            rescue.parent.mkdir(parents=True, exist_ok=True)
            rescue.write_text(json.dumps(result, indent=1))
            raise ParameterError("--out", str(out), f"a folder afl can write the result to (writing it failed: "
                                 f"{error.strerror or error}); the result, all {len(self.runs)} runs, is in {rescue} "
                                 f"(afl repro {self.record['experiment']} --replot --out {rescue.parent} draws it)"
                                 ) from None
        finally:
            if self.lock is not None:
                self.lock.release()
        return paths


class Estimated(Exception):
    """Raised by :func:`execute` inside :func:`estimating`, before anything is created: the grid's ``work``."""

    def __init__(self, work):
        super().__init__(work.describe())
        self.work = work


_ESTIMATING = contextvars.ContextVar("afl_estimating", default=False)


@contextmanager
def estimating():
    """Within it, :func:`execute` raises :class:`Estimated` with its grid's work instead of computing (what an
    invocation would cost, e.g. for a claim not run yet: :mod:`afl.scoreboard`)."""
    token = _ESTIMATING.set(True)
    try:
        yield
    finally:
        _ESTIMATING.reset(token)


def stop_if_estimating(work) -> None:
    """Within :func:`estimating`, raise :class:`Estimated` with ``work``, before anything is created (every
    command that computes calls it: :func:`execute`, the quadratic)."""
    if _ESTIMATING.get():
        raise Estimated(work)


def execute(grid: Grid, *, out, quick: bool, seeds: int | None = None, fresh: bool = False, reuse=(),
            progress: bool = True, fleet: bool = True, fleet_size: int | None = None, ray: str | None = None,
            processes: int | None = None, device="cpu", overrides: dict | None = None,
            allow_large: bool = False) -> Execution:
    """Compute ``grid`` for ``afl repro`` (``grid.work`` already runs as ``fleet``/``fleet_size`` say; they are
    recorded here, with ``ray`` and ``processes``, see :func:`compute`): runs saved in ``OUT/<name>.partial.jsonl``
    by an interrupted invocation are resumed (``fresh=True`` discards them first), runs of the JSON results in
    ``reuse`` are taken where they are the same runs, and the rest is computed (:func:`compute`); a run stopped
    midway goes on from its checkpoint in ``OUT/<name>.checkpoints/`` (grids that save them; ``fresh`` discards
    them too). Everything is checked before anything is created or computed, the grid's work too (its setting's
    ``work()`` per run, :func:`afl.budget.check_work`: above the limits only with ``allow_large``). ``overrides``:
    the setting's fields changed from the command line, recorded in the command."""
    source = afl_commit()            # the code that computes: read before the runs (a commit made meanwhile is not it)
    work = grid.cfg.work().times(len(grid.keys))
    stop_if_estimating(work)
    check_work(work, allow_large, "--allow-large", changed=overrides or ())
    if fleet_size is not None:
        check_int("fleet_size", fleet_size, 1)
    check_spread(processes, ray)
    if ray is not None:
        check_ray_address(ray)
    if grid.checkpoints:
        every_s()                    # a bad AFL_CHECKPOINT_EVERY is an error before anything runs
    reuse = [Path(p) for p in reuse]
    others = [read_result(p, "reuse") for p in reuse]
    if not fresh:
        check_replaceable(grid, out)
    out = output_dir(out)
    lock = OutputLock(out, grid.name)
    try:
        partial = PartialRuns(out / f"{grid.name}.partial.jsonl", grid.setting_key)
        checkpoints = out / f"{grid.name}.checkpoints"
        if fresh:
            partial.discard()
            shutil.rmtree(checkpoints, ignore_errors=True)
        resumed = [r for r in partial.load() if grid.current(r)]
        have = {grid.key_of(r) for r in resumed}
        reused = []
        for other in others:                  # each run keeps where it was computed (the first result that has it)
            origin = {"machine": other["machine"], "command": other["command"]} | (
                {"afl_commit": other["afl_commit"]} if "afl_commit" in other else {})
            for r in reusable_runs(other, grid):
                if grid.key_of(r) not in have:
                    have.add(grid.key_of(r))
                    reused.append(r | {"source": r.get("source", origin)})
        runs = compute(grid, done=resumed + reused, partial=partial, progress=progress, fleet=fleet, ray=ray,
                       processes=processes, device=device, checkpoints=checkpoints)
    except BaseException:
        lock.release()
        raise
    if checkpoints.is_dir() and not any(checkpoints.iterdir()):
        checkpoints.rmdir()
    keys = {grid.key_of(r) for r in runs}
    how = how_computed([k for k in grid.keys if k not in have], fleet=fleet, fleet_size=fleet_size, ray=ray,
                       processes=processes)
    command = ("afl repro " + grid.name + (" --quick" if quick else "") + (f" --seeds {seeds}" if seeds else "")
               + set_flags(overrides)
               + "".join(f" --reuse {p}" for p in reuse) + (" --no-fleet" if not fleet else "")
               + (f" --fleet-size {fleet_size}" if fleet_size else "")
               + (f" --processes {processes}" if processes else "") + (" --allow-large" if allow_large else "")
               + ("" if ray is None else " --ray" if ray == "local" else f" --ray {ray}"))
    record = {"experiment": grid.name, "command": command, "quick": quick, "machine": machine(str(device)),
              "afl_commit": source,
              "execution": f"runs computed {how}",
              "resumed_runs": len({grid.key_of(r) for r in resumed} & keys),
              "reused_runs": len({grid.key_of(r) for r in reused} & keys),
              "config": asdict(grid.cfg)}
    return Execution([{k: v for k, v in r.items() if k != "setting_key"} for r in runs], partial, record, lock)


def how_computed(todo: list, *, fleet: bool, fleet_size: int | None, ray: str | None, processes: int | None) -> str:
    """How :func:`compute` spreads the runs ``todo`` (those not resumed or reused), in a result's words: its
    processes' threads as :func:`~afl.fleet.run_in_processes` shares them (fewer runs than processes: fewer
    processes, more threads each), since a run's rounding depends on them."""
    each = "a fleet" if fleet else "one by one"
    if ray is not None:
        return f"as Ray tasks ({ray}), each {each}"
    if (processes or 1) > 1:
        parts = process_parts(todo, processes)
        threads = process_threads(len(parts)) if parts else None
        return (f"in {processes} processes" + (f" of {threads} thread{'s' if threads != 1 else ''}" if threads
                                                 else "") + f", each {each}")
    return f"as one fleet of at most {fleet_size or DEFAULT_SIZE} live runs" if fleet else "one by one"


def set_args(overrides: dict | None) -> list[str]:
    """``["--set", "FIELD=VALUE", ...]`` for each changed field, as ``afl repro`` reads them back."""
    return [a for k, v in (overrides or {}).items() for a in ("--set", f"{k}={_text(v)}")]


def set_flags(overrides: dict | None) -> str:
    """`` --set FIELD=VALUE`` for each changed field, quoted for a shell where needed (``'tasksets=mnist*2'``)."""
    return "".join(" " + shlex.quote(a) for a in set_args(overrides))


def _text(value) -> str:
    """A setting's value as ``afl repro --set`` reads it back: tuples comma-separated (as a Python literal where an
    item holds a comma itself: ``('mnist,cifar10-jpeg',)``), the rest as printed."""
    if isinstance(value, (tuple, list)):
        return repr(tuple(value)) if any("," in str(v) for v in value) else ",".join(map(str, value))
    return str(value)


def heading(result: dict) -> list[str]:
    """A report's first lines: the experiment, its command, the machine, how its runs were computed, how many were
    taken from other results (``--reuse``: computed where those say), resumed, or went on from a checkpoint (on
    which kinds of CPU, where a run's sittings were not all on one), and their precision where it is not float32
    (:data:`afl.engine.PRECISIONS`)."""
    precision = result["config"].get("precision", "fp32")
    how = f"; {result['execution']}" if "execution" in result else ""
    total = len(result.get("runs", []))
    for field, words in (("reused_runs", "taken from the --reuse results (computed where those say)"),
                         ("resumed_runs", "resumed from an interrupted invocation")):
        if result.get(field):
            how += f"; {result[field]} of the {total} runs {words}"
    midway = [r["resumed_at"] for r in result.get("runs", []) if r.get("resumed_at")]
    if midway:
        count = sum(map(len, midway))
        if count == len(midway):
            at = f"at simulated time {', '.join(f'{times[0]:g}' for times in midway)}"
        else:       # some run went on more than once: its times together, and the count of resumptions
            at = (f"{count} times in all; at simulated times, run by run: "
                  + "; ".join(" and ".join(f"{t:g}" for t in times) for times in midway))
        how += f"; {len(midway)} of the {total} runs went on from a checkpoint after an interruption ({at})"
    mixed_cpus = [r["sitting_cpus"] for r in result.get("runs", []) if r.get("sitting_cpus")]
    if mixed_cpus:
        how += (f"; {len(mixed_cpus)} of them ran their sittings on unlike kinds of CPU (sitting by sitting, run by "
                "run: " + "; ".join(" then ".join(kinds) for kinds in mixed_cpus) + ")")
    mixed_threads = [r["sitting_threads"] for r in result.get("runs", []) if r.get("sitting_threads")]
    if mixed_threads:
        how += (f"; {len(mixed_threads)} of them ran their sittings on unlike numbers of PyTorch threads (sitting by "
                "sitting, run by run: " + "; ".join(" then ".join(str(t or "not recorded") for t in threads)
                                                    for threads in mixed_threads) + ")")
    mixed = "; clients trained in bfloat16 mixed precision (precision = bf16)" if precision == "bf16" else ""
    lines = [f"# {result['experiment']}", "", f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']}{how}{mixed}", ""]
    sources = run_sources(result)
    if len(sources) > 1 or sources and sources[0]["command"] != result["command"]:
        lines += ["Where the runs were computed (the tag each row names):", ""] + [
            f"- ({s['tag']}) {s['runs']} run{'s' * (s['runs'] > 1)}: `{s['command']}` on {s['machine']}"
            for s in sources] + [""]
    return lines


def run_sources(result: dict) -> list[dict]:
    """The invocations that computed a result's runs, in order of first appearance: ``tag`` (a, b, …), ``machine``,
    ``command`` and the number of ``runs``; a run taken with ``--reuse`` records its ``source``, the others were
    computed by the result's own command."""
    own = {"machine": result["machine"], "command": result["command"]}
    found: dict = {}
    for r in result.get("runs", []):
        src = r.get("source", own)
        key = (src["machine"], src["command"])
        if key not in found:
            found[key] = {"tag": chr(ord("a") + len(found)), **src, "runs": 0}
        found[key]["runs"] += 1
    return list(found.values())


def source_tags(result: dict, runs: list[dict]) -> str:
    """The tags (:func:`run_sources`) of the invocations that computed ``runs``, e.g. ``a`` or ``a, c``."""
    tag = {(s["machine"], s["command"]): s["tag"] for s in run_sources(result)}
    own = (result["machine"], result["command"])
    return ", ".join(sorted({tag[(r["source"]["machine"], r["source"]["command"]) if "source" in r else own]
                             for r in runs}))


def title_tag(result: dict, setting=None, selection=("seeds",)) -> str:
    """What a figure's title says about a result's setting: `` (QUICK setting)``, `` (bf16)``, and each field in which
    it differs from ``setting`` (the quick or paper setting it was run from: `` first_wave=code``), or nothing."""
    tags = ["QUICK setting"] * bool(result["quick"]) + ["bf16"] * (result["config"].get("precision") == "bf16")
    if setting is not None:
        tags += [f"{k}={_text(v)}" for k, v in reduced_fields(setting, result["config"], selection).items()
                 if k != "precision"]
    return f" ({', '.join(tags)})" if tags else ""


def afl_commit() -> dict:
    """The afl source that computes a result: the git commit of the checkout afl is imported from, its date, and
    whether ``afl/`` differed from it then (``dirty``); outside a git checkout (an installed wheel), afl's version."""
    package = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(package.parent), *args], capture_output=True, text=True, timeout=20)
        if out.returncode:
            raise OSError(out.stderr.strip() or f"git {args[0]} failed")
        return out.stdout.strip()
    try:
        commit, date = git("log", "-1", "--format=%H %cs").split()
        dirty = bool(git("status", "--porcelain", "--", str(package)))
        return {"commit": commit, "date": date, "dirty": dirty}
    except (OSError, ValueError, subprocess.SubprocessError):
        from importlib.metadata import PackageNotFoundError, version
        try:
            return {"commit": "", "date": "", "version": version("afl")}
        except PackageNotFoundError:
            return {"commit": "", "date": "", "version": "unknown"}


def machine(device: str) -> str:
    """The machine a result was computed on, in words."""
    cpu = platform.processor() or platform.machine()
    denormals = ", CPU denormals flushed" if flush_denormals() else ""
    threads = torch.get_num_threads()
    return (f"{platform.system()} {cpu} ({cpu_kind()}), {os.cpu_count()} CPU cores, torch {torch.__version__}, "
            f"{threads} thread{'s' if threads != 1 else ''}{denormals}, device {device}")


_CPU_KIND = re.compile(r"^\S+ \S+ \((.*kernels)\), ")


def machine_cpu_kind(words: str) -> str | None:
    """The CPU kind (:func:`afl.runtime.cpu_kind`) inside a result's :func:`machine` words; None in a result written
    before the machine named it."""
    found = _CPU_KIND.search(words)
    return found.group(1) if found else None


__all__ = ["MAX_SEEDS", "Grid", "compute", "run_tasks", "settings_record", "same_settings", "reusable_runs",
           "Execution", "execute", "how_computed", "set_args", "set_flags", "stop_if_estimating", "machine",
           "machine_cpu_kind",
           "afl_commit", "heading", "run_sources", "source_tags", "saved_config", "paper_difference",
           "reduced_fields", "title_tag", "with_overrides"]


def base_setting(experiments: dict, cls: type, experiment: str, quick: bool | None, overrides: dict):
    """The paper or quick setting (``experiments[name] = (paper, quick)``) of ``experiment`` -- quick by default
    when ``AFL_QUICK=1`` -- after checking that every override names a field of ``cls``."""
    check_choice("experiment", experiment, experiments)
    if quick is None:
        quick = os.environ.get("AFL_QUICK") == "1"
    for field in overrides:
        check_choice("setting field", field, [f.name for f in fields(cls)])
    return experiments[experiment][1 if quick else 0]


def with_overrides(setting, overrides: dict):
    """``setting`` (a dataclass) with ``overrides`` applied; a single value given for a tuple field becomes a
    one-element tuple (``--set splits=noniid`` means ``("noniid",)``, not its letters), and a list that is not empty
    in the setting (what to run: methods, splits, steps, ...) cannot be made empty."""
    def value(field, v):
        default = getattr(setting, field)
        listed = isinstance(default, (tuple, list))
        if listed and isinstance(v, (tuple, list)) and not v and default:
            raise ParameterError(field, v, f"at least one value (e.g. {_text(default[:1])})")
        v = (v,) if listed and not isinstance(v, (tuple, list)) else tuple(v) if listed else v
        _check_kind(field, v, default)
        return v
    return replace(setting, **{k: value(k, v) for k, v in overrides.items()})


def _check_kind(field: str, value, default) -> None:
    """The kind of a field's new value against its default's (each setting's own checks do the ranges): a flag
    takes True or False, a number a number, a list of names names."""
    def named(expected):
        raise ParameterError(field, value, expected)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            named("True or False")
    elif isinstance(default, (int, float)) and isinstance(value, str):
        named(f"a number (the default is {default})")
    elif isinstance(default, tuple) and default and all(isinstance(d, str) for d in default):
        if not all(isinstance(v, str) for v in value):
            named(f"names, e.g. {','.join(default[:2])}")


def reduced_fields(paper, saved: dict, selection=("seeds",)) -> dict:
    """The fields of a saved setting ``saved`` (a JSON record) that differ from the ``paper`` setting (a
    dataclass), beyond the ``selection`` fields that only choose which runs are made."""
    reference, saved = json.loads(json.dumps(asdict(paper))), json.loads(json.dumps(saved))   # tuples as lists
    return {k: v for k, v in saved.items() if k in reference and k not in selection and reference[k] != v}


def paper_difference(paper, saved: dict, selection=("seeds",), name: str = "paper") -> str:
    """A sentence naming each field in which a saved setting (a JSON record) differs from the ``paper`` setting (a
    dataclass; ``name``: what to call it, e.g. "quick"), with its value, fewer seeds than its count counted too;
    '' where it is that setting."""
    changed = reduced_fields(paper, saved, selection)
    if "seeds" in saved and saved["seeds"] < getattr(paper, "seeds", 0):
        changed["seeds"] = saved["seeds"]
    if not changed:
        return ""
    return (f"Differs from the {name} setting: " + ", ".join(
        f"{k} = {_text(v) or 'none'} ({name}: {_text(getattr(paper, k)) or 'none'})" for k, v in changed.items()) + ".")


def write_files(result: dict, out, report: Callable[[dict], str], figure: Callable[[dict], object],
                write_json: bool = True, dpi: int = 110) -> list[Path]:
    """Write ``OUT/<experiment>.json`` (unless ``write_json`` is False), its markdown ``report(result)`` and its
    picture ``figure(result)`` (a matplotlib Figure); returns the three paths."""
    out = Path(out)
    name = result["experiment"]
    paths = [out / f"{name}.json", out / f"{name}.md", out / f"{name}.png"]
    writers = [lambda p: p.write_text(report(result) + "\n"), lambda p: figure(result).savefig(p, dpi=dpi)]
    if write_json:
        writers.insert(0, lambda p: p.write_text(json.dumps(result, indent=1)))
    for path, write in zip(paths[-len(writers):], writers):
        _write_whole(path, write)
    return paths


def write_probe(result: dict, out, name: str, markdown: str) -> list[Path]:
    """A probe's (``tools/``) ``OUT/<name>.json`` (``result``) and ``OUT/<name>.md`` (``markdown``), each whole."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json", out / f"{name}.md"]
    _write_whole(paths[0], lambda p: p.write_text(json.dumps(result, indent=1) + "\n"))
    _write_whole(paths[1], lambda p: p.write_text(markdown))
    return paths


def _write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """``write(path)`` whole or not at all: into a temporary beside it, then renamed."""
    part = path.with_name(f".{path.stem}.part{path.suffix}")
    write(part)
    os.replace(part, path)
