"""FAVAS (Leconte et al. 2023, arXiv:2305.16099) Table 2 and Figures 1-3: their settings (quick and paper
scale) and the functions that compute them. Notebooks and ``afl repro favas-*`` both call these.

Settings the paper states (Sec. 5): n = 100 clients, s = 20, K = 20 local steps, batch 128, FedBuff
buffer Z = 10; MNIST shallow net (the public QuAFL code's MnistNet, 784-32-10), lr 0.5, total simulated
time 5000; CIFAR-10 ResNet-20, lr 0.005, time 10000; TinyImageNet ResNet-18, lr 0.1, time 10000; one
third of the clients slow unless noted; non-IID = 2 classes per client, without replacement.

Settings taken from the public QuAFL code the paper built its simulator on (ShayanTalaei/QuAFL), because
the paper's Appendix C is not available: exponential step times of mean 2 (fast) and 8 (slow); a server
interaction time of 10 per server step (QuAFL/FAVAS server clock, FedAvg rounds, FedBuff steps); QuAFL's
local lr scaled by (s+1)/s; MNIST fed as pixels in [0, 1] (no Normalize). Ours, stated: clients are
assigned to speed classes at random (seeded); accuracy is measured on the official MNIST test set; the
reported number is the accuracy at the final simulated time.

Each table row is a *method*: an algorithm with the settings of one variant (:data:`METHODS`). Where the
paper's text and the code it builds on (or what reproduces its numbers) differ, both variants are rows:
FedBuff as Nguyen et al. describe it (``concurrency`` clients in flight, updates weighted by
1/sqrt(1 + staleness)) and as the QuAFL code runs it (every client, lr Z/n); FAVAS with the text's ``1/alpha``
and with ``alpha_bar/alpha``; QuAFL at full precision and with the QuAFL code's 14-bit lattice exchange.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial as partial_fn
from pathlib import Path
from typing import Callable

import numpy as np

from ..algorithms import make_federation, run_algorithm
from ..algorithms.favas import MODES
from ..budget import MAX_BATCH, SAMPLE_CLIENTS, Work, busy_clients_work, fields_of
from ..checkpoint import checkpointing
from ..data import DATASET_NAMES, load_dataset
from ..engine import PRECISIONS
from ..errors import check_choice, check_int, check_real
from ..fleet import Outcome
from ..models import MODEL_NAMES
from ..papers import favas as paper
from ..plots import plot_bars, plot_curves, style
from ..results import PartialRuns
from ..runtime import resolve_device
from ..stats import error_bars, mean_std, paired_difference, pm
from ..sim.speeds import two_speed
from .runner import (MAX_SEEDS, Grid, base_setting, compute, execute, heading, paper_difference, run_tasks,
                     same_settings, settings_record, title_tag, with_overrides, write_files)

#: Table 2's columns: partition scheme and fraction of slow clients.
SPLITS = {
    "iid": dict(partition="iid", slow_fraction=1 / 3),
    "noniid_2of3_fast": dict(partition="shards", slow_fraction=1 / 3),
    "noniid_1of9_fast": dict(partition="shards", slow_fraction=8 / 9),
}
#: each split as the paper's Table 2 writes it
SPLIT_NAMES = {"iid": "IID", "noniid_2of3_fast": "non-IID, 2/3 fast", "noniid_1of9_fast": "non-IID, 1/9 fast"}

#: The paper's Table 2 (mean ± std over 10 runs, %) by afl's algorithm and split names, read from its transcription
#: (:data:`afl.papers.favas.TABLE2`); shown only as a labelled reference.
PAPER_ROWS = {"fedavg": "FedAvg", "quafl": "QuAFL", "fedbuff": "FedBuff", "favas": "FAVAS"}
PAPER_COLUMNS = dict(zip(SPLITS, (paper.IID, paper.TWO_THIRDS, paper.ONE_NINTH)))
PAPER_TABLE2 = {algorithm: {split: (paper.TABLE2[row, column].value, paper.TABLE2[row, column].pm)
                            for split, column in PAPER_COLUMNS.items()} for algorithm, row in PAPER_ROWS.items()}


@dataclass(frozen=True)
class FavasSetting:
    """One FAVAS experiment's settings (defaults: the paper's MNIST Table 2)."""

    dataset: str = "mnist"
    normalize: bool = False
    model: str = "mlp32"
    n: int = 100
    s: int = 20
    K: int = 20
    batch: int = 128
    lr: float = 0.5
    total_time: float = 5000.0
    eval_every: float = 100.0
    server_interval: float = 10.0
    server_time: float = 10.0
    Z: int = 10
    concurrency: int | None = None   # FedBuff's clients in flight (Nguyen et al.); None: s, FAVAS's contacts per step
    mode: str = "deterministic"
    seeds: int = 3
    methods: tuple = ("fedavg", "quafl", "quafl-lattice14", "fedbuff", "fedbuff-quafl-code", "favas",
                      "favas-normalized")
    splits: tuple = tuple(SPLITS)
    precision: str = "fp32"          # the engine's (afl.engine.PRECISIONS); "bf16" is opt-in mixed precision

    def __post_init__(self):
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("dataset", self.dataset, DATASET_NAMES)
        check_choice("model", self.model, MODEL_NAMES)
        check_choice("mode", self.mode, MODES)
        n = check_int("n", self.n, 1)
        check_int("s", self.s, 1, n, hint="at most n")
        check_int("Z", self.Z, 1, n, hint="at most n")
        if self.concurrency is not None:
            check_int("concurrency", self.concurrency, 1, n, hint="FedBuff's clients in flight, at most n, or None")
        check_int("batch", self.batch, 1, MAX_BATCH)
        for name in ("K", "seeds"):
            check_int(name, getattr(self, name), 1)
        for name in ("lr", "total_time", "eval_every", "server_interval"):
            check_real(name, getattr(self, name), 0, strict_low=True)
        check_real("server_time", self.server_time, 0)
        for m in self.methods:
            check_choice("methods", m, METHODS)
        for sp in self.splits:
            check_choice("splits", sp, SPLITS)

    def work(self) -> Work:
        """At most the work of one run: every client computing without a pause at its split's speeds
        (:func:`afl.budget.busy_clients_work`), an evaluation every ``eval_every``."""
        most = max((busy_clients_work(two_speed(SAMPLE_CLIENTS, SPLITS[sp]["slow_fraction"]).mean_step_times(),
                                      self.total_time, self.eval_every, clients=self.n) for sp in self.splits),
                   key=lambda w: w.client_steps)
        return replace(most, steps_set_by=fields_of(self, "total_time", "n"))

    def run_kwargs(self, method: str) -> dict:
        """The settings of ``method``'s algorithm in this experiment (see :data:`METHODS`)."""
        check_choice("method", method, METHODS)
        return METHODS[method].settings(self)


