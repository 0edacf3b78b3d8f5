"""The GPU queue: the paper-scale runs only a GPU can do, as a committed, ordered list of exact ``afl repro``
invocations, each sized to finish inside one call of a lent GPU machine (at most 10 minutes; we plan 9), or, where
the engine is not yet fast enough for that, to go on over several visits from checkpoints that come back.

A GPU comes now and then, for about 15 minutes, on a machine that starts bare. So nothing is prepared there:
the invocations, their data and their estimates are ready here, and a visit runs them.

* ``afl queue`` lists the entries: invocation, client steps (computed from the experiment's setting), minutes on an
  H100 (client steps over the rate in :data:`RATES`, which says where each rate comes from; an entry with none waits
  for a visit to measure it, :func:`measure_rate`) and status (done when its result is committed under ``results/``).
* ``afl queue pack`` writes the datasets the entries need, xz-compressed, into ``.gpu/data`` (git-ignored), small
  enough to travel with the working tree (the CIFAR-10 copy: 56 MB as it is, 18 MB packed; a device call carries at
  most 64 MiB with the tree).
* ``afl queue run`` (on the GPU machine) unpacks them (MD5-checked against the registry), checks the machine,
  refuses an entry that cannot finish in the minutes left, runs it with checkpoints every minute, stops it cleanly
  at the deadline, and leaves one ``<entry>.tar.gz`` per entry in the output folder (results, and checkpoints
  where the run stopped midway and they are small enough to come back), then prints what to commit. Committed
  under ``results/gpu-queue-carry/`` (or given with ``--resume-from``), that archive lets a stopped entry go on.
"""
from __future__ import annotations

import functools
import hashlib
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import DataMissingError, ParameterError, check, check_real
from .repro import EXPERIMENTS, estimate, favas, fedast, qafel

#: the repository root (entries' results are committed under results/ there)
REPO = Path(__file__).resolve().parent.parent
#: where ``afl queue pack`` writes the datasets that travel to the GPU machine (git-ignored)
PACK = REPO / ".gpu" / "data"
#: minutes a visit keeps for unpacking, start-up and packing the results, beside the runs themselves
OVERHEAD_MIN = 0.75
#: a file larger than this does not come back from a device call; such checkpoints stay behind
RETURN_BYTES = 16 << 20
#: what comes back from a device call at most: files, and bytes together
RETURN_FILES, RETURN_TOTAL = 8, 64 << 20
#: what a device call carries at most, the working tree included
CALL_CARRY_BYTES = 64 << 20
#: where the archive of an entry stopped midway is committed, for the next visit to go on from (``carry(entry)``)
CARRY = REPO / "results" / "gpu-queue-carry"

#: minutes of one device call that an entry may plan for (a call lasts at most 10)
CALL_MINUTES = 9.0
#: where this module's measured figures come from
VISIT = "results/gpu-visits/h100-2026-11-26"

#: H100 client-steps/s by (model, clients per engine call), end to end (server steps, evaluations and Python
#: included), each with where it comes from. An entry's minutes are its client steps over its rate.
RATES = {
    ("cnn-cifar", 10): (1203.0, f"measured on an H100 (torch 2.11, no CUDA graphs): GHBM's CIFAR-10 protocol for 200 "
                                f"rounds, FedHBM alone (FedAvg alone: 1,342; tools/gpu_visit.py, {VISIT})"),
    ("cnn-cifar", 50): (2374.0, "measured on an H100 (torch 2.11, no CUDA graphs): the headline's five methods as one "
                                "fleet for 2,000 rounds, 800,000 client steps in 337 s "
                                "(results/ghbm/cifar10/2000-rounds)"),
    ("char-lstm", 160): (1940.0, "measured: GHBM's Shakespeare grid, 16 runs as one fleet, 800,000 client steps in "
                                 "413 s on an H100 (results/ghbm/shakespeare/history/250-rounds-h100)"),
    ("char-lstm", 100): (1850.0, "measured: GHBM's Shakespeare column, methods A (10 runs as one fleet), 500,000 "
                                 "client steps in 270 s on an H100 (results/ghbm/shakespeare/runs/noniid-a)"),
    ("char-lstm", 20): (1470.0, "measured: GHBM's Shakespeare column, FedAvgM and SCAFFOLD (2 runs as one fleet), "
                                "100,000 client steps in 68 s on an H100 (results/ghbm/shakespeare/runs/noniid-c)"),
}

#: MB of one run's checkpoint by (model, method), measured on the CPU by ``tools/checkpoint_sizes.py``: GHBM's
#: CIFAR-10 protocol at round 11 (``--rounds 11``; GHBM's tau = 10 past models full), its Shakespeare protocol at round
#: 2 (the pending entries' methods; their state is whole after one round). The server's state, and each client's
#: table: LocalGHBM's and FedHBM's anchor for each of the 100 clients, FedDyn's and AdaBest's correction.
#: A file over 16 MiB does not come back from a device call, so such a run must end within the calls of one visit.
CHECKPOINT_MB = {("cnn-cifar", "fedavg"): 6.7, ("cnn-cifar", "fedcm"): 9.9, ("cnn-cifar", "ghbm"): 38.7,
                 ("cnn-cifar", "localghbm"): 325.9, ("cnn-cifar", "fedhbm"): 325.9,
                 ("char-lstm", "fedprox"): 1.1, ("char-lstm", "feddyn"): 55.1, ("char-lstm", "adabest"): 55.1,
                 ("char-lstm", "mime"): 2.2, ("char-lstm", "mimemom"): 2.2, ("char-lstm", "mimelitemom"): 2.2,
                 ("char-lstm", "fedcm-full"): 1.7}


