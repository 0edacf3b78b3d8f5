"""The plan of paper-scale runs: what the scoreboard still lacks, in order of value, with its cost on each kind of
machine, and a runner for a job with a time limit (a Slurm allocation, a Colab session, a spot instance).

A **job** is the exact ``afl repro`` invocation that decides one or more claims the scoreboard shows as *not run* or
decided at *reduced* scale (:mod:`afl.scoreboard`): the claims' own paper-scale run, or for a claim whose result is
merged from several runs the first of them not yet committed (:func:`wanting`), or the run of the probe of a claim
that differs, where its probe is not run yet (:attr:`afl.claims.Probe.run`). A job whose folder holds a committed
result of its setting with some of its runs (a row grown seed by seed, a table row by row), or whose run names
another experiment's result holding some (:attr:`afl.claims.Run.reuse`), reuses them (``--reuse``, where that result
predates no change of meaning): its command computes, and its cost counts, only the runs still missing. Jobs
deciding a paper's headline claim come first (``HEADLINE`` of each binding module), then the rest by claims decided
per client step. A job's client steps are the bound afl checks a command's work with
(:func:`afl.repro.estimate`: an asynchronous run's clients training without a pause until its horizon, so *at
most*); its minutes on a kind of machine are its mini-batch gradients (its client steps, more for MIME:
:attr:`afl.budget.Work.cost`) over a rate that machine measured in client steps per second of a method with one
gradient a step (:mod:`afl.rates`, each with its source), none where none is measured.

``afl plan run`` runs jobs one after the other under one ``--time-limit``, each with ``afl repro --time-limit`` (a
run on rounds saves its checkpoint at the limit; finished runs are saved), into ``OUT/<job>``; the same command in
the next job goes on from there. ``afl plan archive`` packs those folders for a machine whose files must travel,
with the limits the caller gives (file size, number of files, total); ``afl plan run --resume-from`` unpacks one.
"""
from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .checkpoint import kept_runs
from .claims import NOT_RUN, Claim, Run
from .errors import ParameterError, check_int, check_real
from .rates import MACHINES, Rate, load, lookup
from .repro import EXPERIMENTS, canonical_out, estimate, trained_models
from .repro.runner import read_result, reusable_runs, set_args
from .scoreboard import HEADLINE, papers
from .scoreboard.verdict import Results, command, verdict

#: below this many seconds left, ``afl plan run`` starts no further job
MIN_START_S = 30.0


@dataclass(frozen=True)
class Job:
    """``run`` (a claim's paper-scale :class:`~afl.claims.Run`), the ``claims`` it decides, whether one of them is a
    paper's ``headline``, and ``why`` each is wanting (``not run``, ``reduced``, or ``probe not run``: the run of
    the probe of a claim that differs); ``reuse``: the committed result (a path under the repository) whose
    ``reused`` runs it takes instead of computing them (:func:`reusing`)."""

    run: Run
    claims: tuple
    headline: bool
    why: tuple
    reuse: str = ""
    reused: int = 0

    @property
    def dest(self) -> str:
        """Its folder under ``results/`` (the claims' result lives there)."""
        return dest(self.run)

    @property
    def name(self) -> str:
        return self.dest.replace("/", "-")

    @property
    def command(self) -> str:
        return command(self.run) + (f" --reuse {shlex.quote(self.reuse)}" if self.reuse else "")

    def argv(self, out: Path, device: str, root: Path | None = None) -> list[str]:
        """``afl repro`` arguments that write the job into ``out`` (``root``: the repository its ``reuse`` is in)."""
        seeds = ["--seeds", str(self.run.seeds)] if self.run.seeds else []
        reuse = ["--reuse", str(Path(root or ".") / self.reuse)] if self.reuse else []
        return ["repro", self.run.experiment, *seeds, *set_args(dict(self.run.overrides)), *reuse, "--out", str(out),
                "--device", device]

    def setting(self):
        return EXPERIMENTS[self.run.experiment].setting(self.run.experiment, quick=False, **dict(self.run.overrides))

    def grid(self):
        """The grid of runs its command makes (:class:`afl.repro.runner.Grid`)."""
        return EXPERIMENTS[self.run.experiment].grid(self.setting(), seeds=self.run.seeds)

    def work(self):
        """Its :class:`afl.budget.Work`: client steps (at most) and runs, those it reuses left out."""
        work = estimate(self.run.experiment, seeds=self.run.seeds, **dict(self.run.overrides))
        return work.share(work.runs - self.reused) if self.reused else work

    def models(self) -> tuple:
        """The models its runs train (FedAST's: each task's)."""
        return trained_models(self.run.experiment, self.setting())

    def checkpoints(self) -> bool:
        """Whether its runs save their state as they go (a run stopped at a time limit goes on from it)."""
        return EXPERIMENTS[self.run.experiment].grid(self.setting(), seeds=1).checkpoints

    def rate(self, rates: list[Rate], machine: str) -> Rate | None:
        """The measured rate that prices it on ``machine``: its experiment's own, else its models' (the slowest)."""
        models = self.models()
        return lookup(rates, (self.run.experiment, models[0] if len(models) == 1 else models), machine)