@dataclass(frozen=True)
class Method:
    """A row of the tables: ``algorithm`` run with ``settings(cfg)``; ``source`` says where the variant comes
    from (its colour, line style and label in pictures: :func:`afl.plots.style`); an ``ablation`` removes one
    ingredient of a method, and a method ``beyond`` the paper is one FAVAS does not compare with: neither has a
    paper row."""

    algorithm: str
    source: str
    settings: Callable[[FavasSetting], dict]
    ablation: bool = False
    beyond: bool = False

    @property
    def in_paper(self) -> bool:
        """Whether the paper's Table 2 has this method's row."""
        return not (self.ablation or self.beyond)


def _clocked(c: FavasSetting, **extra) -> dict:
    return dict(K=c.K, lr=c.lr, s=c.s, server_interval=c.server_interval, **extra)


def _buffered(c: FavasSetting, **extra) -> dict:
    return dict(K=c.K, Z=c.Z, server_time=c.server_time) | extra


METHODS: dict[str, Method] = {
    "fedavg": Method("fedavg", "FAVAS Sec. 5; rounds as in the QuAFL code",
                     lambda c: dict(K=c.K, lr=c.lr, s=c.s, server_time=c.server_time)),
    "quafl": Method("quafl", "FAVAS Sec. 3 without compression; lr (s+1)/s as the code",
                    _clocked),
    "quafl-lattice14": Method(
        "quafl", "the QuAFL notebooks' quantized exchange, server interval x 14/32",
        lambda c: _clocked(c, quantizer="lattice:14:1e-4", scale_interval_by_bits=True)),
    "fedbuff": Method("fedbuff", "Nguyen et al.: s clients in flight, staleness weight 1/sqrt(1+tau); lr as FAVAS",
                      lambda c: _buffered(c, lr=c.lr, concurrency=c.concurrency or c.s, staleness="sqrt")),
    "fedbuff-quafl-code": Method(
        "fedbuff", "the QuAFL code's train_FedBuff: every client in flight, lr Z/n",
        lambda c: _buffered(c, lr=c.lr * c.Z / c.n, concurrency=None)),
    "favas": Method("favas", "FAVAS Algorithm 1 as written: 1/alpha",
                    lambda c: _clocked(c, mode=c.mode, reweighting="literal")),
    "favas-normalized": Method("favas", "ours: alpha_bar/alpha, the server step x alpha_bar",
                               lambda c: _clocked(c, mode=c.mode, reweighting="normalized")),
    "favas-noreweight": Method("favas", "ablation: FAVAS without its reweighting (the local model is sent as is)",
                               lambda c: _clocked(c, mode=c.mode, reweighting="none"), ablation=True),
    "favas-mixing": Method("favas", "ablation: FAVAS with QuAFL's client mixing instead of the restart",
                           lambda c: _clocked(c, mode=c.mode, reweighting="literal", client_mixing=True),
                           ablation=True),
    # beyond the paper: the asynchronous methods the field compares against, on FAVAS's clock (``async-family``);
    # each with s clients in flight and FAVAS's local steps and lr, as FedBuff's row
    "fedasync": Method("fedasync", "Xie et al.: alpha 0.6, s = (tau+1)^-0.5 (the paper's); s in flight, lr as FAVAS",
                       lambda c: _buffered(c, Z=1, lr=c.lr, concurrency=c.concurrency or c.s, alpha=0.6,
                                           mixing="poly:0.5"), beyond=True),
    "ca2fl": Method("ca2fl", "Wang et al. 2024: cached-update calibration, eta 1; s in flight, lr as FAVAS",
                    lambda c: _buffered(c, lr=c.lr, concurrency=c.concurrency or c.s, server_lr=1.0), beyond=True),
    "fadas": Method("fadas", "Wang et al. 2024: AMSGrad server, tau_c 1; eta 0.01 ours (a probe); s in flight",
                    lambda c: _buffered(c, lr=c.lr, concurrency=c.concurrency or c.s, server_lr=0.01, tau_c=1),
                    beyond=True),
    "fadas-code": Method("fadas", "FADAS as the authors' code runs it: bias-corrected moments, eta/tau_max; eta 0.01",
                         lambda c: _buffered(c, lr=c.lr, concurrency=c.concurrency or c.s, server_lr=0.01, tau_c=1,
                                             form="code"), beyond=True),
    "qafel": Method("qafel", "Ortega & Jafarkhani: 4-bit both ways (FLSim's channel, as the paper ran), hidden "
                    "state, 1/sqrt(1+tau); s in flight",
                    lambda c: _buffered(c, lr=c.lr, concurrency=c.concurrency or c.s, staleness="sqrt",
                                        client_quantizer="scalar:4", server_quantizer="scalar:4"), beyond=True),
}