#: the status of an entry that has no rate yet, and what measures one: a short run of the entry on the GPU
UNMEASURED = "waits for its rate"
RATE_PROBE = "a visit (afl queue run: a short run of the entry itself on the GPU, when its turn comes)"
#: FedAST's Fig. 7 entries stop at this many times the paper's finish times (``total_time``;
#: :data:`afl.repro.fedast.PAPER_FIG7_FINISH`: FedAST 619, Sync-ST 1,033): a run as slow as the paper's by half ends
FIG7_HORIZON = 1.5
#: time units of a Fig. 7 run that measure its entry's rate: its first server steps, all four tasks training (the
#: cheap MNIST model among them, so the rate is a little above the whole run's, whose end trains CIFAR-10 and
#: Shakespeare alone; the run's deadline stops it cleanly where the estimate falls short)
FIG7_PROBE_TIME = 40.0
#: minutes a visit keeps for measuring an entry's rate (a Fig. 7 probe: the process, four datasets, 40 time units)
MEASURE_MIN = 2.0

@dataclass(frozen=True)
class Entry:
    """One invocation: ``afl repro <experiment> --seeds S --set <sets> --device cuda``, written to ``results/<dest>``;
    ``datasets``: what it loads; ``model`` and ``width``, the key of its rate: the model and clients per engine call
    (a FedAST entry: the experiment and method, and its runs; its calls' widths follow the schedule); ``waits_for``:
    why it cannot run yet; ``probe``: the ``--set`` fields of a short run of it that measures its rate on the GPU
    (:func:`measure_rate`), for an entry :data:`RATES` has no rate for; ``flags``: more options of the command
    (``--processes 8``)."""

    name: str
    experiment: str
    sets: dict = field(compare=False)
    dest: str
    model: str
    width: int
    datasets: tuple
    note: str = ""
    waits_for: str = ""
    probe: dict = field(default_factory=dict, compare=False)
    flags: tuple = ()

    @property
    def argv(self) -> list[str]:
        sets = [a for k, v in self.sets.items() if k != "seeds"
                for a in ("--set", f"{k}={','.join(v) if isinstance(v, tuple) else v}")]
        return ["repro", self.experiment, "--seeds", str(self.sets["seeds"]), *sets, "--device", "cuda", *self.flags]

    def setting(self):
        """The experiment's paper-scale setting with the entry's ``--set`` fields."""
        return EXPERIMENTS[self.experiment].setting(self.experiment, quick=False,
                                                    **{k: v for k, v in self.sets.items() if k != "seeds"})

    def client_steps(self) -> int:
        """Client steps of the whole invocation, from the experiment's setting (:func:`_client_steps`)."""
        return _client_steps(self)

    def rate(self, rates: dict | None = None) -> tuple[float, str]:
        rates = rates or RATES
        key = (self.model, self.width)
        check(key in rates, "rates", key, f"a measured rate for every entry's key ({RATE_PROBE} measures one): " +
              ", ".join(map(str, rates)))
        return rates[key]

    def measured(self, rates: dict | None = None) -> bool:
        """Whether its rate has been measured (:data:`RATES`, or a visit's rates.json)."""
        return (self.model, self.width) in (rates or RATES)

    def minutes(self, rates: dict | None = None) -> float:
        return self.client_steps() / self.rate(rates)[0] / 60

    def _checkpoint_sizes(self) -> list[float] | None:
        """MB of one run's checkpoint for each of its methods (:data:`CHECKPOINT_MB`; None: not all measured)."""
        sizes = [CHECKPOINT_MB.get((self.model, m)) for m in self.sets.get("methods", ())]
        return None if not sizes or None in sizes else sizes

    def checkpoint_mb(self) -> float | None:
        """The largest checkpoint of one of its runs (None: not measured)."""
        sizes = self._checkpoint_sizes()
        return None if sizes is None else max(sizes)

    def checkpoints_mb(self) -> float | None:
        """The checkpoints of all its runs together, what a call stopped at its deadline leaves (the runs of a fleet
        are live together; None: not measured)."""
        sizes = self._checkpoint_sizes()
        if sizes is None:
            return None
        return round(self.sets["seeds"] * len(getattr(self.setting(), "splits", ("one",))) * sum(sizes), 1)

    def carried(self) -> bool:
        """Whether its runs' checkpoints can come back from a call, all in one archive (so it can go on over several
        visits)."""
        mb = self.checkpoints_mb()
        return mb is not None and mb * 1e6 <= RETURN_BYTES

    def result(self) -> Path:
        return REPO / "results" / self.dest / f"{self.experiment}.json"

    def status(self, rates: dict | None = None) -> str:
        """``done`` (its result is committed), ``waits for ...`` (a reason, or its rate), ``pending`` (fits one call,
        or goes on over several from carried checkpoints) or ``needs a faster engine`` (longer than a call,
        checkpoints too big to carry)."""
        if self.result().is_file():
            return "done"
        if self.waits_for:
            return f"waits for {self.waits_for}"
        if not self.measured(rates):
            return f"{UNMEASURED}, which {RATE_PROBE} measures"
        if self.minutes(rates) > CALL_MINUTES and not self.carried():
            mb = self.checkpoints_mb()
            why = ("no checkpoint of its runs is known to come back" if mb is None
                   else f"its runs' {mb} MB of checkpoints cannot come back")
            return f"needs a faster engine: {self.minutes(rates):.0f} minutes > a call's {CALL_MINUTES:.0f}, and {why}"
        return "pending"