def dest(run: Run) -> str:
    """The folder under ``results/`` that ``run`` writes."""
    return (run.out or canonical_out(run.experiment, **dict(o for o in run.overrides if o[0] == "dataset"))
            ).removeprefix("results/")


def reusing(job: Job, results: Results) -> Job:
    """``job`` reusing the runs of a committed result that its grid would compute exactly so
    (:func:`afl.repro.runner.reusable_runs`): the result in its folder, else one in a folder within it (a reading
    kept beside it, e.g. a former default), else the one in the folder above (a probe's task set, whose runs of a
    method the probe does not change it takes), else the one its run names (:attr:`afl.claims.Run.reuse`), where
    that result predates no change of meaning (``results/provenance.json``); ``job`` itself where there are none."""
    here = results.root / "results" / job.dest
    within = sorted(f"{job.dest}/{p.name}" for p in here.iterdir() if p.is_dir()) if here.is_dir() else []
    names = [f"{folder}/{job.run.experiment}" for folder in (job.dest, *within, job.dest.rpartition("/")[0])]
    for name in names + [job.run.reuse] * bool(job.run.reuse):
        if not results.has(name) or results.provenance.get(f"results/{name}.json", {}).get("predates"):
            continue
        grid = job.grid()
        runs = reusable_runs(read_result(results.path(name), "results"), grid)
        held = {grid.key_of(r) for r in runs} & set(grid.keys)
        if held:
            return replace(job, reuse=f"results/{name}.json", reused=len(held))
    return job


def wanting(claim: Claim, results: Results) -> Run:
    """The run a claim waits for: the first of its ``run`` and ``needs`` (the runs its result is merged from)
    whose result is not committed; its own ``run`` where all are."""
    return next((r for r in (claim.run, *claim.needs) if not results.has(f"{dest(r)}/{r.experiment}")), claim.run)


def jobs(root: Path) -> list[Job]:
    """Every job the scoreboard at ``root`` asks for, in the plan's order."""
    results = Results(Path(root))
    found: dict[Run, list] = {}
    for claims in papers().values():
        for claim in claims:
            if claim.unsupported or claim.run is None:
                continue
            row = verdict(claim, results)
            if row["status"] == NOT_RUN:
                found.setdefault(wanting(claim, results), []).append((claim.id, "not run"))
            elif row["scale"]["rerun_lifts"]:          # reduced only by its data: no rerun lifts it, no job
                found.setdefault(wanting(claim, results), []).append((claim.id, "reduced"))
            probe = row.get("probe")
            if claim.probe and claim.probe.run and probe and probe["afl"] is None:
                found.setdefault(claim.probe.run, []).append((claim.id, "probe not run"))
    out = [reusing(Job(run, tuple(c for c, _ in rows), any(c in HEADLINE for c, _ in rows), tuple(w for _, w in rows)),
                   results) for run, rows in found.items()]
    steps = {job: job.work().cost for job in out}
    order = {job: k for k, job in enumerate(out)}
    return sorted(out, key=lambda j: (not j.headline, -len(j.claims) / max(steps[j], 1.0), order[j]))


def row(job: Job, rates: list[Rate], cpu_hours: float, root: Path | None = None) -> dict:
    """A job as ``afl plan --json`` prints it: its command, claims, work, minutes on each kind of machine with the
    rate's source (None where none is measured), whether it fits a CPU in ``cpu_hours``, and ``under_way``: its
    runs stopped with checkpoints in its folder under ``root``'s ``results/``, with where each was."""
    work = job.work()
    minutes = {}
    for machine in MACHINES:
        rate = job.rate(rates, machine)
        minutes[machine] = None if rate is None else {
            "minutes": round(work.cost / rate.value / 60, 1), "rate": round(rate.value, 1),
            "rate_of": rate.key, "source": rate.source, "measured": rate.what}
    cpu = cpu_minutes(job, rates, work)
    kept = [] if root is None else kept_runs(root / "results" / job.dest / f"{job.run.experiment}.checkpoints")
    return {"name": job.name, "command": job.command, "dest": f"results/{job.dest}", "claims": list(job.claims),
            "why": list(job.why), "headline": job.headline, "client_steps_at_most": round(work.client_steps),
            "gradients_at_most": round(work.cost),
            "runs": work.runs, "models": list(job.models()), "checkpoints": job.checkpoints(), "minutes": minutes,
            "fits_cpu": cpu is not None and cpu <= cpu_hours * 60,
            "under_way": [list(k) for k in kept]}