#: the asynchronous family raced on FAVAS's clock (``afl repro async-family``): FedAvg as the synchronous
#: reference, then one row per method, each as its paper describes it
ASYNC_FAMILY = ("fedavg", "fedasync", "fedbuff", "ca2fl", "fadas", "favas", "qafel")


def reference(method: str) -> dict | None:
    """The paper's Table 2 row of ``method``'s algorithm."""
    known = METHODS.get(method)
    return PAPER_TABLE2.get(known.algorithm) if known and known.in_paper else None


#: The ablation: FAVAS, each of its two ingredients removed in turn, and QuAFL (both removed, lr (s+1)/s).
ABLATION = ("quafl", "favas", "favas-noreweight", "favas-mixing")

#: Experiments: name -> (paper setting, quick setting). Quick settings run in CI and in the notebooks; at simulated
#: time 1000 the paper's non-IID ranking already shows (FAVAS ahead of FedBuff, FedAvg and QuAFL: results/).
#: Figures 1 and 2 use Table 2's setting on one split each, so their runs are Table 2's runs (Fig. 2 adds the
#: spread of the local models for FAVAS and QuAFL). ``favas-ablation`` is Table 2's setting with :data:`ABLATION`.
EXPERIMENTS = {
    "favas-table2": (FavasSetting(seeds=10), FavasSetting(total_time=1000, eval_every=100, seeds=1)),
    "favas-fig1": (FavasSetting(seeds=3, splits=("noniid_2of3_fast",)),
                   FavasSetting(total_time=1000, eval_every=50, seeds=1, splits=("noniid_2of3_fast",))),
    "favas-fig2": (FavasSetting(seeds=3, splits=("noniid_1of9_fast",)),
                   FavasSetting(total_time=1000, eval_every=50, seeds=1, splits=("noniid_1of9_fast",))),
    "favas-ablation": (FavasSetting(seeds=3, methods=ABLATION), FavasSetting(total_time=1000, eval_every=100, seeds=1,
                                                                             methods=ABLATION)),
    "favas-fig3a": (FavasSetting(dataset="cifar10-jpeg", normalize=True, model="resnet20", lr=0.005, batch=128,
                                 total_time=10000, eval_every=500, seeds=1, splits=("noniid_2of3_fast",)),
                    FavasSetting(dataset="cifar10-jpeg", normalize=True, model="resnet20", lr=0.005, n=20, s=4,
                                 Z=2, K=2, batch=16, total_time=60, eval_every=20, seeds=1,
                                 splits=("noniid_2of3_fast",))),
    "async-family": (FavasSetting(seeds=5, methods=ASYNC_FAMILY, splits=("noniid_2of3_fast", "noniid_1of9_fast")),
                     FavasSetting(total_time=1000, eval_every=100, seeds=5, methods=ASYNC_FAMILY,
                                  splits=("noniid_2of3_fast", "noniid_1of9_fast"))),
    "favas-fig3b": (FavasSetting(dataset="tinyimagenet", normalize=True, model="resnet18", lr=0.1,
                                 total_time=10000, eval_every=500, seeds=1, splits=("iid",)),
                    FavasSetting(dataset="tinyimagenet", normalize=True, model="resnet18", lr=0.1, n=10, s=2, Z=2,
                                 K=2, batch=16, total_time=40, eval_every=20, seeds=1, splits=("iid",))),
}