@functools.lru_cache(maxsize=None)
def _client_steps(entry: Entry) -> int:
    """GHBM's: rounds x clients a round x local steps, per method, split and seed. FedAST's: planned from each run's
    schedule without training until its horizon ``total_time`` (:func:`afl.repro.fedast.planned_client_steps`; a
    run stops once every task reached its target, so one as fast as the paper's computes less). The others': the
    bound afl checks a command's work with (:func:`afl.repro.estimate`: QAFeL's runs every upload of its budget,
    FAVAS's every client training without a pause)."""
    cfg = entry.setting()
    seeds = entry.sets.get("seeds", cfg.seeds)
    if entry.experiment.startswith("fedast"):
        return sum(sum(fedast.planned_client_steps(cfg, taskset, method, cap, seed)) for seed in range(seeds)
                   for taskset in cfg.tasksets for method in cfg.methods for cap in cfg.caps)
    if entry.experiment.startswith("ghbm"):
        per_run = {m: cfg.rounds * cfg.local_steps * (cfg.clients if m == "fedcm-full" else cfg.per_round)
                   for m in cfg.methods}
        return sum(per_run.values()) * len(cfg.splits) * seeds
    return round(estimate(entry.experiment, seeds=seeds, **{k: v for k, v in entry.sets.items()
                                                            if k != "seeds"}).client_steps)


def _ghbm(name: str, dest: str, width: int = 10, note: str = "", waits_for: str = "", seeds: int = 1,
          **sets) -> Entry:
    """An entry of ``afl repro ghbm-table2`` (one seed unless told) with these ``--set`` fields."""
    dataset = sets.get("dataset", "cifar10-jpeg")
    model = {"cifar10-jpeg": "cnn-cifar", "shakespeare": "char-lstm"}[dataset]
    return Entry(name, "ghbm-table2", {"seeds": seeds} | sets, dest, model, width, (dataset,), note, waits_for)


def _fedast_fig7(method: str, horizon: float) -> Entry:
    """An entry of ``afl repro fedast-fig7``: the paper's four tasks, one method, one seed, stopped at ``horizon``;
    FedAST's three variants share one rate (they differ only in how requests move between tasks)."""
    return Entry(f"fedast-fig7-{method}", "fedast-fig7", {"seeds": 1, "methods": (method,), "total_time": horizon},
                 f"fedast/fig7/paper/{method}", f"fedast-fig7 {'sync-st' if method == 'sync-st' else 'fedast'}", 1,
                 ("mnist", "fashion-mnist", "cifar10-jpeg", "shakespeare"), probe={"total_time": FIG7_PROBE_TIME},
                 note=f"FedAST Fig. 7, the paper's four tasks, one seed, {method}, stopped at {horizon:g} time units "
                      f"(the paper's finish times x {FIG7_HORIZON}; merge with --reuse into results/fedast/fig7/paper)")


def _by_method(experiment: str, methods, dest: str, key: str, datasets: tuple, probe: dict, note: str,
               seeds: int) -> list[Entry]:
    """One entry per method of ``afl repro <experiment>`` (``seeds`` seeds each), sharing one rate (``key``)."""
    return [Entry(f"{experiment}-{m}", experiment, {"seeds": seeds, "methods": (m,)}, f"{dest}/{m}", key, seeds,
                  datasets, probe=probe, note=f"{note}, {m} (merge them with --reuse into results/{dest})")
            for m in methods]


#: The queue, in the order it runs (issue 41): GHBM's CIFAR-10 headline row first (alpha = 0, one seed), at a tenth
#: of the paper's rounds as one fleet; then GHBM's Shakespeare column on the paper's federation (issue 39: its main
#: claim fits one visit); FedAST's four-task Fig. 7 one method per entry (issue 40: its 40.1 % claim first, FedAST
#: and Sync-ST; then static and the code's Realloc, App. D.6), QAFeL's Table 1 one row of 3 seeds per entry, FAVAS's
#: Fig. 3a one method per entry, then CIFAR-10 at the paper's 20,000 rounds one method per entry (three visits each,
#: where the others end within one call each).
HEADLINE = ("fedavg", "fedcm", "ghbm", "localghbm", "fedhbm")
#: GHBM's Shakespeare column (issue 39) in three invocations a split: the main claim's methods and the rates and
#: momentum scales in question first, FedAvgM and SCAFFOLD (the issue's other rows), then the rest (FedCM with every
#: client costs ten runs)
SHAKESPEARE_A = ("fedavg", "fedhbm", "fedhbm-code-scale", "localghbm", "localghbm-code-scale", "ghbm", "fedcm",
                 "fedcm-server-lr-1", "scaffold-m", "fedadc")