def cpu_minutes(job: Job, rates: list[Rate], work=None) -> float | None:
    """The job's minutes on the fastest CPU with a measured rate for it; None where none is measured. ``work``: its
    :meth:`Job.work`, where the caller has it."""
    cpu = [rate.value for machine in MACHINES if machine.startswith("cpu")
           for rate in [job.rate(rates, machine)] if rate is not None]
    return (work or job.work()).cost / max(cpu) / 60 if cpu else None


def listing(root: Path, cpu_hours: float = 24.0) -> list[dict]:
    """Every job of the plan (:func:`row`)."""
    check_real("--cpu-hours", cpu_hours, 0, strict_low=True)
    rates = load(Path(root))
    return [row(j, rates, cpu_hours, Path(root)) for j in jobs(root)]


def find(root: Path, names) -> list[Job]:
    """The jobs named (by :attr:`Job.name`), in the order named (a job named twice runs once: its first place); an
    unknown name is an error listing them."""
    known = {j.name: j for j in jobs(root)}
    for name in names:
        if name not in known:
            raise ParameterError("job", name, "one of the plan's jobs (afl plan): " + ", ".join(known))
    return [known[name] for name in dict.fromkeys(names)]


# -- a job with a time limit -----------------------------------------------------------------------------------------
def unpack_results(archive: Path, out: Path) -> Path:
    """Extract an archive ``afl plan archive`` wrote into ``out`` (tar's data filter: no absolute paths, no escape
    from ``out``, no links out of it); a missing or damaged archive is an error naming it."""
    archive = Path(archive)
    if not archive.is_file():
        raise ParameterError("--resume-from", str(archive), "an archive written by afl plan archive (no such file)")
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(out, filter="data")
    except (tarfile.TarError, EOFError, OSError) as error:
        raise ParameterError("--resume-from", str(archive), f"an intact archive of afl plan archive ({error})") \
            from None
    return out


def done(job: Job, out: Path) -> bool:
    return (Path(out) / job.dest / f"{job.run.experiment}.json").is_file()


def run(chosen: list[Job], out: Path, time_limit_s: float, device: str = "cpu", root: Path | None = None,
        data_root: str | None = None, leave_to_cpu: float | None = None, processes: int | None = None,
        say=print) -> list[dict]:
    """Run ``chosen`` one after the other into ``out/<dest>`` within ``time_limit_s`` seconds: each as ``afl repro
    ... --time-limit <what is left>`` (every run keeps checkpoints: one stopped at the limit goes on from them); a
    job already finished in ``out`` is passed over, and with ``leave_to_cpu`` (hours) a job that a measured CPU
    finishes within that many hours (:func:`cpu_minutes`; the rates of ``root``): a GPU's time goes to what a CPU
    cannot do, while a CPU runs those. ``processes``: each job's runs in that many processes (``afl repro
    --processes``; on a CPU, where one engine leaves cores idle: ``afl bench local-sgd --processes``); keep the same
    number in the next job, as a run's rounding depends on its threads. Returns each job's report: finished, stopped
    at the limit (goes on from ``out`` next time), or failed."""
    check_real("--time-limit", time_limit_s, 0, strict_low=True)
    if processes is not None:
        check_int("--processes", processes, 1)
    if leave_to_cpu is not None:
        check_real("--leave-to-cpu", leave_to_cpu, 0, strict_low=True, hint="hours")
    rates = load(Path(root)) if leave_to_cpu is not None and root is not None else []
    end = time.monotonic() + time_limit_s
    reports = []
    for job in chosen:
        left = end - time.monotonic()
        if done(job, out):
            say(f"afl plan: {job.name} is finished in {out / job.dest}")
            continue
        cpu = cpu_minutes(job, rates) if rates else None
        if cpu is not None and cpu <= leave_to_cpu * 60:
            say(f"afl plan: {job.name} left to a CPU ({cpu:.0f} min there, within --leave-to-cpu {leave_to_cpu:g} h)")
            continue
        if left < MIN_START_S:
            say(f"afl plan: {left:.0f} s left, {job.name} and the rest wait for the next job")
            break
        argv = job.argv(Path(out) / job.dest, device, root) + ["--time-limit", f"{math.floor(left)}s"]
        if data_root:
            argv += ["--root", str(data_root)]
        if processes is not None:
            argv += ["--processes", str(processes)]
        say(f"afl plan: {job.name}: afl {' '.join(argv)}")
        t0 = time.monotonic()
        code = run_child([sys.executable, "-m", "afl.cli", *argv])
        state = "finished" if code == 0 else "stopped at the time limit" if code == 3 else f"failed (exit {code})"
        reports.append({"job": job.name, "state": state, "exit_code": code, "seconds": round(time.monotonic() - t0, 1),
                        "folder": str(Path(out) / job.dest)})
        say(f"afl plan: {job.name} {state} after {reports[-1]['seconds']:.0f} s")
        if code == 3:
            break
    return reports