def setting(experiment: str, quick: bool | None = None, **overrides) -> FavasSetting:
    """The paper or quick setting of ``experiment`` (quick by default when ``AFL_QUICK=1``), with overrides."""
    return with_overrides(base_setting(EXPERIMENTS, FavasSetting, experiment, quick, overrides), overrides)


def compute_run(cfg: FavasSetting, method: str, split: str, seed: int, *, dataset=None, device="cpu",
                root=None, track_variance: bool = False, schedule: bool = False, checkpoints=None) -> dict:
    """One seeded run of ``method`` on ``split``: its evaluation curve, final accuracy and costs. ``checkpoints``: a
    folder where the run saves its state as it goes and from which it goes on (:mod:`afl.checkpoint`)."""
    check_choice("method", method, METHODS)
    check_choice("split", split, SPLITS)
    data = dataset if dataset is not None else load_dataset(cfg.dataset, root=root, device=device,
                                                            normalize=cfg.normalize)
    sp = SPLITS[split]
    fed = make_federation(data, cfg.model, cfg.n, sp["partition"], batch_size=cfg.batch,
                          slow_fraction=sp["slow_fraction"], seed=seed, device=device,
                          precision=cfg.precision)
    algorithm = METHODS[method].algorithm
    extra = {"track_variance": True} if track_variance and algorithm in ("favas", "quafl") else {}
    out = run_algorithm(algorithm, fed, total_time=cfg.total_time, eval_every=cfg.eval_every, allow_large=True,
                        **cfg.run_kwargs(method), **extra,   # the work was checked for the grid: runner.execute
                        **checkpointing(checkpoints, split, method, seed))
    sched = out.pop("schedule")
    out.pop("model")
    out["settings"] = settings_record(out["settings"])
    out.update(method=method, algorithm=algorithm, split=split, seed=seed)
    if schedule:
        out["schedule"] = sched
    return out