SHAKESPEARE_C = ("fedavgm", "scaffold")
SHAKESPEARE_B = ("fedprox", "feddyn", "adabest", "mime", "mimemom", "mimelitemom", "fedcm-full")
QUEUE: list[Entry] = [
    _ghbm("ghbm-cifar10-noniid-headline-2000-rounds", "ghbm/cifar10/2000-rounds", width=50,
          note="REDUCED: a tenth of the paper's 20,000 rounds; the headline row's five methods as one fleet",
          splits=("noniid",), methods=HEADLINE, rounds=2000, eval_every=20),
    *[_ghbm(f"ghbm-shakespeare-{split}-{part}", f"ghbm/shakespeare/runs/{split}-{part}", width=width,
            dataset="shakespeare", eval_every=10, splits=(split,), methods=methods,
            note=f"GHBM Table 2, Shakespeare column on the paper's federation, {split}, methods {part.upper()} "
                 "(merge them with --reuse into results/ghbm/shakespeare)")
      for part, methods, width in (("a", SHAKESPEARE_A, 100), ("c", SHAKESPEARE_C, 20), ("b", SHAKESPEARE_B, 160))
      for split in ("noniid", "iid")],
    *[_fedast_fig7(m, round(FIG7_HORIZON * fedast.PAPER_FIG7_FINISH["sync-st" if m == "sync-st" else "fedast"]))
      for m in ("fedast", "sync-st", "fedast-static", "fedast-code")],
    *_by_method("qafel-table1", qafel.TABLE1_METHODS, "qafel/table1/paper", "qafel-table1 row", ("cifar10-jpeg",),
                {"max_uploads": 3000}, "QAFeL Table 1 and its ablation on the offline substitute, the paper's "
                "protocol (2,500 users, target 85 %, at most 150,000 uploads), 3 seeds", seeds=3),
    *_by_method("favas-fig3a", favas.setting("favas-fig3a", quick=False).methods, "favas/fig3a/paper",
                "favas-fig3a method", ("cifar10-jpeg",), {"total_time": 200},
                "FAVAS Fig. 3a, ResNet-20 on CIFAR-10, the paper's setting, one seed", seeds=1),
    *[_ghbm(f"ghbm-cifar10-noniid-{m}", f"ghbm/cifar10/paper/{m}", note="GHBM Table 8, CIFAR-10 column, non-IID",
            splits=("noniid",), methods=(m,), eval_every=20)
      for m in ("fedavg", "fedhbm", "fedcm", "ghbm", "localghbm")],
]


#: Issue 41's fleet figure, measured by a visit beside the queue (``tools/gpu_visit.py``, step ``fleet``): FAVAS's
#: paper-scale Table 2 (210 runs) in 8 processes, timed end to end. Its goal is under 60 s on one H100; it took 145 s
#: on an H200 (results/favas/table2/h200-processes), not yet run on an H100.
FLEET = Entry("favas-table2-h100-processes", "favas-table2", {"seeds": 10}, "favas/table2/h100-processes",
              "favas-table2 fleet", 8, ("mnist",), flags=("--processes", "8"),
              note="FAVAS Table 2 at the paper's scale, 10 seeds, 8 processes: the whole command's wall time (goal: "
                   "under 60 s on one H100)")
#: the fleet's only measured rate, an H200's: what sizes its call until an H100's is measured
FLEET_RATES = {(FLEET.model, FLEET.width): (16_742_753 / 145, "measured on an H200, 8 processes: 16,742,753 client "
                                            "steps in 145 s end to end (results/favas/table2/h200-processes)")}


def carry(entry: Entry) -> Path:
    """The committed archive an entry stopped midway left (:data:`CARRY`); a run goes on from it if it exists."""
    return CARRY / f"{entry.name}.tar.gz"


def find(name: str) -> Entry:
    for e in QUEUE:
        if e.name == name:
            return e
    raise ParameterError("entry", name, "one of " + ", ".join(e.name for e in QUEUE))


def listing(rates: dict | None = None) -> list[dict]:
    """Every entry as a dict: the command, client steps, minutes on an H100 and the rate's basis, status."""
    rows = []
    for e in QUEUE:
        rate, basis = e.rate(rates) if e.measured(rates) else (None, f"not measured yet: {RATE_PROBE} measures it")
        rows.append({"name": e.name, "command": "afl " + " ".join(e.argv), "dest": f"results/{e.dest}",
                     "datasets": list(e.datasets), "client_steps": e.client_steps(), "clients_per_call": e.width,
                     "minutes": round(e.minutes(rates), 2) if rate else None, "rate": rate, "rate_basis": basis,
                     "checkpoint_mb": e.checkpoint_mb(), "status": e.status(rates), "note": e.note})
    return rows


