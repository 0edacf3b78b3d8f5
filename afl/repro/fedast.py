"""FedAST (Askin et al., ``shared/papers/004_*``): several models trained at once over one client pool, against
synchronous simultaneous training; Figures 2, 3, 5, 7 (with 6), 8-9 and App. D.6.

Protocol (Sec. 5, App. C and the authors' code, askinb/FedAST): N = 1,000 clients, at most 300 busy at once
(``cap``); each client holds 300 samples of every image task (Dirichlet alpha = 0.1 label skew, samples reused when
a class runs out; Shakespeare: one speaking role each); 27 local steps at batch 32 (Shakespeare 64); a job of task
m on a client of speed factor s lasts ``27 x (Exp(mean e_m s) + e_m s / 2)`` (:data:`afl.sim.FEDAST_MODEL_COSTS`).
FedAST keeps R = 96 requests per task (Fig. 7's configuration; the identical tasks of Figs. 2 and 5 share Sec. 4's
constant budget instead, Fig. 7's 4 x 96 = 384: ``total_requests``), buffers of 3 (6 for Shakespeare; scaled with a
task's share of a budget), server lr 0.1 (NoBuffer: b = 1, 0.038); the synchronous methods use server lr 1 and keep
the first k = 30 updates per task. A task stops once
it reaches its target (Table 1); its clients go to the others. The headline number (Fig. 7) is the time until the *last*
task reaches its target, and FedAST's gain over Sync-ST.

A row of an experiment is a *task set* (datasets, comma separated, ``name*k`` for k identical tasks), a method, an
availability cap and a buffer size. Paper scale needs a GPU (CIFAR-10's cnn-cifar dominates); ``--quick`` keeps
the protocol and shrinks what it must (fewer clients, MNIST and Fashion-MNIST only, lower targets) and says so.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import partial as partial_fn
from pathlib import Path

import numpy as np

from ..algorithms import make_federation
from ..algorithms.fedast import FIRST_WAVES, FedASTTask, Realloc, plan_fedast, pool_work, run_fedast
from ..budget import MAX_HELD, SAMPLE_CLIENTS, Work, fields_of
from ..checkpoint import checkpointing
from ..algorithms.sync_st import plan_sync_st, run_sync_st
from ..data import load_dataset, partition as make_partition
from ..engine import PRECISIONS
from ..errors import check, check_choice, check_int, check_real
from ..models import MODEL_NAMES
from ..papers import fedast as paper
from ..plots import style
from ..runtime import resolve_device
from ..stats import mean_std, pm
from ..sim import FEDAST_MODEL_COSTS, ShiftedExponential, three_speed
from .runner import (MAX_SEEDS, Grid, base_setting, execute, heading, paper_difference, run_tasks, title_tag,
                     with_overrides, write_files)

#: Per dataset (App. C): model, batch, client lr and weight decay (async; sync), buffer, target (Table 1), cost.
TASKS = {
    "mnist": dict(model="mlp200", batch=32, lr=0.1, lr_sync=0.2, wd=3e-4, wd_sync=3e-4, buffer=3, target=0.93,
                  cost="mnist"),
    "fashion-mnist": dict(model="lenet5", batch=32, lr=0.06, lr_sync=0.06, wd=3e-4, wd_sync=3e-4, buffer=3,
                          target=0.82, cost="fashion-mnist", model_kw=dict(in_channels=1, image_size=28)),
    "cifar10-jpeg": dict(model="cnn-cifar", batch=32, lr=0.1, lr_sync=0.1, wd=7e-4, wd_sync=3e-4, buffer=3,
                         target=0.63, cost="cifar10", model_kw=dict(image_size=32)),
    "shakespeare": dict(model="char-lstm", batch=64, lr=7.0, lr_sync=7.0, wd=7e-5, wd_sync=7e-5, buffer=6,
                        target=0.42, cost="shakespeare", model_kw=dict(num_layers=1)),
}
#: the pool's base step time (App. C.6; :mod:`afl.sim.pool`), scaled by each client's speed class and each task's cost
POOL_BASE = ShiftedExponential(shift=0.5, mean=1.0)

#: method -> (label, colour family); the synchronous ones keep the first k updates unless "-nomit"
METHODS = ("fedast", "fedast-code", "fedast-static", "fedast-nobuffer", "sync-st", "sync-st-nomit", "sync-ucb",
           "sync-bayes")
SYNC = {"sync-st": "uniform", "sync-st-nomit": "uniform", "sync-ucb": "ucb", "sync-bayes": "bayes"}
STYLES = {"fedast": ("#1f77b4", "-", "FedAST (dynamic, Realloc as in the paper)"),
          "fedast-code": ("#1f77b4", "--", "FedAST (dynamic, Realloc as in the code)"),
          "fedast-static": ("#1f77b4", ":", "FedAST (static)"),
          "fedast-nobuffer": ("#9467bd", "-", "FedAST-NoBuffer (b = 1)"),
          "sync-st": ("#7f7f7f", "-", "Sync-ST (first k)"),
          "sync-st-nomit": ("#7f7f7f", ":", "Sync-ST (no straggler mitigation)"),
          "sync-ucb": ("#bcbd22", "-", "Sync-UCB-ST (first k)"),
          "sync-bayes": ("#8c564b", "-", "Sync-Bayes-ST (first k)")}
#: Paper numbers (references only), read from their transcription (:mod:`afl.papers.fedast`): Fig. 7's mean time to
#: target of FedAST's MNIST task and of its last task, and the gain over Sync-ST
PAPER_FIG7 = {"fedast": {"mnist": int(paper.FIG7.numbers[0].value)}, "fedast_all": int(paper.FIG7.numbers[1].value),
              "gain": round(paper.FIG7.numbers[2].value / 100, 6)}
#: Fig. 7's times until the last task reached its target (references only): FedAST's, and Sync-ST's from the gain
PAPER_FIG7_FINISH = {"fedast": PAPER_FIG7["fedast_all"], "sync-st": PAPER_FIG7["fedast_all"] / (1 - PAPER_FIG7["gain"])}
#: App. D.6: the largest gain of dynamic over static allocation (reference only)
PAPER_D6_GAIN = round(paper.D6.numbers[0].value / 100, 6)


def split_method(method: str) -> tuple[str, tuple | None]:
    """``"sync-st:2/1"`` -> ``("sync-st", (2, 1))``: a synchronous method with its own allocation (proportions of
    the clients per task; Fig. 7 tunes Sync-ST's over 30 such schemes); else ``(method, None)``."""
    base, _, alloc = str(method).partition(":")
    check_choice("methods", base, METHODS)
    if not alloc:
        return base, None
    check(base in SYNC, "methods", method, "an allocation suffix only on a synchronous method")
    try:
        values = tuple(float(x) for x in alloc.split("/"))
    except ValueError:
        values = ()
    check(len(values) >= 1 and all(v > 0 for v in values), "methods", method, "sync-st:a/b/... with a, b > 0")
    return base, values


def method_style(method: str) -> dict:
    base, alloc = split_method(method)
    if alloc is not None:
        color, _, label = STYLES[base]
        shades = ["--", "-.", ":", (0, (5, 1)), (0, (1, 1))]
        return {"color": color, "linestyle": shades[sum(map(int, alloc)) % len(shades)],
                "label": f"{label}, allocation {':'.join(f'{v:g}' for v in alloc)}"}
    if method in STYLES:
        color, ls, label = STYLES[method]
        return {"color": color, "linestyle": ls, "label": label}
    return style(method)


def parse_taskset(text: str) -> list[str]:
    """``"mnist*2,cifar10-jpeg"`` -> ``["mnist", "mnist", "cifar10-jpeg"]``."""
    out = []
    for part in str(text).split(","):
        name, star, count = part.strip().partition("*")
        check_choice("tasksets", name, TASKS)
        check(not star or (count.isdecimal() and int(count) >= 1), "tasksets", text,
              "datasets joined by ',', each optionally '*<count>' with a count >= 1, e.g. 'mnist*2,cifar10-jpeg'")
        out += [name] * (int(count) if star else 1)
    return out


@dataclass(frozen=True)
class FedastSetting:
    """One FedAST experiment (defaults: the paper's protocol). ``tasksets``, ``methods``, ``caps`` (busy clients
    at most; None: all) and ``buffers`` (None: each task's own) span the grid; ``requests``: R per task (FedAST;
    None: the cap shared equally, Fig. 3); ``total_requests``: Sec. 4's budget R = sum_m R_m, constant for a number
    of available clients, shared equally by a task set's FedAST tasks (R_m = R / M; None: ``requests`` per task),
    each task's own buffer scaled with its share (b_m = b x R_m / ``requests``, the nearest integer, at least 1: the
    R / b of Fig. 7's configuration, whose ratio the authors' code keeps fixed, ``R_bs_ratio``);
    ``sync_allocation``: Sync-ST's clients per task of a task set in order (None: equal; Fig. 7's tuned 100, 84,
    48, 68); ``target_offset``: added to every Table 1 target (Table 3: +0.03, -0.10); ``stop_at_target``: False
    runs every task to ``total_time`` (Figs. 3 and 8 compare final accuracies); ``models``: ``"dataset=model"``
    replacements of :data:`TASKS`' models; ``cap_first``: False sends FedAST's first requests regardless of the
    cap, as the authors' code does (:func:`~afl.sim.simulate_pool_schedule`); ``first_wave``: what FedAST's first
    requests train from: x^(0) (``"paper"``), the model live when the authors' event loop pops them (``"code"``), or
    afl's earlier reading of the code, the model live when they start (``"current"``;
    :data:`afl.algorithms.fedast.FIRST_WAVES`). A task's time to its target is the aggregation that reaches it,
    FedAST's and Sync-ST's alike (each tested after every aggregation)."""

    tasksets: tuple = ("mnist,fashion-mnist,cifar10-jpeg,shakespeare",)
    methods: tuple = ("fedast", "fedast-code", "fedast-static", "sync-st")
    caps: tuple = (300,)
    buffers: tuple = (None,)
    clients: int = 1000
    samples: int = 300
    alpha: float = 0.1
    steps: int = 27
    requests: int | None = 96
    total_requests: int | None = None
    first_k: int = 30
    sync_allocation: tuple | None = (100, 84, 48, 68)
    target_offset: float = 0.0
    stop_at_target: bool = True
    models: tuple = ()
    cap_first: bool = True
    first_wave: str = "paper"
    total_time: float = 2000.0
    eval_every: float = 5.0
    seeds: int = 3
    precision: str = "fp32"          # the engine's (afl.engine.PRECISIONS); "bf16" is opt-in mixed precision

    def __post_init__(self):
        check_choice("precision", self.precision, PRECISIONS)
        for t in self.tasksets:
            parse_taskset(t)
        for text in self.models:
            name, sep, model = str(text).partition("=")
            check(sep == "=" and name in TASKS and model in MODEL_NAMES, "models", text,
                  f"dataset=model with a dataset of {sorted(TASKS)} and a model of afl.models.MODEL_NAMES")
        for m in self.methods:
            split_method(m)
        check_int("clients", self.clients, 1, MAX_HELD)
        for c in self.caps:
            if c is not None:
                check_int("caps", c, 1, self.clients, hint="busy clients at most, or None")
        for b in self.buffers:
            if b is not None:
                check_int("buffers", b, 1)
        check_int("samples", self.samples, 1, MAX_HELD // self.clients,
                  hint=f"per client, clients x samples at most {MAX_HELD:.0e}")
        check_real("alpha", self.alpha, 0, strict_low=True)
        if self.requests is not None:
            check_int("requests", self.requests, 1)
        if self.total_requests is not None:
            check(self.requests is not None, "total_requests", self.total_requests,
                  "None where requests is None (the buffers scale from requests)")
            for t in self.tasksets:
                k = len(parse_taskset(t))
                check_int("total_requests", self.total_requests, k, hint=f"at least one request per task of {t}")
                check(self.total_requests % k == 0, "total_requests", self.total_requests,
                      f"a multiple of the {k} tasks of {t} (shared equally)")
        check_int("first_k", self.first_k, 1)
        check_choice("first_wave", self.first_wave, FIRST_WAVES)
        check_real("total_time", self.total_time, 0, strict_low=True)
        check_real("eval_every", self.eval_every, 0, strict_low=True)
        if self.sync_allocation is not None:
            check(isinstance(self.sync_allocation, tuple) and len(self.sync_allocation) > 0, "sync_allocation",
                  self.sync_allocation, "None (equal shares) or clients per task, e.g. 100,84")
            for a in self.sync_allocation:
                check_int("sync_allocation", a, 1, hint="clients per task")
        check_real("target_offset", self.target_offset)
        for name in {n for t in self.tasksets for n in parse_taskset(t)}:
            target = TASKS[name]["target"]
            check(0 < target + self.target_offset <= 1, "target_offset", self.target_offset,
                  f"an offset that keeps {name}'s target {target} in (0, 1], i.e. in ({-target:g}, {1 - target:g}]")
        for taskset in self.tasksets:       # every run's tasks can be built: allocations fit their task sets
            for m in self.methods:
                self.tasks(taskset, m, None, None)

    def target(self, name: str) -> float:
        """Table 1's target of dataset ``name`` plus ``target_offset``."""
        return TASKS[name]["target"] + self.target_offset

    def model(self, name: str) -> tuple[str, dict | None]:
        """Dataset ``name``'s model and its keyword arguments (a replaced model gets none)."""
        for text in self.models:
            dataset, _, model = text.partition("=")
            if dataset == name:
                return model, None
        return TASKS[name]["model"], TASKS[name].get("model_kw")

    def work(self) -> Work:
        """At most the work of one run, over its task sets: the pool's clients busy without a pause
        (:func:`afl.algorithms.fedast.pool_work`; at most the largest cap of them), each task evaluated every
        ``eval_every``."""
        busy = max(self.clients if c is None else c for c in self.caps)
        def one(taskset):          # the pool's proportions from a sample of SAMPLE_CLIENTS, scaled to the busy ones
            sample = three_speed(SAMPLE_CLIENTS, base=POOL_BASE, costs=self.costs(taskset))
            return pool_work(sample, len(parse_taskset(taskset)), self.total_time, self.eval_every, busy)
        most = max((one(t) for t in self.tasksets), key=lambda w: (w.client_steps, w.evaluations))
        return replace(most, steps_set_by=fields_of(self, "total_time", "clients", "caps"),
                       evaluations_set_by=fields_of(self, "eval_every", "total_time", "tasksets"))

    def costs(self, taskset: str) -> list[float]:
        """Each task's cost factor of its client step time (:data:`afl.sim.FEDAST_MODEL_COSTS`)."""
        return [FEDAST_MODEL_COSTS[TASKS[n]["cost"]] for n in parse_taskset(taskset)]

    def share(self, taskset: str, cap: int | None = None, budget: bool = True) -> int:
        """R_m, the requests of each of ``taskset``'s FedAST tasks: ``total_requests`` shared equally (unless not
        ``budget``), else ``requests``, else ``cap`` (None: every client) shared equally (Fig. 3)."""
        k = len(parse_taskset(taskset))
        if budget and self.total_requests is not None:
            return self.total_requests // k
        return self.requests or max(1, (cap or self.clients) // k)

    def tasks(self, taskset: str, method: str, cap: int | None, buffer: int | None) -> list[FedASTTask]:
        """The tasks of one run: FedAST's (R, b, eta_s = 0.1; NoBuffer b = 1, 0.038) or the synchronous ones
        (allocation, eta_s = 1, the synchronous client lr and weight decay)."""
        names = parse_taskset(taskset)
        base, own = split_method(method)
        sync = base in SYNC
        R = self.share(taskset, cap, budget=False)
        shared = self.total_requests is not None and not sync
        alloc = [self.share(taskset, cap) if shared else R] * len(names)
        if sync and self.sync_allocation and not own:
            check(len(self.sync_allocation) == len(names), "sync_allocation", self.sync_allocation,
                  f"one number of clients per task of {taskset}")
            alloc = [int(a) for a in self.sync_allocation]
        elif own:                                  # proportions: only their ratios matter to the split
            check(len(own) == len(names), "methods", method, f"one allocation per task of {taskset}")
            alloc = [max(1, round(R * len(names) * a / sum(own))) for a in own]
        out = []
        for m, name in enumerate(names):
            spec = TASKS[name]
            own_buffer = max(1, round(spec["buffer"] * alloc[m] / R)) if shared else spec["buffer"]
            b = 1 if base == "fedast-nobuffer" else (buffer or own_buffer)
            server_lr = 1.0 if sync else (0.038 if base == "fedast-nobuffer" else 0.1)
            out.append(FedASTTask(lr=spec["lr_sync" if sync else "lr"], server_lr=server_lr, steps=self.steps,
                                  requests=int(alloc[m]), buffer=b, weight_decay=spec["wd_sync" if sync else "wd"],
                                  name=name if names.count(name) == 1 else f"{name} #{names[:m + 1].count(name)}",
                                  target=self.target(name) if self.stop_at_target else None))
        return out


#: The quick settings keep the paper's protocol (1,000 clients, 300 busy at most, R = 96 and b = 3 or Figs. 2 and 5's
#: shared budget, k = 30) on MNIST and Fashion-MNIST only, Fashion-MNIST on the MLP (LeNet-5's convolutions run per
#: client on a CPU, about 10x slower per step), Table 1's targets minus 3 points (MNIST 90 %, FMNIST 79 %) and one
#: seed; Sync-ST's allocation is tuned over equal and 1:2 (2:1 measured slower: 122 against 112 and 108, seed 0).
_QUICK = dict(models=("fashion-mnist=mlp200",), sync_allocation=None, target_offset=-0.03, total_time=800.0,
              eval_every=2.0, seeds=1)
_PAIR = "mnist,fashion-mnist"
#: Sec. 4's constant budget of requests for Figs. 2 and 5 (the paper gives none for them): Fig. 7's 4 x 96, shared
#: equally by any number of identical tasks (two: 192 and a buffer of 6; six: 64 and 2; Shakespeare's buffers 12, 4)
SHARED = 384
#: the setting fields that only choose which runs a grid makes
SELECTION = ("seeds", "methods", "tasksets", "caps", "buffers")
EXPERIMENTS = {
    "fedast-fig7": (FedastSetting(),
                    FedastSetting(tasksets=(_PAIR,), methods=("fedast", "fedast-code", "fedast-static", "sync-st",
                                                              "sync-st:1/2"), **_QUICK)),
    # Fig. 2: identical tasks, so FedAST static (nothing to reallocate between equal tasks)
    "fedast-fig2": (FedastSetting(tasksets=("cifar10-jpeg*6",), methods=("fedast-static", "sync-st", "sync-st-nomit",
                                                                          "sync-ucb", "sync-bayes"),
                                  total_requests=SHARED, sync_allocation=None, total_time=3000.0),
                    FedastSetting(tasksets=("mnist*3",), methods=("fedast-static", "sync-st", "sync-st-nomit",
                                                                  "sync-ucb", "sync-bayes"),
                                  total_requests=SHARED, **_QUICK)),
    "fedast-fig3": (FedastSetting(tasksets=("cifar10-jpeg*3", "fashion-mnist*3"),
                                  methods=("fedast-static", "fedast-nobuffer"), caps=(30, 100, 300, 1000),
                                  requests=None, sync_allocation=None, stop_at_target=False, total_time=1000.0),
                    FedastSetting(tasksets=("fashion-mnist*3",), methods=("fedast-static", "fedast-nobuffer"),
                                  **(_QUICK | dict(caps=(30, 100, 300, 1000), requests=None, stop_at_target=False,
                                                   total_time=100.0)))),
    "fedast-fig5": (FedastSetting(tasksets=tuple(f"{d}*{k}" for d in TASKS for k in (2, 4, 6)),
                                  methods=("fedast-static", "sync-st"), total_requests=SHARED, sync_allocation=None),
                    FedastSetting(tasksets=("mnist*2", "mnist*4"), methods=("fedast-static", "sync-st"),
                                  total_requests=SHARED, **_QUICK)),
    "fedast-fig8": (FedastSetting(tasksets=("fashion-mnist,cifar10-jpeg",), methods=("fedast-static",),
                                  buffers=(1, 3, 5, 10, 20), requests=175, stop_at_target=False, total_time=1000.0),
                    FedastSetting(tasksets=(_PAIR,), methods=("fedast-static",),
                                  **(_QUICK | dict(buffers=(1, 3, 5, 10, 20), requests=175, stop_at_target=False,
                                                   total_time=150.0)))),
    "fedast-fig9": (FedastSetting(tasksets=("mnist,cifar10-jpeg",), methods=("fedast-static",),
                                  buffers=(1, 2, 3, 5, 10), requests=105, stop_at_target=False, total_time=1000.0),
                    FedastSetting(tasksets=(_PAIR,), methods=("fedast-static",),
                                  **(_QUICK | dict(buffers=(1, 2, 3, 5, 10), requests=105, stop_at_target=False,
                                                   total_time=150.0)))),
    "fedast-d6": (FedastSetting(methods=("fedast", "fedast-code", "fedast-static")),
                  FedastSetting(tasksets=(_PAIR,), methods=("fedast", "fedast-code", "fedast-static"), **_QUICK)),
}


def setting(experiment: str, quick: bool | None = None, **overrides) -> FedastSetting:
    return with_overrides(base_setting(EXPERIMENTS, FedastSetting, experiment, quick, overrides), overrides)


def load_tasks(cfg: FedastSetting, root=None, device="cpu") -> dict:
    """Every dataset the experiment's task sets name, loaded once."""
    names = {n for t in cfg.tasksets for n in parse_taskset(t)}
    return {n: load_dataset(n, root=root, device=device) for n in sorted(names)}


def client_parts(cfg: FedastSetting, name: str, data, seed: int) -> list:
    """The clients' samples of one dataset: 300 each with Dirichlet(0.1) label skew (App. C), or one speaking
    role each for Shakespeare; identical tasks share them (the code's ``doesSameTaskExistBefore``)."""
    if name == "shakespeare":
        return make_partition("by_group", data.train_groups.cpu(), cfg.clients, seed=seed)
    return make_partition("fixed_size", data.train_y.cpu(), cfg.clients, seed=seed, size=cfg.samples,
                          alpha=cfg.alpha)


def compute_run(cfg: FedastSetting, taskset: str, method: str, cap: int | None, buffer: int | None, seed: int, *,
                datasets: dict, device="cpu", checkpoints=None) -> dict:
    """One seeded run: per task its curve, target and the time it was reached; ``time_to_all_targets`` (None if a
    task missed its target within ``total_time``); the allocation of requests over time (FedAST). ``checkpoints``: a
    folder where the run saves its state as it goes and from which it goes on (:mod:`afl.checkpoint`)."""
    names = parse_taskset(taskset)
    tasks = cfg.tasks(taskset, method, cap, buffer)
    profile = three_speed(cfg.clients, base=POOL_BASE, seed=seed, costs=cfg.costs(taskset))
    parts = {n: client_parts(cfg, n, datasets[n], seed) for n in set(names)}
    feds = [make_federation(datasets[n], cfg.model(n)[0], cfg.clients, batch_size=TASKS[n]["batch"],
                            profile=profile, seed=seed * 1000 + m, device=device, parts=parts[n],
                            model_kw=cfg.model(n)[1], precision=cfg.precision) for m, n in enumerate(names)]
    common = dict(total_time=cfg.total_time, eval_every=cfg.eval_every, cap=cap, seed=seed,
                  allow_large=True,         # the work was checked for the grid: runner.execute
                  **checkpointing(checkpoints, taskset, method, cap, buffer, seed))
    base, _ = split_method(method)
    if base in SYNC:
        out = run_sync_st(feds, tasks, profile, first_k=None if base == "sync-st-nomit" else cfg.first_k,
                          selection=SYNC[base], **common)
        allocations = []
        rounds = len(out["schedule"]["round_ends"])
    else:
        realloc = {"fedast": Realloc("paper"), "fedast-code": Realloc("code")}.get(method)
        out = run_fedast(feds, tasks, profile, realloc=realloc, cap_first=cfg.cap_first, first_wave=cfg.first_wave,
                         **common)
        allocations = [[t, list(r)] for t, r in out["schedule"].allocations]
        rounds = None
    per_task = []
    for name, task, h in zip(names, tasks, out["tasks"]):
        curve = h["curve"]
        target = cfg.target(name)
        reached, at, final = h["target_reached_at"], h["target_reached_accuracy"], h["final_accuracy"]
        if not cfg.stop_at_target:       # the first evaluation at or above the target, training went on
            reached, at = next(((t, a) for t, a in zip(curve["time"], curve["accuracy"]) if a >= target),
                               (None, None))
        elif reached is not None:        # the task ends with the model tested after the aggregation that reached it
            final = at
        per_task.append({"name": task.name, "target": target, "reached": reached, "reached_accuracy": at,
                         "time": curve["time"], "accuracy": curve["accuracy"], "server_steps": h["server_steps"],
                         "uploads": h["uploads"], "client_steps": h["client_steps"],
                         "final_accuracy": final, "wall_seconds": h["wall_seconds"]})
    reached = [t["reached"] for t in per_task]
    # every task's history went on from the run's checkpoint at once, on the same machines
    midway = {k: out["tasks"][0][k] for k in ("resumed_at", "sitting_cpus", "sitting_threads") if k in out["tasks"][0]}
    return {"taskset": taskset, "method": method, "cap": cap, "buffer": buffer, "seed": seed,
            "tasks": per_task, "time_to_all_targets": None if None in reached else max(reached),
            "allocations": allocations, "sync_rounds": rounds,
            "settings": [asdict(t) for t in tasks], **midway}


def planned_client_steps(cfg: FedastSetting, taskset: str, method: str, cap: int | None, seed: int) -> list[int]:
    """Per task, the client steps of run ``(taskset, method, cap, seed)`` until ``cfg.total_time`` if no task
    reaches its target, from its schedule alone (:func:`~afl.algorithms.fedast.plan_fedast` with FedAST's
    requests, :func:`~afl.algorithms.sync_st.plan_sync_st`): the work of a paper-scale run, known before it starts.
    Sync-UCB-ST and Sync-Bayes-ST choose their clients from training losses, so they have no plan."""
    base, _ = split_method(method)
    check(SYNC.get(base, "uniform") == "uniform", "method", method, "FedAST's methods, sync-st or sync-st-nomit "
          "(Sync-UCB-ST's and Sync-Bayes-ST's rounds depend on training)")
    tasks = cfg.tasks(taskset, method, cap, None)
    profile = three_speed(cfg.clients, base=POOL_BASE, seed=seed, costs=cfg.costs(taskset))
    if base in SYNC:
        return plan_sync_st(profile, tasks, cfg.total_time, cap=cap,
                            first_k=None if base == "sync-st-nomit" else cfg.first_k, seed=seed)
    return plan_fedast(profile, tasks, cfg.total_time, cap=cap, seed=seed, cap_first=cfg.cap_first)


def run_key(run: dict) -> tuple:
    return run["taskset"], run["method"], run["cap"], run["buffer"], run["seed"]


#: the setting fields only FedAST's runs read (how its first requests are sent, what they train from, how many)
FEDAST_ONLY = ("cap_first", "first_wave", "total_requests")
#: the fields a FedAST run reads only through its tasks' requests and buffers, which :func:`same_run` compares
THROUGH_TASKS = ("total_requests",)


def unread(key: tuple) -> tuple:
    """The setting fields the run of ``key`` (:func:`run_key`) does not read: a synchronous method's run is the same
    under any :data:`FEDAST_ONLY` (``--reuse`` takes Sync-ST's runs of a result that differs only there); a FedAST
    run under any :data:`THROUGH_TASKS` that leaves its tasks as they were (four tasks: 384 shared is 96 each)."""
    return FEDAST_ONLY if split_method(key[1])[0] in SYNC else THROUGH_TASKS


def same_run(run: dict, cfg: FedastSetting) -> bool:
    """Whether a saved run is what ``cfg`` computes now (its tasks' rates, requests, buffers and targets)."""
    tasks = cfg.tasks(run["taskset"], run["method"], run["cap"], run["buffer"])
    return run.get("settings") == [asdict(t) for t in tasks]


def run_grid(cfg: FedastSetting, keys: list[tuple], *, device="cpu", root=None, fleet: bool = True,
             fleet_size: int | None = None, on_outcome=None, checkpoints=None):
    datasets = load_tasks(cfg, root=root, device=device)
    work = [(key, partial_fn(compute_run, cfg, *key, datasets=datasets, device=device, checkpoints=checkpoints))
            for key in keys]
    return run_tasks(work, fleet=fleet, fleet_size=fleet_size, on_outcome=on_outcome)


def grid(cfg: FedastSetting, *, seeds=None, device="cpu", root=None, fleet=True, fleet_size=None,
         name="fedast") -> Grid:
    seeds = cfg.seeds if seeds is None else check_int("seeds", seeds, 1, MAX_SEEDS)
    keys = [(t, m, c, b, s) for s in range(seeds) for t in cfg.tasksets for c in cfg.caps for b in cfg.buffers
            for m in cfg.methods]
    work = partial_fn(run_grid, cfg, device=str(device), root=root, fleet=fleet, fleet_size=fleet_size)
    return Grid(name, replace(cfg, seeds=seeds), keys, work, run_key, partial_fn(same_run, cfg=cfg),
                selection=SELECTION, checkpoints=True, unread=unread)


def _stats(values: list) -> dict:
    got = [v for v in values if v is not None]
    mean, std = mean_std(got)
    return {"mean": mean, "std": std, "per_seed": values, "reached": f"{len(got)}/{len(values)}"}


def summarize(runs: list[dict]) -> dict:
    """Per (task set, cap, buffer) row and method: time to all targets and per task (mean, std, per seed); the
    time gain of each FedAST variant over the best Sync-ST (the allocation with the smallest mean time to all
    targets, ``best_sync``), ``(T_sync - T) / T_sync`` of the means, and of the dynamic variants over FedAST
    (static) (``gain_vs_static``, App. D.6)."""
    rows: dict = {}
    for r in runs:
        row = rows.setdefault(f"{r['taskset']} | cap {r['cap']} | buffer {r['buffer'] or 'own'}", {})
        row.setdefault(r["method"], []).append(r)
    out = {}
    for row, by_method in rows.items():
        entry = {}
        for method, rs in by_method.items():
            entry[method] = {"time_to_all_targets": _stats([r["time_to_all_targets"] for r in rs]),
                             "per_task": {t["name"]: _stats([r["tasks"][i]["reached"] for r in rs])
                                          for i, t in enumerate(rs[0]["tasks"])},
                             "final_accuracy": {t["name"]: float(np.mean([r["tasks"][i]["final_accuracy"]
                                                                          for r in rs]))
                                                for i, t in enumerate(rs[0]["tasks"])}}
        syncs = {m: e["time_to_all_targets"]["mean"] for m, e in entry.items()
                 if split_method(m)[0] == "sync-st" and e["time_to_all_targets"]["mean"] is not None}
        best = min(syncs, key=syncs.get) if syncs else None
        sync = syncs.get(best)
        entry["gain_vs_sync"] = {m: (sync - e["time_to_all_targets"]["mean"]) / sync
                                 for m, e in entry.items() if m.startswith("fedast") and sync
                                 and e["time_to_all_targets"]["mean"] is not None}
        entry["best_sync"] = best
        static = entry.get("fedast-static", {}).get("time_to_all_targets", {}).get("mean")
        entry["gain_vs_static"] = {m: (static - entry[m]["time_to_all_targets"]["mean"]) / static
                                   for m in ("fedast", "fedast-code") if m in entry and static
                                   and entry[m]["time_to_all_targets"]["mean"] is not None}
        out[row] = entry
    return out


def _cell(stats: dict) -> str:
    """A time to target in a table: mean ± std over the seeds that reached it (those / all); the mean leaves out
    the seeds that never reached."""
    return "–" if stats["mean"] is None else f"{pm(stats['mean'], stats['std'], 0)} ({stats['reached']})"


def _tuple(value):
    """A setting as the command gave it (a JSON result holds its tuples as lists)."""
    return tuple(value) if isinstance(value, list) else value


def _final_means(result: dict) -> str:
    """What a time-to-target table's final accuracy is. A task stopped at its target ends with the model tested
    after the aggregation that reached it; results written before the task records kept that test
    (``reached_accuracy``) hold the last grid evaluation, taken before that aggregation."""
    if not result["config"]["stop_at_target"]:
        return "at the end of the run"
    if all("reached_accuracy" in t for r in result["runs"] for t in r["tasks"]):
        return "a task stopped at its target ends with the model that reached it"
    return ("the last evaluation on the grid; a task that stopped at its target was last evaluated before the "
            "aggregation that reached it")


def _tag(result: dict) -> str:
    """A figure title's tag: the quick setting, and the fields in which the result differs from the setting it ran
    from (a probe's ``cap_first=False``)."""
    return title_tag(result, EXPERIMENTS[result["experiment"]][bool(result["quick"])], SELECTION)


def markdown(result: dict) -> str:
    cfg = result["config"]
    lines = heading(result)
    if result["quick"]:
        quick = EXPERIMENTS[result["experiment"]][1]
        lines += ["QUICK setting (CPU): " + ", ".join(f"{k} = {_tuple(cfg[k])}" for k in
                  ("clients", "caps", "requests", "total_requests", "buffers", "first_k", "target_offset",
                   "total_time", "models") if k in cfg) +
                  ". It keeps the protocol and shrinks the scale: not comparable with the paper's numbers.", ""]
        if difference := paper_difference(quick, cfg, SELECTION, "quick"):
            lines += [difference, ""]
    elif difference := paper_difference(EXPERIMENTS[result["experiment"]][0], cfg, SELECTION):
        lines += [difference, ""]
    lines += [f"Targets: Table 1's plus {cfg['target_offset']:+.2f}. Times in simulated time units "
              f"(a job of cost e lasts 27 x (Exp(e s) + e s / 2)); evaluated every {cfg['eval_every']}.", ""]
    if result["experiment"] in SWEEP_TABLES:
        return "\n".join(lines + SWEEP_TABLES[result["experiment"]](result))
    for row, entry in result["rows"].items():
        methods = [m for m in entry if m not in ("gain_vs_sync", "best_sync", "gain_vs_static")]
        names = list(entry[methods[0]]["per_task"])
        lines += [f"## {row}", ""]
        gains = {}                       # column title -> gain per method
        if any(split_method(m)[0] in SYNC for m in methods):
            best = entry["best_sync"]
            lines += [f"Best Sync-ST: {method_style(best)['label'] if best else 'none reached its targets'}.", ""]
            gains["gain vs best Sync-ST"] = entry["gain_vs_sync"]
        if entry.get("gain_vs_static"):
            gains["gain vs FedAST (static)"] = entry["gain_vs_static"]
        lines += ["| method | all targets | " + " | ".join(names + list(gains)) + " |",
                  "|---" * (len(names) + len(gains) + 2) + "|"]
        for m in methods:
            e = entry[m]
            cells = [_cell(e["time_to_all_targets"])] + [_cell(e["per_task"][n]) for n in names] + [
                "–" if g.get(m) is None else f"{100 * g[m]:.1f} %" for g in gains.values()]
            lines.append(f"| {method_style(m)['label']} | " + " | ".join(cells) + " |")
        lines += ["", f"Final test accuracy (%, mean over seeds; {_final_means(result)}): "
                  + "; ".join(f"{method_style(m)['label']}: " + ", ".join(
                      f"{n} {100 * entry[m]['final_accuracy'][n]:.1f}" for n in names) for m in methods), ""]
    if result["experiment"] == "fedast-fig7":
        lines += ["Paper (Fig. 7, reference only, paper scale): FedAST finishes all four tasks at about "
                  f"{PAPER_FIG7['fedast_all']}, a {100 * PAPER_FIG7['gain']:.1f} % gain over the tuned Sync-ST.", ""]
    if result["experiment"] == "fedast-d6":
        lines += ["Paper (App. D.6, reference only, the four tasks at paper scale): dynamic allocation finishes all "
                  f"tasks up to {100 * PAPER_D6_GAIN:.1f} % sooner than static, more so at higher targets.", ""]
    return "\n".join(lines)


def _mean_std(values) -> tuple[float, float, int]:
    """Mean and sample standard deviation (:func:`afl.stats.mean_std`; NaN where none or one) over seeds of the
    values that exist, and how many do (None: never reached; the mean leaves those out)."""
    kept = [v for v in values if v is not None]
    mean, std = mean_std(kept)
    return (np.nan if mean is None else mean), (np.nan if std is None else std), len(kept)


def _pm(stats: tuple, digits: int = 1) -> str:
    """``mean ± std`` of :func:`_mean_std` for a table ("–" where no seed has a value, the mean alone for one)."""
    mean, std, count = stats
    return "–" if count == 0 else pm(mean, std, digits)


def _mean_final(run: dict) -> float:
    """A run's final test accuracy (%) averaged over its tasks (Fig. 3's y axis)."""
    return 100 * float(np.mean([t["final_accuracy"] for t in run["tasks"]]))


def _accuracy_table(result: dict) -> list[str]:
    """Fig. 3 as a table: per dataset, the mean final accuracy over its tasks against the cap, per method, and
    what the buffer adds (FedAST static minus NoBuffer, in points)."""
    runs, clients = result["runs"], result["config"]["clients"]
    lines = ["Final test accuracy (%, mean over the task set's tasks; ± std over seeds) against the active-client "
             "ratio. Buffer's gain: FedAST (static) minus FedAST-NoBuffer, in points.", ""]
    for taskset in dict.fromkeys(r["taskset"] for r in runs):
        mine = [r for r in runs if r["taskset"] == taskset]
        methods = list(dict.fromkeys(r["method"] for r in mine))
        lines += [f"## {taskset}", "", "| cap / clients | " + " | ".join(method_style(m)["label"] for m in methods)
                  + " | buffer's gain |", "|---" * (len(methods) + 2) + "|"]
        for cap in sorted({r["cap"] for r in mine}):
            stats = {m: _mean_std([_mean_final(r) for r in mine if r["method"] == m and r["cap"] == cap])
                     for m in methods}
            gain = (f"{stats['fedast-static'][0] - stats['fedast-nobuffer'][0]:+.1f}"
                    if {"fedast-static", "fedast-nobuffer"} <= set(stats) else "–")
            lines.append(f"| {cap / clients:.3g} ({cap}) | " + " | ".join(_pm(stats[m]) for m in methods)
                         + f" | {gain} |")
        lines.append("")
    return lines


def _buffer_table(result: dict) -> list[str]:
    """Figs. 8-9 as a table: per buffer size, each task's final accuracy and time to its target."""
    runs = result["runs"]
    names = [t["name"] for t in runs[0]["tasks"]]
    lines = ["FedAST (static), each task's final test accuracy (%) and simulated time to its target "
             "(± std over seeds; (k/n): seeds that reached it).", "",
             "| buffer b | R / b | " + " | ".join(f"{n} final | {n} time to target" for n in names) + " |",
             "|---" * (2 + 2 * len(names)) + "|"]
    for b in sorted({r["buffer"] for r in runs}):
        mine = [r for r in runs if r["buffer"] == b]
        cells = []
        for j in range(len(names)):
            reached = _mean_std([r["tasks"][j]["reached"] for r in mine])
            cells += [_pm(_mean_std([100 * r["tasks"][j]["final_accuracy"] for r in mine])),
                      f"{_pm(reached, 0)} ({reached[2]}/{len(mine)})"]
        lines.append(f"| {b} | {result['config']['requests'] / b:.3g} | " + " | ".join(cells) + " |")
    return lines + [""]


#: The experiments whose markdown is the paper's sweep as one table (their tasks run to the end: no time gain)
SWEEP_TABLES = {"fedast-fig3": _accuracy_table, "fedast-fig8": _buffer_table, "fedast-fig9": _buffer_table}


def report(result: dict, per_run: bool = True) -> str:
    text = markdown(result)
    if per_run:
        text += "\n| task set | method | cap | buffer | seed | all targets | wall s |\n|---|---|---|---|---|---|---|\n"
        text += "\n".join(f"| {r['taskset']} | {r['method']} | {r['cap']} | {r['buffer'] or 'own'} | {r['seed']} | "
                          f"{r['time_to_all_targets'] if r['time_to_all_targets'] is not None else '–'} | "
                          f"{sum(t['wall_seconds'] for t in r['tasks']) / len(r['tasks']):.0f} |"
                          for r in result["runs"])
    return text


def figure(result: dict):
    """The experiment's picture: the paper's sweep for Figs. 3, 5, 8 and 9 (:func:`sweep_figure`,
    :func:`buffer_figure`), the training curves otherwise (:func:`curves_figure`)."""
    experiment = result["experiment"]
    if experiment in ("fedast-fig3", "fedast-fig5"):
        return sweep_figure(result)
    if experiment in ("fedast-fig8", "fedast-fig9"):
        return buffer_figure(result)
    return curves_figure(result)


def sweep_figure(result: dict):
    """Fig. 3 (mean final accuracy of the tasks against the active-client ratio cap / N) or Fig. 5 (time until
    every task reached its target against the number of identical tasks): a panel per dataset, a line per
    method, error bars ± one standard deviation over seeds; Fig. 5 draws times from 0 and marks FedAST's gain
    over Sync-ST."""
    from matplotlib.figure import Figure
    runs, fig3 = result["runs"], result["experiment"] == "fedast-fig3"
    clients = result["config"]["clients"]
    if fig3:
        x_of, xlabel = (lambda r: r["cap"] / clients), f"active-client ratio (cap / {clients} clients)"
        y_of, ylabel = _mean_final, "final test accuracy (%, mean over tasks)"
    else:
        x_of, xlabel = (lambda r: len(parse_taskset(r["taskset"]))), "identical tasks trained at once"
        y_of, ylabel = (lambda r: r["time_to_all_targets"]), "time until all reach the target (sim. time)"
    datasets = list(dict.fromkeys(parse_taskset(r["taskset"])[0] for r in runs))
    fig = Figure(figsize=(max(7, 5 * len(datasets)), 4))
    for ax, dataset in zip(fig.subplots(1, len(datasets), squeeze=False)[0], datasets):
        mine = [r for r in runs if parse_taskset(r["taskset"])[0] == dataset]
        lines = {}
        for method in dict.fromkeys(r["method"] for r in mine):
            xs = sorted({x_of(r) for r in mine if r["method"] == method})
            stats = [_mean_std([y_of(r) for r in mine if r["method"] == method and x_of(r) == x]) for x in xs]
            lines[method] = dict(zip(xs, stats))
            st = method_style(method)
            ax.errorbar(xs, [m for m, _, _ in stats], yerr=[sd for _, sd, _ in stats], color=st["color"],
                        linestyle=st["linestyle"], marker="o", capsize=3, label=st["label"])
        if not fig3 and "fedast-static" in lines and "sync-st" in lines:
            for x, (fedast, _, _) in lines["fedast-static"].items():
                sync = lines["sync-st"].get(x, (np.nan,))[0]
                if np.isfinite(fedast) and np.isfinite(sync):
                    ax.annotate(f"{100 * (sync - fedast) / sync:+.1f} %", (x, fedast), xytext=(7, -3),
                                textcoords="offset points", ha="left", fontsize=8, color=method_style(
                                    "fedast-static")["color"], bbox=dict(facecolor="white", edgecolor="none",
                                                                         alpha=0.8, pad=0.5))   # over the line
        if fig3:
            ax.set_xscale("log")
        else:  # times from 0 (and room above), so that a gain of a few per cent does not look like a gulf
            tops = [m + (sd if np.isfinite(sd) else 0) for stats in lines.values() for m, sd, _ in stats.values()]
            ax.set_ylim(0, 1.12 * max([t for t in tops if np.isfinite(t)], default=1.0))
        ticks = sorted({x_of(r) for r in mine})
        ax.set_xticks(ticks, [f"{x:.3g}" for x in ticks])
        ax.minorticks_off()
        ax.set(title=f"{dataset}: {len(parse_taskset(mine[0]['taskset']))} identical tasks" if fig3 else dataset,
               xlabel=xlabel, ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    what = ("The buffer against staleness as more clients train at once" if fig3 else
            "FedAST's gain over Sync-ST (percentages) as tasks are added")
    fig.suptitle(f"{result['experiment']}{_tag(result)}\n{what}\n"    # three lines: a probe's tag is long
                 f"{result['config']['seeds']} seed(s), error bars ± one std over seeds", fontsize=10)
    fig.tight_layout()
    return fig


def buffer_figure(result: dict):
    """Figs. 8-9: each task's final accuracy and time to its target against the buffer size b (the requests R
    fixed), error bars ± one standard deviation over seeds; a time is drawn where some seed reached the target
    (over those seeds, their number marked when not all did)."""
    from matplotlib.figure import Figure
    runs = result["runs"]
    names = [t["name"] for t in runs[0]["tasks"]]
    buffers = sorted({r["buffer"] for r in runs})
    fig = Figure(figsize=(10, 3.8))
    acc, reach = fig.subplots(1, 2)
    for j, name in enumerate(names):
        color = f"C{j}"
        final = [_mean_std([100 * r["tasks"][j]["final_accuracy"] for r in runs if r["buffer"] == b])
                 for b in buffers]
        reached = [_mean_std([r["tasks"][j]["reached"] for r in runs if r["buffer"] == b]) for b in buffers]
        acc.errorbar(buffers, [m for m, _, _ in final], yerr=[sd for _, sd, _ in final], color=color, marker="o",
                     capsize=3, label=name)
        acc.axhline(100 * runs[0]["tasks"][j]["target"], color=color, lw=0.8, linestyle="--",
                    label=f"{name} target")
        reach.errorbar(buffers, [m for m, _, _ in reached], yerr=[sd for _, sd, _ in reached], color=color,
                       marker="o", capsize=3, label=name)
        seeds = result["config"]["seeds"]
        for b, (mean, _, count) in zip(buffers, reached):
            if 0 < count < seeds:
                reach.annotate(f"{count}/{seeds} seeds", (b, mean), xytext=(5, -10), textcoords="offset points",
                               fontsize=7, color=color)
    if not any(t["reached"] is not None for r in runs for t in r["tasks"]):
        reach.text(0.5, 0.5, "no task reached its target in any run", transform=reach.transAxes, ha="center")
    acc.set(xlabel="buffer size b", ylabel="final test accuracy (%)", title="final accuracy")
    reach.set(xlabel="buffer size b", ylabel="time to target (simulated time units)",
             title="time to target (missing: never reached)")
    for ax in (acc, reach):
        ax.set_xscale("log")
        ax.set_xticks(buffers, [str(b) for b in buffers])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{result['experiment']}{_tag(result)}: FedAST (static), "
                 f"R = {result['config']['requests']} requests per task; {result['config']['seeds']} seed(s), "
                 "error bars ± one std over seeds", fontsize=10)
    fig.tight_layout()
    return fig


def curves_figure(result: dict):
    """Per row: each task's accuracy against simulated time (a panel per task, methods in their colours, the
    target dashed, where it was reached marked), and FedAST's allocation of requests over time."""
    from matplotlib.figure import Figure
    runs = result["runs"]
    rows = list(dict.fromkeys((r["taskset"], r["cap"], r["buffer"]) for r in runs))
    ntask = max(len(parse_taskset(t)) for t, _, _ in rows)
    fig = Figure(figsize=(4 * (ntask + 1), 3.4 * len(rows)))
    axes = fig.subplots(len(rows), ntask + 1, squeeze=False)
    for i, (taskset, cap, buffer) in enumerate(rows):
        mine = [r for r in runs if (r["taskset"], r["cap"], r["buffer"]) == (taskset, cap, buffer)]
        for j, name in enumerate(t["name"] for t in mine[0]["tasks"]):
            ax = axes[i][j]
            for method in dict.fromkeys(r["method"] for r in mine):
                rs = [r for r in mine if r["method"] == method]
                st = method_style(method)
                for k, r in enumerate(rs):
                    t = r["tasks"][j]
                    ax.plot(t["time"], t["accuracy"], color=st["color"], linestyle=st["linestyle"], lw=1.2,
                            alpha=1 if k == 0 else 0.5, label=st["label"] if k == 0 else None)
                    if t["reached"] is not None:
                        ax.axvline(t["reached"], color=st["color"], linestyle=st["linestyle"], lw=0.6)
            ax.axhline(mine[0]["tasks"][j]["target"], color="black", lw=0.8, linestyle="--", label="target")
            ax.set(title=f"{name} (cap {cap}, buffer {buffer or 'own'})", xlabel="simulated time (time units)",
                   ylabel="test accuracy")
            ax.grid(alpha=0.3)
            if j == 0:
                ax.legend(fontsize=7)
        ax = axes[i][ntask]
        alloc = next((r for r in mine if r["method"] == "fedast" and r["allocations"]), None)
        if alloc is not None:
            times = [a[0] for a in alloc["allocations"]] + [max(alloc["time_to_all_targets"] or result["config"][
                "total_time"], alloc["allocations"][-1][0])]
            values = np.array([a[1] for a in alloc["allocations"]] + [alloc["allocations"][-1][1]]).T
            ax.stackplot(times, values, step="post", labels=[t["name"] for t in alloc["tasks"]], alpha=0.8)
            ax.set(title="FedAST's requests R_m over time (seed 0)", xlabel="simulated time (time units)",
                   ylabel="active requests")
            ax.legend(fontsize=7)
        else:
            ax.set_axis_off()
        for j in range(len(mine[0]["tasks"]), ntask):
            axes[i][j].set_axis_off()
    fig.suptitle(f"{result['experiment']}{_tag(result)}: "
                 f"{result['config']['clients']} clients, {result['config']['seeds']} seed(s); vertical lines: "
                 f"target reached (faint lines: other seeds)")
    fig.tight_layout()
    return fig


def write_result(result: dict, out, write_json: bool = True) -> list[Path]:
    """Write ``OUT/<experiment>.json`` (unless ``write_json`` is False), its markdown report and its figure, the
    summary rows computed from the runs (:func:`summarize`)."""
    return write_files(result | {"rows": summarize(result["runs"])}, out, report, figure, write_json)


def run_experiment(experiment: str, *, quick: bool = False, seeds: int | None = None, out="results", root=None,
                   device="cpu", progress: bool = True, fresh: bool = False, reuse=(), fleet: bool = True,
                   fleet_size: int | None = None, ray: str | None = None, processes: int | None = None,
                   allow_large: bool = False, **overrides) -> list[Path]:
    """Compute a FedAST experiment and write ``OUT/<experiment>.json``, ``.md`` and ``.png``."""
    cfg = setting(experiment, quick=quick, **overrides)
    dev = resolve_device(device)
    g = grid(cfg, seeds=seeds, device=dev, root=root, fleet=fleet, fleet_size=fleet_size, name=experiment)
    done = execute(g, out=out, quick=quick, seeds=seeds, fresh=fresh, reuse=reuse, progress=progress, fleet=fleet,
                   fleet_size=fleet_size, ray=ray, processes=processes, device=dev, overrides=overrides,
                   allow_large=allow_large)
    rows = summarize(done.runs)
    return done.publish({"rows": rows, "paper": PAPER_FIG7 if experiment == "fedast-fig7" else None}, out,
                        write_result)


__all__ = ["TASKS", "METHODS", "FedastSetting", "EXPERIMENTS", "setting", "compute_run", "same_run",
           "summarize", "grid", "run_experiment", "write_result", "report", "figure", "sweep_figure", "buffer_figure",
           "curves_figure"]