def run_key(run: dict) -> tuple:
    """What identifies a run within an experiment: (split, method, seed)."""
    return run["split"], run["method"], run["seed"]


def grid(cfg: FavasSetting, *, seeds: int | None = None, device="cpu", root=None, track_variance=False,
         fleet: bool = True, fleet_size: int | None = None, name: str = "favas") -> Grid:
    """Every (split, method, seed) of ``cfg`` as a :class:`~afl.repro.runner.Grid` named ``name``."""
    seeds = cfg.seeds if seeds is None else check_int("seeds", seeds, 1, MAX_SEEDS)
    keys = [(sp, m, seed) for seed in range(seeds) for sp in cfg.splits for m in cfg.methods]
    work = partial_fn(run_grid, cfg, device=str(device), root=root, track_variance=track_variance, fleet=fleet,
                      fleet_size=fleet_size)
    return Grid(name, replace(cfg, seeds=seeds), keys, work, run_key,
                partial_fn(same_run, cfg=cfg, track_variance=track_variance), SELECTION, checkpoints=True)


def compute_runs(cfg: FavasSetting, *, seeds: int | None = None, device="cpu", root=None, track_variance=False,
                 partial: PartialRuns | None = None, progress: bool = True, done: list[dict] = (),
                 fleet: bool = True, fleet_size: int | None = None, ray: str | None = None,
                 processes: int | None = None) -> list[dict]:
    """Every (seed, split, method) of ``cfg``: as one fleet (:mod:`afl.fleet`; at most ``fleet_size`` runs live),
    one by one (``fleet=False``), or as fleets in ``processes`` processes or on a Ray cluster (``ray``: an address, or
    ``"local"``); see
    :func:`afl.repro.runner.compute` for ``done``, ``partial`` and failures."""
    g = grid(cfg, seeds=seeds, device=device, root=root, track_variance=track_variance, fleet=fleet,
             fleet_size=fleet_size)
    return compute(g, done=done, partial=partial, progress=progress, fleet=fleet, ray=ray, processes=processes,
                   device=device)


def run_grid(cfg: FavasSetting, keys: list[tuple], *, device="cpu", root=None, track_variance=False,
             fleet: bool = True, fleet_size: int | None = None, on_outcome=None, checkpoints=None) -> list[Outcome]:
    """The runs ``keys`` ((split, method, seed) each) of ``cfg`` on one machine, as a fleet or one by one; their
    :class:`~afl.fleet.Outcome` list. Loads the dataset once (a Ray task calls this on its worker)."""
    data = load_dataset(cfg.dataset, root=root, device=device, normalize=cfg.normalize)
    tasks = [(key, partial_fn(compute_run, cfg, key[1], key[0], key[2], dataset=data, device=device,
                              track_variance=track_variance, checkpoints=checkpoints)) for key in keys]
    return run_tasks(tasks, fleet=fleet, fleet_size=fleet_size, on_outcome=on_outcome)


def table2(runs: list[dict]) -> dict:
    """``{method: {split: {"mean", "std", "per_seed"}}}`` of final accuracies in %."""
    rows: dict = {}
    for r in runs:
        rows.setdefault(r["method"], {}).setdefault(r["split"], []).append(100 * r["final_accuracy"])
    return {m: {sp: dict(zip(("mean", "std"), mean_std(v)), per_seed=v) for sp, v in d.items()}
            for m, d in rows.items()}