def next_entries(minutes: float, rates: dict | None = None, skip=()) -> list[Entry]:
    """The pending entries, in queue order, that fit one after the other into ``minutes`` (after the visit's
    overhead); the first pending entry that does not fit, or whose rate is not measured, stops the list (the queue's
    order is kept). ``skip``: names
    of entries to pass over (those a visit has already run: their results are not committed yet)."""
    left, out = minutes - OVERHEAD_MIN, []
    for e in QUEUE:
        status = "" if e.name in skip else e.status(rates)
        if status.startswith(UNMEASURED):      # its turn: a visit measures its rate first (to_measure)
            break
        if status != "pending":
            continue
        need = e.minutes(rates)
        if need > left:
            break
        out.append(e)
        left -= need
    return out


def to_measure(rates: dict | None = None, skip=()) -> Entry | None:
    """The entry whose turn it is if its rate is not measured yet (:func:`next_entries` stops there), else None."""
    for e in QUEUE:
        status = "" if e.name in skip else e.status(rates)
        if status.startswith(UNMEASURED):
            return e
        if status == "pending":
            return None
    return None


# -- data that travels ----------------------------------------------------------------------------------------------
def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack(datasets, dest: Path = PACK, root=None) -> list[Path]:
    """Each file of ``datasets`` (verified where afl finds it) as ``dest/<relative path>.xz``; a file already packed
    from the same content is kept. Returns the packed files."""
    from .data.files import locate
    out = []
    for name in dict.fromkeys(datasets):
        found = locate(name, root=root, download=False)
        for rel, md5 in found.md5.items():
            target = dest / f"{rel}.xz"
            stamp = target.with_name(target.name + ".md5")
            if not (target.is_file() and stamp.is_file() and stamp.read_text().strip() == md5):
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(found.path(rel), "rb") as src, lzma.open(target, "wb", preset=9) as xz:
                    shutil.copyfileobj(src, xz, 1 << 20)
                stamp.write_text(md5 + "\n")
            out.append(target)
    return out


def unpack(src: Path, dest: Path) -> Path:
    """Every ``*.xz`` under ``src`` decompressed to the same relative path under ``dest``, its MD5 checked against
    the one recorded when it was packed; returns ``dest`` (a data root for ``AFL_DATA``)."""
    src, dest = Path(src), Path(dest)
    files = sorted(src.rglob("*.xz"))
    check(bool(files), "--pack", str(src), "a folder written by 'afl queue pack' (it holds no *.xz file)")
    for xz in files:
        rel = xz.relative_to(src).with_suffix("")
        want = xz.with_name(xz.name + ".md5").read_text().strip()
        target = dest / rel
        if not (target.is_file() and _md5(target) == want):
            target.parent.mkdir(parents=True, exist_ok=True)
            with lzma.open(xz, "rb") as f, open(target, "wb") as out:
                shutil.copyfileobj(f, out, 1 << 20)
            got = _md5(target)
            if got != want:
                raise ParameterError("--pack", str(xz), f"a packed file whose content has MD5 {want} (it unpacked "
                                     f"to {got}: the pack is corrupt; pack it again)")
    return dest


def pending_datasets(rates: dict | None = None) -> list[str]:
    """The datasets of the entries not done yet, in the order the queue first needs them."""
    return list(dict.fromkeys(d for e in QUEUE if e.status(rates) != "done" for d in e.datasets))


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of the working tree that travels with every device call (tracked and untracked, not ignored, files)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                           capture_output=True, check=True).stdout.decode().split("\0")
    return sum((repo / n).stat().st_size for n in set(names) if n and (repo / n).is_file())


def carry_calls(packed: list[Path], dest: Path = PACK, budget: int | None = None) -> list[list[Path]]:
    """The top folders of ``packed`` files (under ``dest``: one per dataset, e.g. ``.gpu/data/cifar10``), in their
    order, split into the device calls that can carry them (each into the first call with room for it): each
    call's folders within ``budget`` bytes (default: a call's 64 MiB less the working tree). A visit's calls keep
    what the earlier ones unpacked (``/tmp`` stays on a warm machine), so an entry whose datasets do not fit one
    call runs in the call that brings the last of them."""
    budget = CALL_CARRY_BYTES - tree_bytes() if budget is None else budget
    sizes: dict[Path, int] = {}
    for f in packed:
        top = dest / Path(f).relative_to(dest).parts[0]
        sizes[top] = sizes.get(top, 0) + Path(f).stat().st_size
    calls, used = [], []
    for top, size in sizes.items():
        check(size <= budget, "--datasets", top.name, f"packed folders of at most {budget / 1e6:.1f} MB (a device "
              f"call's {CALL_CARRY_BYTES / 1e6:.1f} MB less the working tree; it packs to {size / 1e6:.1f} MB)")
        k = next((k for k, u in enumerate(used) if u + size <= budget), len(calls))
        if k == len(calls):
            calls.append([])
            used.append(0)
        calls[k].append(top)
        used[k] += size
    return calls