def run_child(cmd: list[str]) -> int:
    """Run one job's command and return its exit code. A SIGTERM to this process (a scheduler ending the job, a
    ``kill``) is passed on to it -- ``afl repro`` saves its checkpoints and stops (:func:`afl.deadline.
    stop_on_signals`) -- and this process stops after it: no run is left computing behind a plan that has ended."""
    child = subprocess.Popen(cmd, env=os.environ.copy())

    def forward(signum, frame):
        child.send_signal(signal.SIGTERM)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        return child.wait()
    except KeyboardInterrupt:
        child.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def archive(out: Path, to: Path, max_file_mb: float, max_files: int, max_total_mb: float, say=print) -> list[Path]:
    """Pack each job folder under ``out`` (one holding an ``afl repro`` result or partial runs) as
    ``to/<job>.tar.gz``, within the caller's limits: no archive over ``max_file_mb``, at most ``max_files`` of them
    and ``max_total_mb`` together. The results go first; a checkpoint goes in only where it fits (else it is named
    as left out). Returns the archives written."""
    for name, value in (("--max-file-mb", max_file_mb), ("--max-total-mb", max_total_mb)):
        if not value > 0:                                      # no limit: infinity
            raise ParameterError(name, value, "a size in MB above 0 (or no such option: no limit)")
    if int(max_files) != max_files or max_files < 1:
        raise ParameterError("--max-files", max_files, "a whole number of files, at least 1")
    out, to = Path(out), Path(to)
    marks = [p for p in out.rglob("*") if not p.is_symlink() and (
        (p.is_dir() and p.name.endswith(".checkpoints"))
        or (p.is_file() and p.name.endswith((".json", ".partial.jsonl")) and not _saved_state(p.relative_to(out))))]
    folders = sorted({p.parent for p in marks})
    to.mkdir(parents=True, exist_ok=True)
    written, total = [], 0
    for folder in folders:
        if len(written) == max_files:
            say(f"afl plan archive: {folder} left out: {max_files} files at most")
            continue
        files = [p for p in sorted(folder.glob("*") if folder == out else folder.rglob("*"))
                 if p.is_file() and not p.is_symlink() and not p.name.endswith(".part")]
        kept = [p for p in files if not _saved_state(p.relative_to(folder))]
        room = min(max_file_mb * 1e6, max_total_mb * 1e6 - total) - sum(p.stat().st_size for p in kept)   # bytes
        for p in (p for p in files if p not in kept):
            if p.stat().st_size <= room:
                kept.append(p)
                room -= p.stat().st_size
            else:
                say(f"afl plan archive: {p} ({p.stat().st_size / 1e6:.1f} MB) left out: over the limits")
        rel = folder.relative_to(out).as_posix()
        target = to / f"{'plan' if rel == '.' else rel.replace('/', '-')}.tar.gz"       # '.': the run's report
        if target.is_symlink():
            raise ParameterError("--to", str(to), f"a folder without symbolic links ({target.name} is one)")
        part = target.with_name(target.name + ".part")
        with tarfile.open(part, "w:gz") as tar:
            for p in kept:
                tar.add(p, arcname=str(p.relative_to(out)))
        size = part.stat().st_size
        if size > max_file_mb * 1e6 or total + size > max_total_mb * 1e6:
            part.unlink()
            say(f"afl plan archive: {folder} left out: its archive ({size / 1e6:.1f} MB) is over the limits")
            continue
        os.replace(part, target)
        written.append(target)
        total += size
    return written


def _saved_state(rel: Path) -> bool:
    """Whether ``rel`` lies in a folder of checkpoints (``<experiment>.checkpoints/``)."""
    return any(part.endswith(".checkpoints") for part in rel.parts[:-1])


def write_report(reports: list[dict], path: Path) -> None:
    """The jobs' reports as JSON at ``path`` (its folder made if no job has made it: none had time to start)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(reports, indent=1) + "\n")


__all__ = ["Job", "dest", "wanting", "jobs", "row", "listing", "find", "run", "archive", "unpack_results", "done",
           "write_report", "MIN_START_S"]