def table2_markdown(rows: dict, with_paper: bool = True) -> str:
    """Our final accuracies (mean ± std over seeds; the value alone for one seed) per method and split, each
    beside the paper's number for the method's algorithm (a labelled reference)."""
    splits = list(next(iter(rows.values())))
    cols = [c for s in splits for c in ([f"{s} (ours)", f"{s} (paper)"] if with_paper else [s])]
    lines = ["| method | variant | " + " | ".join(cols) + " |", "|" + "---|" * (2 + len(cols))]
    for m, d in rows.items():
        cells = []
        for s in splits:
            cells.append(pm(d[s]["mean"], d[s]["std"]))
            if with_paper:
                p = (reference(m) or {}).get(s)
                cells.append(f"{p[0]} ± {p[1]}" if p else "–")
        variant = METHODS[m].source if m in METHODS else ""
        lines.append(f"| {m} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_markdown(runs: list[dict], baseline: str = "fedbuff") -> str:
    """Each method's final accuracy minus ``baseline``'s, paired by seed (the same federation and speeds), per split:
    the mean difference in points and its 95 % interval (:func:`afl.stats.paired_difference`), over the seeds both
    hold (a partial result may lack some: their count is printed where it is not every seed's); "–" where none."""
    final = {(r["split"], r["method"], r["seed"]): 100 * r["final_accuracy"] for r in runs}
    splits = list(dict.fromkeys(r["split"] for r in runs))
    methods = [m for m in dict.fromkeys(r["method"] for r in runs) if m != baseline]
    seeds = sorted({r["seed"] for r in runs})
    lines = [f"| method − {baseline} (points) | " + " | ".join(SPLIT_NAMES.get(sp, sp) for sp in splits) + " |",
             "|---" * (len(splits) + 1) + "|"]
    for m in methods:
        cells = []
        for sp in splits:
            both = [s for s in seeds if (sp, m, s) in final and (sp, baseline, s) in final]
            if not both:
                cells.append("–")
                continue
            d = paired_difference([final[sp, m, s] for s in both], [final[sp, baseline, s] for s in both])
            cells.append(f"{d['mean']:+.1f}" + (f" ({d['low']:+.1f} to {d['high']:+.1f})" if d["low"] is not None
                                                  else "") + (f", {len(both)} seeds" if len(both) < len(seeds) else ""))
        lines.append(f"| {style(m)['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curves(runs: list[dict], key: str = "accuracy") -> dict:
    """``{method: {"time", "runs"}}`` for :func:`afl.plots.plot_curves`."""
    out: dict = {}
    for r in runs:
        if key in r["curve"]:
            c = out.setdefault(r["method"], {"time": r["curve"]["time"], "runs": []})
            c["runs"].append(r["curve"][key])
    return out


def plot_table2(rows: dict, ax=None, title="FAVAS Table 2 (MNIST): ours (bars) vs paper (black marks)"):
    values = {m: {s: v["mean"] for s, v in d.items()} for m, d in rows.items()}
    errors = {m: dict(zip(d, error_bars(v["std"] for v in d.values()))) for m, d in rows.items()}
    ref = {m: {s: v[0] for s, v in reference(m).items()} for m in rows if reference(m)}
    seeds = max(len(v["per_seed"]) for d in rows.values() for v in d.values())
    return plot_bars(values, errors, ax=ax, title=title, reference=ref, seeds=seeds, names=SPLIT_NAMES)


def plot_accuracy(runs: list[dict], ax=None, title=None):
    return plot_curves(curves(runs), ax=ax, ylabel="test accuracy (%)", scale=100, title=title)


def upload_curves(runs: list[dict]) -> dict:
    """Accuracy curves as :func:`curves`, each against the uploads its runs had made by each evaluation (the mean
    over seeds: the runs of a method upload at nearly the same pace); evaluations before the first upload are
    left out (the initial model, the same for every method)."""
    out = curves(runs)
    for method, c in out.items():
        uploads = np.mean([r["curve"]["uploads"] for r in runs if r["method"] == method], axis=0)
        keep = uploads > 0
        c["time"], c["runs"] = uploads[keep], [list(np.asarray(acc)[keep]) for acc in c["runs"]]
    return out


def plot_accuracy_vs_uploads(runs: list[dict], ax=None, title=None):
    """Accuracy against uploads, on a log scale: FAVAS's server contacts s clients every step and uploads far more
    than the buffered methods."""
    ax = plot_curves(upload_curves(runs), ax=ax, ylabel="test accuracy (%)", scale=100, title=title,
                     xlabel="uploads to the server (mean over seeds, log scale)")
    ax.set_xscale("log")
    return ax


def plot_variance(runs: list[dict], ax=None, title=None):
    return plot_curves(curves(runs, "variance"), ax=ax, ylabel=r"$\sum_i \|w_i - w\|^2$", logy=True, title=title)


#: fields that choose *which* runs an experiment makes; the others fix how every run is computed
SELECTION = ("seeds", "splits", "methods")


def same_run(run: dict, cfg: FavasSetting, track_variance: bool = False) -> bool:
    """Whether a saved run is the run ``cfg`` would compute now: its method still has the algorithm settings
    the run recorded (the method's definition may have changed since), with the local models' spread recorded
    if ``track_variance`` asks for it (FAVAS and QuAFL)."""
    method = METHODS.get(run["method"])
    if method is None:
        return False
    needs_variance = track_variance and method.algorithm in ("favas", "quafl")
    return (same_settings(run.get("settings"), method.algorithm, ignore=("track_variance",),
                          **cfg.run_kwargs(run["method"]))
            and (not needs_variance or "variance" in run["curve"]))


def run_experiment(experiment: str, *, quick: bool = False, seeds: int | None = None, out="results",
                   root=None, device="cpu", progress: bool = True, fresh: bool = False, reuse=(),
                   fleet: bool = True, fleet_size: int | None = None, ray: str | None = None,
                   processes: int | None = None,
                   allow_large: bool = False, **overrides) -> list[Path]:
    """Compute an experiment and write ``OUT/<experiment>.json``, ``.md`` and ``.png``; returns the paths.

    Finished runs are appended to ``OUT/<experiment>.partial.jsonl`` as they end, and an interrupted invocation
    is resumed from that file (``fresh=True`` discards it first). ``reuse``: JSON results of other experiments
    whose runs are taken where they are the same runs (:func:`~afl.repro.runner.reusable_runs`, :func:`same_run`).
    ``fleet``, ``fleet_size``, ``ray``, ``processes``: how the runs are executed (:func:`compute_runs`; the results do not depend
    on it beyond float rounding). ``overrides`` replace fields of the setting (e.g. ``n=10``). Everything is
    checked before anything is created or computed (:func:`afl.repro.runner.execute`).
    """
    cfg = setting(experiment, quick=quick, **overrides)
    dev = resolve_device(device)
    variance = experiment == "favas-fig2"
    g = grid(cfg, seeds=seeds, device=dev, root=root, track_variance=variance, fleet=fleet, fleet_size=fleet_size,
             name=experiment)
    done = execute(g, out=out, quick=quick, seeds=seeds, fresh=fresh, reuse=reuse, progress=progress, fleet=fleet,
                   fleet_size=fleet_size, ray=ray, processes=processes, device=dev, overrides=overrides,
                   allow_large=allow_large)
    return done.publish({
        "rows": table2(done.runs),
        "methods": {m: {"algorithm": METHODS[m].algorithm, "label": style(m)["label"],
                        "source": METHODS[m].source, "settings": cfg.run_kwargs(m)} for m in cfg.methods},
        "paper": {m: {s: {"mean": v[0], "std": v[1]} for s, v in d.items()} for m, d in PAPER_TABLE2.items()}
        if experiment == "favas-table2" else None}, out, write_result)


def write_result(result: dict, out, write_json: bool = True) -> list[Path]:
    """Write ``OUT/<experiment>.json`` (unless ``write_json`` is False), its markdown report and its figure, the
    summary rows computed from the runs (:func:`table2`); returns the three paths."""
    return write_files(result | {"rows": table2(result["runs"])}, out, report, figure, write_json, dpi=120)


def figure(result: dict):
    """The experiment's picture: Table 2's bars beside the paper's marks, or accuracy (and spread) curves."""
    from matplotlib.figure import Figure

    experiment, cfg, runs = result["experiment"], result["config"], result["runs"]
    title = (f"{experiment}{title_tag(result)}: {cfg['dataset']}, n = {cfg['n']}, "
             f"{cfg['seeds']} seed" + "s" * (cfg["seeds"] > 1))
    if experiment == "favas-table2":
        fig = Figure(figsize=(12, 4.5))
        plot_table2(result["rows"], ax=fig.subplots(), title=f"{title}: ours (bars) vs paper (black marks)")
    elif experiment == "async-family":
        fig = Figure(figsize=(15, 4.4 * len(cfg["splits"])))
        for (left, right), split in zip(fig.subplots(len(cfg["splits"]), 2, squeeze=False), cfg["splits"]):
            part = [r for r in runs if r["split"] == split]
            plot_accuracy(part, ax=left, title=f"{title}\n{SPLIT_NAMES[split]}: accuracy on one clock")
            left.get_legend().remove()             # one legend per row, beside the right panel
            plot_accuracy_vs_uploads(part, ax=right, title=f"{SPLIT_NAMES[split]}: accuracy per upload")
    elif any("variance" in r["curve"] for r in runs):
        fig = Figure(figsize=(15, 4.5))
        axes = fig.subplots(1, 2)
        plot_accuracy(runs, ax=axes[0], title=f"{title}\n{', '.join(cfg['splits'])}: test accuracy")
        plot_variance(runs, ax=axes[1],
                      title="spread of the local models (FAVAS, QuAFL)\nt = 0 left out: all models equal there")
    else:
        fig = Figure(figsize=(10, 4.5))
        plot_accuracy(runs, ax=fig.subplots(), title=f"{title}\n{cfg['model']}, {', '.join(cfg['splits'])}")
    fig.tight_layout()
    return fig


def report(result: dict, per_run: bool = True) -> str:
    """The markdown of an experiment's result: command, machine, the table, and (``per_run``) one line per
    run with its costs."""
    cfg, runs = result["config"], result["runs"]
    notes = []
    if result["quick"]:
        notes.append("QUICK setting: not comparable with the paper's numbers.")
    elif difference := paper_difference(EXPERIMENTS[result["experiment"]][0], cfg, SELECTION):
        notes.append(difference)
    for key, how in (("resumed_runs", "read back from the partial file of an interrupted invocation"),
                     ("reused_runs", "taken from the results named by `--reuse` (the same runs)")):
        if result.get(key):
            notes.append(f"{result[key]} of the {len(runs)} runs were {how}; computed again, they agree to float "
                         "rounding (a fleet batches them with other runs, another CPU rounds differently), which "
                         "chaotic non-IID runs amplify.")
    lines = heading(result) + [
        f"Seeds: {cfg['seeds']}. Final test accuracy (%) at simulated time {cfg['total_time']:g}"
        + (", mean ± std over seeds." if cfg["seeds"] > 1 else ".") + "".join(" " + n for n in notes), "",
        table2_markdown(result["rows"], with_paper=result["paper"] is not None)]
    if result["experiment"] == "async-family" and "fedbuff" in cfg["methods"] and cfg["seeds"] > 1:
        lines += ["", f"Paired by seed (the same clients, data and speeds for every method), against FedBuff: the "
                  f"mean difference of final accuracy over the {cfg['seeds']} seeds, in points, with its 95 % "
                  "interval (t distribution).", "", paired_markdown(runs)]
    if not per_run:
        return "\n".join(lines)
    lines += ["", "| method | split | seed | final acc. (%) | client steps | server steps | wall s | client steps/s |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['split']} | {r['seed']} | {100 * r['final_accuracy']:.1f} | {r['client_steps']} | "
              f"{r['server_steps']} | {r['wall_seconds']:.1f} | {r['client_steps_per_s']:.0f} |" for r in runs]
    return "\n".join(lines)


__all__ = ["METHODS", "Method", "SPLITS", "PAPER_ROWS", "PAPER_COLUMNS", "PAPER_TABLE2", "FavasSetting", "EXPERIMENTS",
           "setting", "compute_run", "compute_runs", "run_grid", "table2", "table2_markdown", "curves", "plot_table2",
           "plot_accuracy", "plot_variance", "paired_markdown", "upload_curves", "plot_accuracy_vs_uploads",
           "ASYNC_FAMILY", "grid", "same_run", "run_experiment", "write_result", "report"]