def present_datasets(names, root: Path | None = None) -> set[str]:
    """Those of ``names`` whose files afl finds (under ``root``, else its search path), checksums verified."""
    from .data.files import locate
    found = set()
    for name in dict.fromkeys(names):
        try:
            locate(name, root=root, download=False)
            found.add(name)
        except (DataMissingError, ParameterError):
            pass
    return found


# -- a visit ------------------------------------------------------------------------------------------------------
def scratch() -> Path:
    """Where a visit's runs write before their archives are packed: outside the repository, kept by a warm machine
    from one call to the next (``$TMPDIR/afl-queue``)."""
    return Path(os.environ.get("TMPDIR", "/tmp")) / "afl-queue"


def machine(device: str) -> str:
    """What the entries will run on; a :class:`ParameterError` where that is not a GPU (unless ``device`` is cpu,
    for tests)."""
    import torch
    if device == "cpu":
        return "cpu (a test of the queue, not a paper-scale run)"
    check(torch.cuda.is_available(), "device", device, "a machine with a CUDA GPU (this one has none: the queue's "
          "entries are the runs a CPU cannot do)")
    props = torch.cuda.get_device_properties(0)
    return f"{props.name}, {props.total_memory / 2**30:.0f} GiB, torch {torch.__version__}"


def run(entry: Entry, minutes: float, out: Path, device: str = "cuda", resume_from: Path | None = None,
        rates: dict | None = None, work: Path | None = None, argv: list[str] | None = None,
        env: dict | None = None, overhead_min: float = OVERHEAD_MIN, allow_partial: bool = False) -> dict:
    """Run ``entry`` within ``minutes`` of wall time; refuse it if its estimate does not fit. Leaves
    ``out/<entry>.tar.gz`` (the result files, and the checkpoints of a run stopped midway where each is small
    enough to come back) and returns what happened. ``argv``: run this instead of the entry's command (tests);
    ``overhead_min``: minutes kept for the rest of the visit (half of it after the deadline, to stop and pack);
    ``allow_partial``: start it even so, to stop at the deadline and go on from its checkpoints in a later call
    (on the same warm machine, or from the archive where its checkpoints are small enough to come back)."""
    check_real("minutes", minutes, 0, strict_low=True)
    machine(device)
    need = entry.minutes(rates)
    if need + overhead_min > minutes and not allow_partial:
        raise ParameterError("--minutes", minutes, f"at least {need + overhead_min:.1f} for entry {entry.name} "
                             f"({entry.client_steps():,} client steps at {entry.rate(rates)[0]:,.0f} client-steps/s: "
                             f"{entry.rate(rates)[1]}; plus {overhead_min} for the visit); it was not started")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(work or scratch()) / entry.name
    if resume_from is not None:
        work.mkdir(parents=True, exist_ok=True)
        with tarfile.open(resume_from) as tar:
            tar.extractall(work, filter="data")
    command = [sys.executable, "-m", "afl.cli", *(argv or entry.argv), "--out", str(work)]
    deadline = time.monotonic() + minutes * 60 - overhead_min * 60 / 2
    t0 = time.monotonic()
    env = {**os.environ, "AFL_CHECKPOINT_EVERY": "60", **(env or {})}
    proc = subprocess.Popen(command, env=env)
    try:
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        stopped = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)          # afl repro saves what it has and names the resume command
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        stopped = True
    seconds = time.monotonic() - t0
    finished = code == 0 and (work / f"{entry.experiment}.json").is_file()
    archive = out / f"{entry.name}.tar.gz"
    carried_back, left_behind = _archive(work, archive, finished)
    return {"entry": entry.name, "finished": finished, "stopped_at_deadline": stopped, "exit_code": code,
            "seconds": round(seconds, 1), "estimated_minutes": round(need, 2), "archive": str(archive),
            "archive_mb": round(archive.stat().st_size / 1e6, 2), "checkpoints_left_behind": left_behind,
            "commit": _what_to_commit(entry, archive.name, finished, bool(carried_back), bool(left_behind))}


def _archive(work: Path, archive: Path, finished: bool) -> tuple[list[Path], list[str]]:
    """Write ``archive`` (a tar.gz that must come back from the call: at most :data:`RETURN_BYTES`) with the files
    of ``work``: the results, and where the runs stopped midway, the checkpoints that fit beside them (checkpoints
    written halfway are left out). Returns the checkpoints it holds and those left behind (name and size)."""
    files = [p for p in sorted(work.rglob("*")) if p.is_file() and not p.name.endswith(".ckpt.part")]
    results = [p for p in files if p.suffix != ".ckpt"]
    room = RETURN_BYTES - sum(p.stat().st_size for p in results)     # a checkpoint hardly compresses
    carried_back, left_behind = [], []
    for p in [] if finished else [p for p in files if p.suffix == ".ckpt"]:
        if p.stat().st_size <= room:         # beyond, the archive would not come back, results and all
            carried_back.append(p)
            room -= p.stat().st_size
        else:
            left_behind.append(f"{p.name} ({p.stat().st_size / 1e6:.0f} MB)")
    with tarfile.open(archive, "w:gz") as tar:
        for p in results + carried_back:
            tar.add(p, arcname=str(p.relative_to(work)))
    return carried_back, left_behind


def _what_to_commit(entry: Entry, archive: str, finished: bool, carried_back: bool, left_behind: bool) -> str:
    """What to do with an entry's archive: its results into ``results/``, or the archive of a run stopped midway into
    :func:`carry`, for the next visit to go on from."""
    if finished:
        return (f"mkdir -p results/{entry.dest} && tar xzf {archive} -C results/{entry.dest} "
                f"--exclude='*.checkpoints' --exclude='*.partial.jsonl' && git rm -q --ignore-unmatch "
                f"{carry(entry).relative_to(REPO)}")
    here = f"in the next call of this visit, 'afl queue run {entry.name}' goes on from those left on the machine"
    if not left_behind:
        return f"cp {archive} {carry(entry).relative_to(REPO)} (the next visit goes on from it)"
    if carried_back:
        return (f"cp {archive} {carry(entry).relative_to(REPO)} (the next visit goes on from it; the runs whose "
                f"checkpoints could not come back start over, unless, {here})")
    return f"nothing: its checkpoints cannot come back; {here}"


def measure_rate(entry: Entry, device: str = "cuda", env: dict | None = None, timeout: float | None = None,
                 argv: list[str] | None = None, work: Path | None = None) -> tuple[float, str]:
    """The rate of ``entry`` on this machine: a short run of it (its ``probe`` fields), end to end (the process,
    loading the data, warming up), client steps over wall seconds; ``timeout`` seconds at most. ``argv``: run this
    instead (tests); ``work``: where the short run writes (default: a temporary folder, not the device call's
    output, whose files are few)."""
    check(bool(entry.probe) or argv is not None, "entry", entry.name, "an entry with probe fields, or a rate in "
          "RATES")
    short = replace(entry, sets=entry.sets | entry.probe)
    work = Path(work or scratch()) / f"rate-{entry.name}"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "afl.cli", *(argv or short.argv), "--out", str(work)],
                   env={**os.environ, **(env or {})}, check=True, timeout=timeout)
    seconds = time.monotonic() - t0
    _, steps = computed(work, entry.experiment)
    sets = " ".join(f"{k}={v}" for k, v in entry.probe.items())
    return steps / seconds, (f"measured in a visit on {machine(device)}: a short run of the entry ({sets}), "
                             f"{steps:,} client steps in {seconds:.1f} s end to end (afl queue run)")


def computed(folder: Path, experiment: str) -> tuple[int, int]:
    """The runs and client steps an ``afl repro <experiment> --out folder`` computed: those of its result, or of its
    finished runs (``<experiment>.partial.jsonl``) where it was stopped before the end. FedAST's runs count their
    steps per task."""
    from .results import PartialRuns
    result = Path(folder) / f"{experiment}.json"
    runs = (json.loads(result.read_text())["runs"] if result.is_file()
            else PartialRuns(Path(folder) / f"{experiment}.partial.jsonl", key="").saved())
    return len(runs), sum(sum(t["client_steps"] for t in r["tasks"]) if "tasks" in r else r["computed_client_steps"]
                          for r in runs)


def load_rates(path: Path) -> dict:
    """:data:`RATES` with the rates measured since over them: a JSON list of ``{model, clients, rate, basis}``, or
    ``{"rates": [...]}`` (``tools/gpu_visit.py``'s rates.json)."""
    rates = dict(RATES)
    try:
        saved = json.loads(Path(path).read_text())
        for row in saved["rates"] if isinstance(saved, dict) else saved:
            rates[(row["model"], int(row["clients"]))] = (check_real("rate", row["rate"], 0, strict_low=True),
                                                          str(row["basis"]))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ParameterError("--rates", str(path), f"a JSON file of measured rates: [{{model, clients, rate, basis}}, "
                             f"...] ({type(error).__name__}: {error})") from None
    return rates


def visit(entries: list[Entry], minutes: float, out: Path, device: str = "cuda", rates: dict | None = None,
          pack: Path | None = None, data_root: Path = Path("/tmp/afl-data"), resume_from: Path | None = None,
          allow_partial: bool = False) -> list[dict]:
    """``afl queue run``: check the machine, unpack ``pack`` (its MD5s checked), then run ``entries`` (default: the
    next that fit the ``minutes``, measuring first the rate of an entry whose turn it is and that has none; with
    ``allow_partial`` and none fitting, the next whose checkpoints come back, to go on in a later visit; an entry
    named in ``entries`` starts with ``allow_partial`` whatever its checkpoints) one after the other within
    the minutes, each from its carried archive if one is committed; an entry whose datasets this call does not have
    is passed over (:func:`carry_calls`). Writes ``out/queue-report.json`` and the rates it measured into
    ``out/rates.json`` (beside those there) and :func:`scratch`, where the visit's later calls find them; returns
    each entry's report (:func:`run`)."""
    check_real("--minutes", minutes, 0, strict_low=True, hint="wall minutes this call may use")
    print(f"afl queue: on {machine(device)}", flush=True)
    t_end = time.monotonic() + minutes * 60
    Path(out).mkdir(parents=True, exist_ok=True)
    env = {}
    if pack is not None:
        env["AFL_DATA"] = str(unpack(pack, data_root))
        print(f"afl queue: data unpacked into {data_root}, MD5s checked", flush=True)
    kept = scratch() / "rates.json"          # what the earlier calls of this visit measured
    if kept.is_file():
        rates = {**load_rates(kept), **(rates or {})}
    reports, ran = [], set()
    present = present_datasets(pending_datasets(rates), root=data_root if pack is not None else None)
    for e in QUEUE:
        if not set(e.datasets) <= present and e.status(rates) != "done":
            ran.add(e.name)                   # passed over: a later call of the visit may carry its data
            print(f"afl queue: {e.name} passed over, its data was not carried: "
                  f"{', '.join(sorted(set(e.datasets) - present))}", flush=True)

    def left() -> float:
        return (t_end - time.monotonic()) / 60

    def turns() -> list[Entry]:
        """The queue's own order: rates measured where it is their turn, then the next entries that fit."""
        nonlocal rates
        while (e := to_measure(rates, skip=ran)) is not None and left() > MEASURE_MIN + OVERHEAD_MIN:
            ran.add(e.name)                   # measured once, whatever happens
            print(f"afl queue: {e.name} has no rate: measuring it ({left():.1f} minutes left)", flush=True)
            try:
                rate, basis = measure_rate(e, device=device, env=env, timeout=MEASURE_MIN * 60)
            except (subprocess.SubprocessError, OSError, ValueError, KeyError) as error:
                print(f"afl queue: measuring {e.name} failed ({type(error).__name__}: {error})", flush=True)
                continue
            rates = {**(rates or RATES), (e.model, e.width): (rate, basis)}
            for path in (Path(out) / "rates.json", kept):
                save_rates(path, e, rate, basis)
            ran.discard(e.name)
            print(f"afl queue: {e.name}: {rate:,.0f} client-steps/s, {e.minutes(rates):.1f} minutes, "
                  f"{e.status(rates)}", flush=True)
        return next_entries(left(), rates, skip=ran)

    chosen = list(entries or turns())
    if not chosen and allow_partial:         # minutes spent on a run whose checkpoints stay behind would be lost
        chosen = [e for e in QUEUE if e.name not in ran and e.status(rates) == "pending" and e.carried()][:1]
    if not chosen:
        raise ParameterError("--minutes", minutes, "time for at least the next pending entry, with its data carried: "
                             + "; ".join(f"{r['name']} needs {r['minutes'] + OVERHEAD_MIN:.1f}" for r in listing(rates)
                                         if r["status"] == "pending" and r["name"] not in ran)[:400])
    while chosen:
        if not room_for_an_archive(Path(out)):
            print(f"afl queue: {out} holds what a call brings back ({RETURN_FILES} files, {RETURN_TOTAL >> 20} MiB, "
                  f"with this call's report and rates): {', '.join(e.name for e in chosen)} wait for the next call",
                  flush=True)
            break
        entry = chosen.pop(0)
        ran.add(entry.name)
        print(f"afl queue: {entry.name}: afl {' '.join(entry.argv)} ({left():.1f} minutes left)", flush=True)
        resume = resume_from or carry(entry)
        reports.append(run(entry, left(), out, device=device, rates=rates, env=env,
                           resume_from=resume if resume.is_file() else None, allow_partial=allow_partial))
        print(json.dumps(reports[-1]), flush=True)
        if not chosen and not entries:
            chosen = turns()[:1]
    (Path(out) / "queue-report.json").write_text(json.dumps(reports, indent=1))
    return reports


def room_for_an_archive(out: Path) -> bool:
    """Whether one more entry's archive (at most :data:`RETURN_BYTES`) would come back from the call with what ``out``
    holds and the report and rates a visit writes there last (:data:`RETURN_FILES`, :data:`RETURN_TOTAL`)."""
    files = [p for p in out.rglob("*") if p.is_file()]
    last = {"queue-report.json", "rates.json"} - {p.name for p in files}
    return (len(files) + len(last) + 1 <= RETURN_FILES
            and sum(p.stat().st_size for p in files) + RETURN_BYTES <= RETURN_TOTAL)


def save_rates(path: Path, entry: Entry, rate: float, basis: str) -> None:
    """Add ``entry``'s measured rate to the rates file ``path`` (:func:`load_rates` reads it; commit it to
    :data:`RATES`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(path.read_text()) if path.is_file() else {"rates": []}
    saved["rates"].append({"model": entry.model, "clients": entry.width, "rate": round(rate, 1), "basis": basis})
    path.write_text(json.dumps(saved, indent=1))

__all__ = ["QUEUE", "RATES", "RATE_PROBE", "FLEET", "FLEET_RATES", "Entry", "find", "listing", "next_entries",
           "to_measure", "pack", "unpack", "pending_datasets", "tree_bytes", "carry_calls", "present_datasets",
           "machine", "run", "measure_rate", "computed", "load_rates", "room_for_an_archive", "save_rates", "visit"]
