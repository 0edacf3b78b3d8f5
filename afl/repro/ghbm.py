"""GHBM (Zaccone et al., ``shared/papers/002_*``): the quadratic of App. C.9, Table 2 / Table 8 rows for every
method, the tau sweep (Fig. 2) and the heterogeneity sweep (Fig. 3), and Table 4's cost to reach FedAvg.

Protocol (Sec. 5, App. C and the authors' code, RickZack/GHBM): 100 clients, C = 0.1 of them per round drawn
uniformly without replacement; one local epoch of J = 8 steps at batch 64 on CIFAR (Shakespeare: 20 steps at
batch 100); no client momentum, no learning-rate schedule, no clipping; the server weighs clients by their data
size. Splits: NON-IID is alpha = 0 -- every client holds 500 images of one class -- and IID is Dirichlet(10,000)
rebalanced to 500 each (Shakespeare: one client per role, at most 2,000 windows each, against the same amounts
drawn from all roles). The metric is the mean test accuracy over the last 100 rounds, over 5 seeds.

Hyperparameters are Table 7's (alpha = 0). The OCR of Table 7 lost some bold marks; what we assumed is in
:data:`HYPER` (GHBM's eta_l: that of FedHBM, 0.01 on CIFAR, since GHBM with tau = 1 and eta_l equals FedCM with
alpha = 1 - beta and eta_l / alpha, FedCM's tuned 0.1; SCAFFOLD-M: FedCM's momentum form and rates; AdaBest's
server beta = 0.9; on Shakespeare the GHBM family takes FedAvg's eta = eta_l = 1, as FedHBM takes FedAvg's rates on
CIFAR: every Shakespeare method with a bold eta_l has 1, and at 0.1 FedAvg itself stays at the most frequent
character for 30 rounds, ``tools/ghbm_step_probe.py``). Every result records the settings of each of its runs.
Variants that are not rows of the paper's tables (e.g. ``--set methods=fedcm,fedcm-code``): ``fedcm-code`` is
FedCM as the authors' code runs it, with FedCM's rates (:mod:`afl.algorithms.fedcm`); ``scaffold-code`` is
SCAFFOLD with the code's server control update (the clients' control changes summed, without the 1/N:
:mod:`afl.algorithms.scaffold`); ``adabest-code`` is AdaBest with the code's k_i, the round number instead of the
rounds since the client's last participation (:mod:`afl.algorithms.feddyn`), ``adabest-beta-0`` AdaBest without
its server extrapolation (the paper states no beta), ``fedavgm-server-lr-1`` FedAvgM at server step 1 instead of
Table 7's 0.1; ``mimemom-dampened`` and
``mimelitemom-dampened`` take Karimireddy et al.'s dampened momentum form instead of the PyTorch form of the
authors' code, in which Table 7's rates were tuned, at the same rates (:mod:`afl.algorithms.mime`: their clients
move 1 - beta = a tenth as far).

Scales. The paper's CIFAR runs are 20,000 rounds (1.6 M client steps per run): a GPU's work. Offline only the
lossy ``cifar10-jpeg`` copy of CIFAR-10 exists (CIFAR-100 does not), so the paper setting runs Table 8's CIFAR-10
CNN column on it. The CPU setting (``--quick``) is Fashion-MNIST with a 784-200-200-10 MLP, the same protocol,
fewer rounds: it shows the ordering, not the paper's numbers (and, as the paper's C.10 warns, short budgets can
mislead: the figures show whole curves).
"""
from __future__ import annotations

import json
import math
import os
from collections import deque
from dataclasses import dataclass, fields, replace
from functools import partial as partial_fn
from pathlib import Path

import numpy as np
import torch

from ..algorithms import make_federation, run_algorithm
from ..algorithms.fedavg import FedAvg
from ..algorithms.registry import get
from ..algorithms.rounds import WEIGHTINGS
from ..budget import MAX_BATCH, Work, check_work, evaluations, fields_of
from ..checkpoint import checkpointing
from ..data import Dataset, load_dataset, partition as make_partition
from ..engine import PRECISIONS
from ..errors import ParameterError, check, check_choice, check_int, check_real
from ..fleet import Outcome
from ..models import MODEL_NAMES
from ..papers import ghbm as paper
from ..plots import style
from ..runtime import resolve_device
from ..stats import error_bars, mean_std, pm, series_mean_std
from ..theory.ghbm import unseen_fraction_moment
from ..results import output_dir
from .runner import (MAX_SEEDS, Grid, afl_commit, base_setting, execute, heading, machine, paper_difference,
                     run_sources, run_tasks, same_settings, saved_config, set_flags, settings_record, source_tags,
                     stop_if_estimating, title_tag, with_overrides, write_files)

#: Table 2's rows (GHBM itself is in the tau sweep and Table 3; ``fedcm-full``: FedCM with every client)
TABLE_METHODS = ("fedavg", "fedprox", "scaffold", "feddyn", "adabest", "mime", "fedavgm", "scaffold-m", "fedcm",
                 "fedadc", "mimemom", "mimelitemom", "fedcm-full", "ghbm", "localghbm", "fedhbm")
#: variants that are not rows of the paper: name -> (the method whose Table 7 settings they take, what they change)
VARIANTS = {"fedcm-code": ("fedcm", {"momentum": "code"}),
            "scaffold-code": ("scaffold", {"controls": "code"}),
            "adabest-code": ("adabest", {"elapsed": "code"}),
            "adabest-beta-0": ("adabest", {"beta": 0.0}),
            "fedcm-server-lr-1": ("fedcm", {"server_lr": 1.0}),
            "fedavgm-server-lr-1": ("fedavgm", {"server_lr": 1.0}),
            "mimemom-dampened": ("mimemom", {"momentum": "dampened"}),
            "mimelitemom-dampened": ("mimelitemom", {"momentum": "dampened"}),
            "localghbm-code-scale": ("localghbm", {"momentum_scale": "C"}),
            "fedhbm-code-scale": ("fedhbm", {"momentum_scale": "C"})}
#: method -> registered algorithm, where the name differs
ALGORITHM = {"fedcm-full": "fedcm"} | {name: base for name, (base, _) in VARIANTS.items()}
#: the setting fields that only choose which runs a grid makes
SELECTION = ("seeds", "methods", "splits", "taus")

#: Table 7 (alpha = 0): weight decay, batch, and per method eta (server_lr), eta_l (lr) and its own settings.
HYPER = {
    "cnn": dict(weight_decay=1e-3, methods={
        "fedavg": dict(server_lr=1.0, lr=0.01), "fedprox": dict(server_lr=1.0, lr=0.01, mu=0.1),
        "scaffold": dict(server_lr=1.0, lr=0.01), "feddyn": dict(server_lr=1.0, lr=0.01, alpha=0.001),
        "adabest": dict(server_lr=1.0, lr=0.01, mu=0.001, beta=0.9), "mime": dict(server_lr=1.0, lr=0.01),
        "fedavgm": dict(server_lr=0.1, lr=0.01, beta=0.9), "scaffold-m": dict(server_lr=0.1, lr=0.1, beta=0.1),
        "fedcm": dict(server_lr=0.1, lr=0.1, alpha=0.1), "fedadc": dict(server_lr=1.0, lr=0.01, beta=0.9),
        "mimemom": dict(server_lr=0.1, lr=0.01, beta=0.9), "mimelitemom": dict(server_lr=0.1, lr=0.01, beta=0.9),
        "fedcm-full": dict(server_lr=0.1, lr=0.1, alpha=0.1), "ghbm": dict(server_lr=1.0, lr=0.01, beta=0.9),
        "localghbm": dict(server_lr=1.0, lr=0.01, beta=0.9), "fedhbm": dict(server_lr=1.0, lr=0.01, beta=1.0)}),
    "shakespeare": dict(weight_decay=0.0, methods={
        "fedavg": dict(server_lr=1.0, lr=1.0), "fedprox": dict(server_lr=1.0, lr=1.0, mu=1e-4),
        "scaffold": dict(server_lr=1.0, lr=1.0), "feddyn": dict(server_lr=1.0, lr=1.0, alpha=0.009),
        "adabest": dict(server_lr=1.0, lr=1.0, mu=0.009, beta=0.9), "mime": dict(server_lr=1.0, lr=1.0),
        "fedavgm": dict(server_lr=0.1, lr=1.0, beta=0.9), "scaffold-m": dict(server_lr=1.0, lr=1.0, beta=0.1),
        "fedcm": dict(server_lr=0.1, lr=1.0, alpha=0.1), "fedadc": dict(server_lr=1.0, lr=0.1, beta=0.9),
        "mimemom": dict(server_lr=0.1, lr=1.0, beta=0.9), "mimelitemom": dict(server_lr=0.1, lr=1.0, beta=0.9),
        "fedcm-full": dict(server_lr=0.1, lr=1.0, alpha=0.1), "ghbm": dict(server_lr=1.0, lr=1.0, beta=0.9),
        "localghbm": dict(server_lr=1.0, lr=1.0, beta=0.9), "fedhbm": dict(server_lr=1.0, lr=1.0, beta=1.0)}),
}

#: Where a rate of :data:`HYPER` or a variant is not Table 7's own bold value: per column, method -> its source.
#: Every other rate is Table 7's (alpha = 0).
_GHBM_FAMILY = ("ours: Table 7 marks no value for the GHBM family on Shakespeare; FedAvg's eta = eta_l = 1, as every "
                "Shakespeare method with a bold eta_l has 1 (at 0.1 FedAvg stays at the most frequent character for "
                "30 rounds: tools/ghbm_step_probe.py)")
RATE_SOURCES = {
    "cnn": {"ghbm": "ours: eta_l = 0.01, FedHBM's (Table 7 lost GHBM's bold mark; GHBM with tau = 1 is FedCM with "
                    "alpha = 1 - beta and eta_l / alpha, FedCM's tuned 0.1)",
            "scaffold-m": "ours: no Table 7 row; FedCM's rates (eta = 0.1, eta_l = 0.1) and momentum form",
            "fedadc": "ours: no Table 7 row; FedAvg's eta = 1, eta_l = 0.01 and beta = 0.9 (not tuned)",
            "adabest": "Table 7's alpha as mu; server beta = 0.9 ours (the paper states none)"},
    "shakespeare": {"ghbm": _GHBM_FAMILY, "localghbm": _GHBM_FAMILY, "fedhbm": _GHBM_FAMILY,
                    "scaffold-m": "ours: no Table 7 row; afl runs it at eta = 1 (earlier at FedCM's eta = 0.1, "
                                  "which with the same momentum normalisation left it at 25.8 % against 42.6 % at "
                                  "eta = 1: results/ghbm/shakespeare/history/250-rounds-server-lr-1)",
                    "fedcm-server-lr-1": "ours: eta = 1 beside Table 7's 0.1; the paper's FedCM Shakespeare row "
                                         "equals FedADC's numbers exactly, which suggests it ran at an effective "
                                         "eta = 1 (at 0.1 FedCM, a convex mix of displacements with no 1/(1 - beta) "
                                         "gain, reaches 26.2 %)",
                    "fedadc": "ours: no Table 7 row; eta = 1, eta_l = 0.1 and beta = 0.9 (not tuned)",
                    "adabest": "Table 7's alpha as mu; server beta = 0.9 ours (the paper states none)",
                    "fedavgm-server-lr-1": "ours: eta = 1 beside Table 7's 0.1, a probe of FedAvgM's gap (at 0.1 "
                                           "it trails FedAvg at every round)",
                    "adabest-beta-0": "ours: server beta = 0 (no extrapolation) beside afl's 0.9, a probe: the "
                                      "paper states no beta, and its AdaBest rows equal FedAvg's"},
}

#: Table 2's rows (and Table 8's, where MIME is "Mime") by afl's method names
PAPER_ROWS = dict(zip(("fedavg", "fedprox", "scaffold", "feddyn", "adabest", "mime", "fedavgm", "scaffold-m", "fedcm",
                       "fedadc", "mimemom", "mimelitemom", "fedcm-full", "localghbm", "fedhbm"), paper.ROWS))


def _paper_column(table, non_iid: str, iid: str) -> dict:
    rows = {m: ("Mime" if m == "mime" and table is paper.TABLE8 else r) for m, r in PAPER_ROWS.items()}
    return {m: (table[r, non_iid].value, table[r, iid].value) for m, r in rows.items() if (r, non_iid) in table.cells}


#: Paper numbers (references only), read from their transcription (:mod:`afl.papers.ghbm`): Table 8 (CIFAR-10, CNN)
#: and Table 2 (Shakespeare), (non-iid, iid) means.
PAPER = {"cifar10": _paper_column(paper.TABLE8, "CIFAR-10 (CNN) non-IID", "CIFAR-10 (CNN) IID"),
         "shakespeare": _paper_column(paper.TABLE2, "Shakespeare non-IID", "Shakespeare IID")}

#: methods a curve panel's own legend holds; more share one legend under the figure
LEGEND_COLUMNS = 7

#: per dataset: model, Table 7 column, local steps J and batch, rounds, test subset (None: all)
DATASETS = {
    "cifar10-jpeg": dict(model="cnn-cifar", hyper="cnn", local_steps=8, batch=64, rounds=20000, test_samples=None),
    "fashion-mnist": dict(model="mlp200", hyper="cnn", local_steps=8, batch=64, rounds=1000, test_samples=None),
    "mnist": dict(model="mlp200", hyper="cnn", local_steps=8, batch=64, rounds=1000, test_samples=None),
    "shakespeare": dict(model="char-lstm", hyper="shakespeare", local_steps=20, batch=100, rounds=250,
                        test_samples=20000),
}


#: Shakespeare windows per client in the paper's federation (App. C.1, Table 6: 100 clients of 2,000 each)
SHAKESPEARE_WINDOWS = 2000
#: training samples of the image datasets (a client holds ``n / clients`` at most, :func:`client_parts`): what a
#: full pass over a client's data costs in an estimate (:meth:`GhbmSetting.work`), without loading the data
TRAIN_SAMPLES = {"cifar10-jpeg": 50_000, "fashion-mnist": 60_000, "mnist": 60_000}
#: Shakespeare federations (:class:`GhbmSetting` ``federation``)
FEDERATIONS = ("paper", "any-roles")
#: the paper federation in detail (:class:`GhbmSetting`; issue 52): its roles are one draw for every seed, as the
#: authors' pre-sampled files (FedDyn's preprocessing), or a new draw per seed (afl's earlier); a role's 2,000 windows
#: a random contiguous run (FedDyn's) or its first; the IID split's windows drawn from every role (App. C.1:
#: "randomly distributing sentences from all roles") or from the chosen roles; the test set 400 windows of each
#: chosen role (FedDyn's, the authors' ``test_sampled``) or ``test_samples`` windows of every role
ROLES, CROPS, IID_POOLS, TEST_SETS = ("fixed", "per-seed"), ("offset", "first"), ("all-roles", "chosen-roles"), (
    "chosen-roles", "all-roles")
#: test windows of each chosen role (FedDyn's Shakespeare test set)
TEST_PER_ROLE = 400
#: the seed of the one draw of a ``roles="fixed"`` federation
FEDERATION_SEED = 0


@dataclass(frozen=True)
class GhbmSetting:
    """One GHBM experiment's settings (defaults: the paper's CIFAR protocol on the offline CIFAR-10 copy).

    ``splits``: ``"noniid"`` (alpha = 0 / one role per client), ``"iid"`` (alpha = ``iid_alpha`` / all roles mixed)
    or ``"alpha=<a>"``; ``taus``: GHBM's tau values (one row each; empty: tau = 1/C); ``last``: the
    rounds over which the final accuracy is averaged (evaluations every ``eval_every`` rounds within them);
    ``test_samples``: a fixed seeded subset of the test set (None: all of it). ``sampling``: ``"uniform"`` or
    ``"cyclic"`` (Assumption 4.3). ``probe_taus`` (Fig. 1): FedAvg's runs also measure, every ``eval_every``
    rounds, how far the mean of the last tau pseudo-gradients lies from all clients' (:class:`DeviationProbe`).
    ``retune``: Table 7's values changed for a probe (``"fedcm.server_lr=1"``: FedCM with server step 1); a result
    made so says it in its setting. ``weighting``: the server averages its clients' updates by data size (the
    paper's text) or ``"uniform"`` (the authors' code for the MIME family, ``aggregation_policy: uniform``).
    ``federation`` (Shakespeare): ``"paper"`` -- LEAF's split as App. C.1 and Table 6 give it, ``clients`` roles
    among those holding at least :data:`SHAKESPEARE_WINDOWS` windows, each cropped to that many (one epoch: J = 20
    steps of B = 100), and for IID as many windows spread over the clients -- or ``"any-roles"``, afl's earlier
    split (any roles, cut at 2,000 windows: most hold fewer; kept to read older results). The paper federation in
    detail (:data:`ROLES`, :data:`CROPS`, :data:`IID_POOLS`, :data:`TEST_SETS`): ``roles``, ``crop``, ``iid_pool``
    and ``test_set`` (``test_samples`` applies to ``test_set="all-roles"``). Changing ``dataset`` brings its row of
    :data:`DATASETS` unless set too.
    """

    @staticmethod
    def BEFORE(config: dict) -> dict:    # noqa: N802 -- what results saved before a field existed ran with
        """Shakespeare results saved before ``federation`` existed ran on the earlier split, and before the
        federation's details were fields, on roles drawn per seed, each cropped to its first windows, IID windows
        from the chosen roles and a test set from every role (:func:`afl.repro.runner.saved_config`); the fields
        mean nothing elsewhere."""
        if config.get("dataset") != "shakespeare":
            return {}
        return {"federation": "any-roles", "roles": "per-seed", "crop": "first", "iid_pool": "chosen-roles",
                "test_set": "all-roles"}

    dataset: str = "cifar10-jpeg"
    model: str = "cnn-cifar"
    hyper: str = "cnn"
    clients: int = 100
    participation: float = 0.1
    sampling: str = "uniform"
    splits: tuple = ("noniid", "iid")
    iid_alpha: float = 10000.0
    rounds: int = 20000
    local_steps: int = 8
    batch: int = 64
    eval_every: int = 100
    last: int = 100
    test_samples: int | None = None
    seeds: int = 5
    methods: tuple = TABLE_METHODS
    taus: tuple = ()
    probe_taus: tuple = ()
    precision: str = "fp32"          # the engine's (afl.engine.PRECISIONS); "bf16" is opt-in mixed precision
    retune: tuple = ()               # Table 7's values changed, "method.name=value" each, e.g. "fedcm.server_lr=1"
    weighting: str = "size"          # the server's average over its clients (afl.algorithms.rounds.WEIGHTINGS)
    federation: str = "paper"        # Shakespeare's clients: FEDERATIONS
    roles: str = "fixed"             # Shakespeare, paper federation: ROLES, CROPS, IID_POOLS, TEST_SETS
    crop: str = "offset"
    iid_pool: str = "all-roles"
    test_set: str = "chosen-roles"

    def __post_init__(self):
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_choice("federation", self.federation, FEDERATIONS)
        for name, allowed in (("roles", ROLES), ("crop", CROPS), ("iid_pool", IID_POOLS), ("test_set", TEST_SETS)):
            check_choice(name, getattr(self, name), allowed)
        check_choice("dataset", self.dataset, DATASETS)
        check_choice("hyper", self.hyper, HYPER)
        check_choice("model", self.model, MODEL_NAMES)
        check_int("clients", self.clients, 1)
        check_real("participation", self.participation, 0, 1, strict_low=True)
        check(round(self.participation * self.clients) >= 1, "participation", self.participation,
              f"at least one of the {self.clients} clients per round")
        check_choice("sampling", self.sampling, ("uniform", "cyclic"))
        for split in self.splits:
            split_alpha(split)
        check_real("iid_alpha", self.iid_alpha, 0, strict_low=True, hint="the Dirichlet concentration of 'iid'")
        check_int("rounds", self.rounds, 1)
        check_int("eval_every", self.eval_every, 1, self.rounds, hint="rounds, at most rounds")
        check_int("last", self.last, 0, self.rounds, hint="rounds, at most rounds")
        check_int("local_steps", self.local_steps, 1)
        check_int("batch", self.batch, 1, MAX_BATCH)
        check_int("seeds", self.seeds, 1, MAX_SEEDS)
        if self.test_samples is not None:
            check_int("test_samples", self.test_samples, 1)
        for m in self.methods:
            check_choice("methods", m, method_settings(self.hyper))
        for t in self.taus:
            check_int("taus", t, 1)
        for t in self.probe_taus:
            check_int("probe_taus", t, 1)
        if self.probe_taus:
            check(tuple(self.methods) == ("fedavg",), "methods", self.methods, "('fedavg',) when probe_taus is set "
                  "(Fig. 1 measures FedAvg's pseudo-gradients)")
            first = -(-max(self.probe_taus) // self.eval_every) * self.eval_every   # once the window holds max tau
            check(self.rounds >= first, "rounds", self.rounds, f"at least {first} with probe_taus up to "
                  f"{max(self.probe_taus)} and eval_every = {self.eval_every} (the first measurement's round)")
        self.retuned()

    def retuned(self) -> dict[str, dict[str, float]]:
        """``retune`` as method -> {name: value}, each checked against the method's Table 7 entries."""
        out: dict[str, dict[str, float]] = {}
        table = method_settings(self.hyper)
        for item in self.retune:
            target, sep, value = str(item).partition("=")
            method, dot, name = target.partition(".")
            check(bool(sep and dot), "retune", item, "'method.name=value' entries, e.g. 'fedcm.server_lr=1'")
            check_choice("retune", method, table)
            check_choice("retune", name, table[method])
            try:
                out.setdefault(method, {})[name] = float(value)
            except ValueError:
                raise ParameterError("retune", item, f"a number after '{target}='") from None
        return out

    def work(self) -> Work:
        """At most the work of one run: ``rounds`` of ``per_round`` clients (every client where FedCM-full is among
        the methods) taking ``local_steps`` steps, an evaluation every ``eval_every`` rounds; its gradients those
        of the costliest method (MIME's: :meth:`afl.algorithms.base.Learner.gradients_per_job`)."""
        clients = {m: self.clients if m == "fedcm-full" else self.per_round for m in self.methods}
        batches = math.ceil(self.client_samples() / self.batch)
        gradients = max(self.rounds * clients[m] * get(self.run_kwargs(m)[0]).learner.gradients_per_job(
            self.local_steps, batches) for m in self.methods)
        return Work(self.rounds * max(clients.values()) * self.local_steps, evaluations(self.rounds, self.eval_every),
                    fields_of(self, "rounds", "clients", "participation", "local_steps"),
                    fields_of(self, "eval_every", "rounds"), gradients=gradients)

    def client_samples(self) -> int:
        """A client's training samples at most: :data:`SHAKESPEARE_WINDOWS`, else ``n / clients``
        (:func:`client_parts`)."""
        return SHAKESPEARE_WINDOWS if self.dataset == "shakespeare" else TRAIN_SAMPLES[self.dataset] // self.clients

    @property
    def per_round(self) -> int:
        return round(self.participation * self.clients)

    def run_kwargs(self, method: str, tau: int | None = None) -> tuple[str, dict]:
        """``method``'s algorithm and settings in this experiment (Table 7's values for its dataset)."""
        table = method_settings(self.hyper)
        check_choice("method", method, table)
        kw = dict(K=self.local_steps, s=self.per_round, timing="rounds", sampling=self.sampling,
                  weighting=self.weighting, weight_decay=HYPER[self.hyper]["weight_decay"]) | table[method]
        kw.update(self.retuned().get(method, {}))
        if method == "fedcm-full":
            kw.update(s=self.clients, sampling="uniform")
        if method in ("ghbm", "ghbm-server"):
            kw["tau"] = int(tau if tau is not None else round(1 / self.participation))
        return ALGORITHM.get(method, method), kw


def method_settings(hyper: str) -> dict[str, dict]:
    """Every method's settings in Table 7's column ``hyper``, the :data:`VARIANTS` included."""
    table = HYPER[hyper]["methods"]
    return table | {name: table[base] | change for name, (base, change) in VARIANTS.items()}


def split_alpha(split: str) -> float:
    """The Dirichlet concentration of a split name (``noniid`` 0, ``iid`` inf, ``alpha=<a>`` a)."""
    if split == "noniid":
        return 0.0
    if split == "iid":
        return float("inf")
    if split.startswith("alpha="):
        try:
            return check_real("splits", float(split[6:]), 0)
        except ValueError:
            pass
    raise ParameterError("splits", split, "'noniid', 'iid' or 'alpha=<a>' with a >= 0")


#: experiments with a GhbmSetting -> (paper setting, quick setting). Quick: Fashion-MNIST and an MLP on 2 CPU cores,
#: 150 rounds, one seed (a few minutes); the committed CPU results raise ``rounds`` with ``--set``.
_QUICK = dict(dataset="fashion-mnist", model="mlp200", rounds=150, eval_every=10, last=30, seeds=1)
PROBE_TAUS = (1, 2, 5, 10, 20, 40)
QUICK_METHODS = ("fedavg", "scaffold", "mimemom", "fedcm", "fedcm-full", "ghbm", "localghbm", "fedhbm")
SETTINGS = {
    "ghbm-table2": (GhbmSetting(), GhbmSetting(methods=QUICK_METHODS, **_QUICK)),
    "ghbm-fig1": (GhbmSetting(methods=("fedavg",), probe_taus=PROBE_TAUS, seeds=1),
                  GhbmSetting(methods=("fedavg",), probe_taus=PROBE_TAUS, **_QUICK)),
    "ghbm-tau": (GhbmSetting(methods=("ghbm",), splits=("noniid",), taus=(1, 2, 5, 10, 20, 40)),
                 GhbmSetting(methods=("ghbm",), splits=("noniid",), taus=(1, 5, 10, 20), **_QUICK)),
    "ghbm-alpha": (GhbmSetting(methods=("fedavg", "scaffold", "mimemom", "fedcm", "fedhbm"),
                               splits=("alpha=0", "alpha=0.05", "alpha=0.1", "alpha=1", "iid")),
                   GhbmSetting(methods=("fedavg", "fedcm", "fedhbm"), splits=("alpha=0", "alpha=0.1", "iid"),
                               **_QUICK)),
}


def setting(experiment: str, quick: bool | None = None, **overrides) -> GhbmSetting:
    """The paper or quick setting of ``experiment`` (quick when ``AFL_QUICK=1``), with overrides; a new
    ``dataset`` brings its model, hyperparameter column, J, batch, rounds and test subset unless given too."""
    base = base_setting(SETTINGS, GhbmSetting, experiment, quick, overrides)
    if quick is None:
        quick = os.environ.get("AFL_QUICK") == "1"
    if "dataset" in overrides and overrides["dataset"] != base.dataset:
        check_choice("dataset", overrides["dataset"], DATASETS)
        preset = dict(DATASETS[overrides["dataset"]])
        if quick:
            preset.pop("rounds")
        base = replace(base, **{k: v for k, v in preset.items() if k not in overrides}, dataset=overrides["dataset"])
    return with_overrides(base, overrides)


def load_task(cfg: GhbmSetting, root=None, device="cpu") -> Dataset:
    """The experiment's dataset, its test set cut to a fixed seeded subset of ``cfg.test_samples`` (Shakespeare's
    paper federation with ``test_set="chosen-roles"``: whole, each run keeps its roles' windows, :func:`test_view`)."""
    data = load_dataset(cfg.dataset, root=root, device=device)
    if cfg.test_samples is not None:
        check_int("test_samples", cfg.test_samples, 1, data.n_test, hint=f"at most {cfg.dataset}'s {data.n_test} test "
                  "samples, or None for all")
    if role_test_set(cfg):
        return data
    if cfg.test_samples is not None and cfg.test_samples < data.n_test:
        keep = torch.as_tensor(np.sort(np.random.default_rng(20240101).choice(data.n_test, cfg.test_samples,
                                                                              replace=False)), device=device)
        data = replace(data, test_x=data.test_x[keep], test_y=data.test_y[keep], test_groups=None)
    return data


def role_test_set(cfg: GhbmSetting) -> bool:
    """Whether each run tests on its own roles' windows (Shakespeare's paper federation, FedDyn's test set)."""
    return cfg.dataset == "shakespeare" and cfg.federation == "paper" and cfg.test_set == "chosen-roles"


def chosen_roles(cfg: GhbmSetting, data: Dataset, seed: int) -> list[torch.Tensor]:
    """Shakespeare's clients, one role each: ``clients`` roles of at least :data:`SHAKESPEARE_WINDOWS` windows
    (paper federation; any size for ``"any-roles"``), each cut to that many -- a random contiguous run
    (``crop="offset"``) or its first -- drawn once for every seed (``roles="fixed"``) or per ``seed``."""
    paper = cfg.federation == "paper"
    draw = FEDERATION_SEED if paper and cfg.roles == "fixed" else seed
    roles = make_partition("by_group", data.train_groups.cpu(), cfg.clients, seed=draw,
                           min_samples=SHAKESPEARE_WINDOWS if paper else 2)
    if not (paper and cfg.crop == "offset"):
        return [p[:SHAKESPEARE_WINDOWS] for p in roles]
    rng = np.random.default_rng([draw, 1])
    starts = [int(rng.integers(len(p) - SHAKESPEARE_WINDOWS + 1)) for p in roles]
    return [p[s:s + SHAKESPEARE_WINDOWS] for p, s in zip(roles, starts)]


def test_view(cfg: GhbmSetting, data: Dataset, seed: int) -> Dataset:
    """``data`` with the test set a run evaluates on: FedDyn's, :data:`TEST_PER_ROLE` windows of each chosen role
    (a seeded draw from the role's LEAF test windows; all of them where it has fewer), where
    :func:`role_test_set`; else ``data`` as :func:`load_task` cut it."""
    if not role_test_set(cfg):
        return data
    groups = data.train_groups[torch.cat(chosen_roles(cfg, data, seed))].unique().cpu().numpy()
    test_groups = data.test_groups.cpu().numpy()
    rng = np.random.default_rng([FEDERATION_SEED if cfg.roles == "fixed" else seed, 2])
    keep = []
    for g in groups:
        windows = np.flatnonzero(test_groups == g)
        keep.append(np.sort(rng.choice(windows, min(TEST_PER_ROLE, len(windows)), replace=False)))
    keep = torch.as_tensor(np.concatenate(keep), device=data.test_x.device)
    return replace(data, test_x=data.test_x[keep], test_y=data.test_y[keep], test_groups=data.test_groups[keep])


def client_parts(cfg: GhbmSetting, data: Dataset, split: str, seed: int) -> list[torch.Tensor]:
    """The clients' sample indices for ``split``: one class (alpha = 0) or Dirichlet(alpha) label mixes,
    ``n / clients`` samples each (the code's rebalancing); Shakespeare: one role each (:func:`chosen_roles`), or for
    IID as many windows spread over the clients, drawn from every role (``iid_pool="all-roles"``, App. C.1) or from
    the chosen roles' windows. Where classes are too unequal for ``n / clients`` samples of one class per client
    (MNIST: 5,421 fives for 10 clients of 600), alpha = 0 gives each client the largest size that one class can
    fill for all (MNIST: 584)."""
    alpha = split_alpha(split)
    if cfg.dataset == "shakespeare":
        parts = chosen_roles(cfg, data, seed)
        if alpha == 0:
            return parts
        sizes = [len(p) for p in parts]
        if cfg.federation == "any-roles":
            return make_partition("sized", data.train_y.cpu(), seed=seed, sizes=sizes)
        draw = FEDERATION_SEED if cfg.roles == "fixed" else seed
        if cfg.iid_pool == "all-roles":
            pool = torch.from_numpy(np.random.default_rng([draw, 3]).choice(len(data.train_y), sum(sizes),
                                                                             replace=False))
        else:
            pool = torch.cat(parts)[torch.from_numpy(np.random.default_rng(draw).permutation(sum(sizes)))]
        return list(pool.split(sizes))
    alpha = cfg.iid_alpha if np.isinf(alpha) else alpha
    size = None if alpha == 0 else len(data.train_y) // cfg.clients     # None: n / clients where one class fills it
    return make_partition("dirichlet", data.train_y.cpu(), cfg.clients, seed=seed, alpha=alpha, size=size)


def final_accuracy(curve: dict, rounds: int, last: int) -> float:
    """Mean test accuracy over the evaluations in the last ``last`` rounds (the paper's metric)."""
    acc = [a for t, a in zip(curve["time"], curve["accuracy"]) if t >= rounds - last - 1e-9]
    return float(np.mean(acc))


def compute_run(cfg: GhbmSetting, split: str, method: str, tau: int | None, seed: int, *, dataset=None,
                device="cpu", root=None, checkpoints=None) -> dict:
    """One seeded run: its accuracy, loss, bytes and client steps every ``eval_every`` rounds, and its final
    accuracy (mean over the last ``last`` rounds). ``checkpoints``: a folder where the run saves its state every
    :func:`afl.checkpoint.every_s` seconds and from which it goes on if it was stopped (:mod:`afl.checkpoint`)."""
    algorithm, kw = cfg.run_kwargs(method, tau)
    data = test_view(cfg, dataset if dataset is not None else load_task(cfg, root=root, device=device), seed)
    parts = client_parts(cfg, data, split, seed)
    fed = make_federation(data, cfg.model, cfg.clients, batch_size=cfg.batch, seed=seed, device=device, parts=parts,
                          precision=cfg.precision)
    probe = deviation_probe(cfg.probe_taus, cfg.eval_every) if cfg.probe_taus else None
    out = run_algorithm(algorithm, fed, total_time=cfg.rounds, eval_every=cfg.eval_every, learner_class=probe,
                        allow_large=True,   # the work was checked for the grid: runner.execute
                        **checkpointing(checkpoints, split, method, tau, seed), **kw)
    if probe is not None:
        out["deviation"] = out.pop("learner").deviation
    out.pop("schedule")
    out.pop("model")
    out.update(split=split, method=method, tau=kw.get("tau"), seed=seed, dataset=data.name,
               settings=settings_record(out["settings"]), final=final_accuracy(out["curve"], cfg.rounds, cfg.last))
    return out


def run_key(run: dict) -> tuple:
    return run["split"], run["method"], run["tau"], run["seed"]


def same_run(run: dict, cfg: GhbmSetting) -> bool:
    """Whether a saved run is what ``cfg`` computes now (its method's settings unchanged)."""
    if run["method"] not in method_settings(cfg.hyper):
        return False
    algorithm, kw = cfg.run_kwargs(run["method"], run["tau"])
    return same_settings(run.get("settings"), algorithm, **kw)


def run_grid(cfg: GhbmSetting, keys: list[tuple], *, device="cpu", root=None, fleet: bool = True,
             fleet_size: int | None = None, on_outcome=None, checkpoints=None) -> list[Outcome]:
    """The runs ``keys`` ((split, method, tau, seed) each) on one machine, as a fleet or one by one (each saving
    checkpoints in the folder ``checkpoints``, if given)."""
    data = load_task(cfg, root=root, device=device)
    tasks = [(key, partial_fn(compute_run, cfg, *key, dataset=data, device=device, checkpoints=checkpoints))
             for key in keys]
    return run_tasks(tasks, fleet=fleet, fleet_size=fleet_size, on_outcome=on_outcome)


def grid(cfg: GhbmSetting, *, seeds: int | None = None, device="cpu", root=None, fleet: bool = True,
         fleet_size: int | None = None, name: str = "ghbm") -> Grid:
    """Every (split, method, tau, seed) of ``cfg`` (tau only for GHBM) as a :class:`~afl.repro.runner.Grid`."""
    seeds = cfg.seeds if seeds is None else check_int("seeds", seeds, 1, MAX_SEEDS)
    taus = cfg.taus or (round(1 / cfg.participation),)
    keys = [(sp, m, t, s) for s in range(seeds) for sp in cfg.splits for m in cfg.methods
            for t in (taus if m == "ghbm" else (None,))]
    work = partial_fn(run_grid, cfg, device=str(device), root=root, fleet=fleet, fleet_size=fleet_size)
    return Grid(name, replace(cfg, seeds=seeds), keys, work, run_key, partial_fn(same_run, cfg=cfg), SELECTION,
                checkpoints=True)


# -- tables ----------------------------------------------------------------------------------------------------

def row_name(run: dict) -> str:
    return run["method"] if run["tau"] is None or run["method"] != "ghbm" else f"ghbm tau={run['tau']}"


def _stats(values: list[float]) -> dict:
    mean, std = mean_std(values)
    return {"mean": mean, "std": std, "per_seed": values}


def cost_to_reach(run: dict, target: float) -> dict | None:
    """Table 4: rounds, bytes exchanged and client steps at the first evaluation at or above ``target``."""
    c = run["curve"]
    for i, acc in enumerate(c["accuracy"]):
        if acc >= target:
            return {"rounds": c["time"][i], "bytes": c["bytes_up"][i] + c["bytes_down"][i],
                    "client_steps": c["client_steps"][i]}
    return None


def table(runs: list[dict]) -> dict:
    """``rows[row][split]`` = final accuracy (%) ``mean``, ``std``, ``per_seed``, and Table 4's cost to reach
    FedAvg's final accuracy of the same split and seed (mean over the seeds that reached it; ``reached``)."""
    rows: dict = {}
    for r in runs:
        rows.setdefault(row_name(r), {}).setdefault(r["split"], []).append(r)
    fedavg = {(r["split"], r["seed"]): r["final"] for r in runs if r["method"] == "fedavg"}
    out = {}
    for name, splits in rows.items():
        out[name] = {}
        for split, rs in splits.items():
            cell = _stats([100 * r["final"] for r in rs])
            costs = [cost_to_reach(r, fedavg[(split, r["seed"])]) for r in rs if (split, r["seed"]) in fedavg]
            hit = [c for c in costs if c is not None]
            if costs:
                keys = ("rounds", "bytes", "client_steps") if hit else ()
                means = {k: float(np.mean([c[k] for c in hit])) for k in keys}
                cell["to_fedavg"] = {"reached": len(hit), "of": len(costs), **means}
            out[name][split] = cell
    return out


def tau_rows(runs: list[dict]) -> dict:
    """``ghbm-tau``: ``rows[str(tau)]`` = final accuracy (%) ``mean``, ``std``, ``per_seed`` of GHBM, per split."""
    rows: dict = {}
    for r in runs:
        if r["method"] == "ghbm":
            rows.setdefault(str(r["tau"]), {}).setdefault(r["split"], []).append(100 * r["final"])
    out = {}
    for tau, splits in rows.items():
        cells = {split: _stats(v) for split, v in splits.items()}
        out[tau] = next(iter(cells.values())) | {"splits": cells} if len(cells) == 1 else {"splits": cells}
    return out


def paper_reference(cfg: dict) -> dict | None:
    return PAPER["cifar10" if cfg["dataset"] == "cifar10-jpeg" else cfg["dataset"]] \
        if cfg["dataset"] in ("cifar10-jpeg", "shakespeare") else None


def table_markdown(result: dict) -> str:
    """Final accuracy per method and split beside the paper's (labelled), and Table 4's cost to reach FedAvg."""
    rows, cfg = result["rows"], result["config"]
    splits = list(cfg["splits"])
    paper = paper_reference(cfg)
    mixed = len(run_sources(result)) > 1                      # a merged result: each row names its runs' source
    head = "| method | " + " | ".join(f"{s} (ours)" for s in splits) + (" | paper non-iid / iid" if paper else "") \
        + " | rounds / MB / client steps to FedAvg's accuracy (" + splits[0] + ") |" + (" runs from |" if mixed else "")
    lines = [head, "|---" * (len(splits) + 2 + bool(paper) + mixed) + "|"]
    for name, cells in rows.items():
        vals = [pm(cells[s]["mean"], cells[s]["std"]) if s in cells else "–" for s in splits]
        base = name.split(" ")[0]
        ref = paper.get(VARIANTS.get(base, (base,))[0]) if paper else None
        cost = cells.get(splits[0], {}).get("to_fedavg")
        if not cost:
            cost_text = "–"
        elif not cost["reached"]:
            cost_text = f"not reached ({cost['of']} seed{'s' * (cost['of'] > 1)})"
        else:
            cost_text = (f"{cost['rounds']:.0f} / {cost['bytes'] / 1e6:.0f} / {cost['client_steps']:,.0f}"
                         + (f" ({cost['reached']}/{cost['of']} seeds)" if cost["reached"] < cost["of"] else ""))
        lines.append(f"| {row_style(name, cfg)['label']} | "
                     + " | ".join(vals) + ((f" | {ref[0]} / {ref[1]}" if ref else " | –") if paper else "")
                     + f" | {cost_text} |"
                     + (f" {source_tags(result, [r for r in result['runs'] if row_name(r) == name])} |"
                        if mixed else ""))
    sources = RATE_SOURCES.get(cfg["hyper"], {})
    ran = {}                                                      # method -> the rates its runs recorded
    for r in result["runs"]:
        s = r.get("settings") or {}
        ran.setdefault(r["method"], ", ".join(f"{k} = {s[k]:g}" for k in ("server_lr", "lr", "beta", "alpha", "mu")
                                              if isinstance(s.get(k), (int, float))))
    notes = [f"- {m} ({ran.get(m, '')}): " + (sources[m] if m in sources else
                                              f"{VARIANTS[m][0]}'s rates with {VARIANTS[m][1]}")
             for m in dict.fromkeys(n.split(" ")[0] for n in rows) if m in sources or m in VARIANTS]
    if notes:
        lines += ["", "Where each rate comes from (the rates as the runs recorded them; all others: Table 7, "
                  "alpha = 0):", *notes]
    return "\n".join(lines)


def tau_markdown(result: dict) -> str:
    rows = result["rows"]
    C = result["config"]["participation"]
    lines = [f"GHBM final accuracy (%) against tau (C = {C:g}, so 1/C = {1 / C:g}):", "",
             "| tau | " + " | ".join(next(iter(rows.values()))["splits"]) + " |",
             "|---" * (1 + len(next(iter(rows.values()))["splits"])) + "|"]
    for tau in sorted(rows, key=int):
        lines.append(f"| {tau} | " + " | ".join(pm(c["mean"], c["std"])
                                                 for c in rows[tau]["splits"].values()) + " |")
    return "\n".join(lines)


def row_style(name: str, cfg: dict) -> dict:
    """A row's colour, line style and label: its method's (:func:`afl.plots.style`); GHBM's tau rows in GHBM's
    colour, darker for larger tau, each with its own line style."""
    st = style(name.split(" ")[0])
    if not name.startswith("ghbm tau="):
        return st
    taus = sorted(int(t) for t in (cfg.get("taus") or [name[9:]]))
    tau = int(name[9:])
    k = taus.index(tau) if tau in taus else 0
    shade = 0.55 * (1 - (k + 1) / len(taus))                 # 0 for the largest tau: GHBM's own colour
    rgb = np.array([int(st["color"][i:i + 2], 16) for i in (1, 3, 5)]) / 255
    color = "#" + "".join(f"{int(round(255 * v)):02x}" for v in rgb + (1 - rgb) * shade)
    return {"color": color, "linestyle": ["-", "--", "-.", ":"][k % 4], "label": f"{st['label']} τ={tau}"}


def plot_result(result: dict, fig) -> None:
    """Accuracy against rounds per method and split (mean over seeds; bands ± std), and the final accuracies
    (GHBM's tau sweep: final accuracy against tau)."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import NullLocator
    runs, cfg = result["runs"], result["config"]
    splits = list(cfg["splits"])
    axes = fig.subplots(1, len(splits) + 1)
    for ax, split in zip(axes, splits):
        groups: dict = {}
        for r in runs:
            if r["split"] == split:
                groups.setdefault(row_name(r), []).append(r)
        for name, rs in groups.items():
            st = row_style(name, cfg)
            t = np.asarray(rs[0]["curve"]["time"])
            acc = 100 * np.asarray([r["curve"]["accuracy"] for r in rs])
            mean, std = series_mean_std(acc)
            ax.plot(t, mean, color=st["color"], linestyle=st["linestyle"], label=st["label"], lw=1.2)
            if len(rs) > 1:
                ax.fill_between(t, mean - std, mean + std, color=st["color"], alpha=0.15)
        ax.set(xlabel="round (simulated time)", ylabel="test accuracy (%)",
               title=f"{split}" + (f" (bands: ± std over {cfg['seeds']} seeds)" if cfg["seeds"] > 1 else ", one seed"))
    handles, labels = axes[0].get_legend_handles_labels()
    if len(labels) > LEGEND_COLUMNS:      # one legend under the panels: inside, a long one hides curves
        fig.legend(handles, labels, loc="lower center", ncol=LEGEND_COLUMNS, fontsize=8, frameon=False)
    else:
        for ax in axes[:-1]:
            ax.legend(fontsize=6)
    ax = axes[-1]
    if result["experiment"] == "ghbm-tau":
        rows = result["rows"]
        taus = sorted(rows, key=int)
        for split in splits:
            m = [rows[t]["splits"][split]["mean"] for t in taus]
            s = error_bars(rows[t]["splits"][split]["std"] for t in taus)
            ax.errorbar([int(t) for t in taus], m, yerr=s, marker="o", color=style("ghbm")["color"], label=split)
        ax.axvline(1 / cfg["participation"], color="black", linestyle=":", lw=1, label="τ = 1/C")
        ax.set(xscale="log", xlabel="τ (rounds averaged into the momentum)", ylabel="final test accuracy (%)",
               title=f"GHBM: final accuracy (mean of the last {cfg['last']} rounds) vs τ"
               + (f"\nbars: ± std over {cfg['seeds']} seeds" if cfg["seeds"] > 1 else ""))
        ax.set_xticks([int(t) for t in taus], taus)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.legend(fontsize=7)
    else:
        rows = result["rows"]
        names = list(rows)
        x = np.arange(len(names))
        width = 0.8 / len(splits)

        def shade(k):
            return 1.0 - 0.6 * k / max(1, len(splits) - 1)
        for k, split in enumerate(splits):
            m = [rows[n].get(split, {}).get("mean", np.nan) for n in names]
            s = error_bars(rows[n].get(split, {}).get("std") for n in names)
            ax.bar(x + k * width, m, width, yerr=s, color=[row_style(n, cfg)["color"] for n in names],
                   alpha=shade(k))
        ax.set_xticks(x + width * (len(splits) - 1) / 2, [row_style(n, cfg)["label"] for n in names],
                      rotation=60, ha="right", fontsize=7)
        bars = f"error bars: ± std over {cfg['seeds']} seeds" if cfg["seeds"] > 1 else "one seed"
        means = [c["mean"] for row in rows.values() for c in row.values() if isinstance(c, dict) and "mean" in c]
        ax.set_ylim(max(0.0, 10 * np.floor(min(means) / 10) - 10), min(100.0, max(means) + 8))
        on = f" on {splits[0]}" if len(splits) == 1 else ""
        ax.set(ylabel="final test accuracy (%)", title=f"final accuracy{on} (mean of the last {cfg['last']} rounds)\n"
               + (f"lighter: {', '.join(splits[1:])}; " if len(splits) > 1 else "") + bars)
        if len(splits) > 1:   # bars take their method's colour; the legend shows each split's shade, in grey
            ax.legend(handles=[Patch(facecolor="0.45", alpha=shade(k), label=split) for k, split in enumerate(splits)],
                      title="split (shade)", title_fontsize=7, fontsize=7, frameon=False, loc="upper left",
                      bbox_to_anchor=(1.01, 1.0))


def run_experiment(experiment: str, *, quick: bool = False, seeds: int | None = None, out="results", root=None,
                   device="cpu", progress: bool = True, fresh: bool = False, reuse=(), fleet: bool = True,
                   fleet_size: int | None = None, ray: str | None = None, processes: int | None = None,
                   allow_large: bool = False, **overrides) -> list[Path]:
    """Compute a GHBM experiment and write ``OUT/<experiment>.json``, ``.md`` and ``.png`` (saved as runs end,
    resumed, reused, fleet or Ray, as every ``afl repro``)."""
    if experiment == "ghbm-quadratic":
        return run_quadratic(out=out, quick=quick, fresh=fresh, allow_large=allow_large, **overrides)
    cfg = setting(experiment, quick=quick, **overrides)
    dev = resolve_device(device)
    g = grid(cfg, seeds=seeds, device=dev, root=root, fleet=fleet, fleet_size=fleet_size, name=experiment)
    done = execute(g, out=out, quick=quick, seeds=seeds, fresh=fresh, reuse=reuse, progress=progress, fleet=fleet,
                   fleet_size=fleet_size, ray=ray, processes=processes, device=dev, overrides=overrides,
                   allow_large=allow_large)
    return done.publish({"dataset": done.runs[0]["dataset"], "rows": _views(experiment)[0](done.runs),
                         "paper": paper_reference(done.record["config"])}, out, write_result)


def _views(experiment: str) -> tuple:
    """An experiment's (rows, markdown body, figure panels): the tau sweep's and Fig. 1's own, else the table's."""
    return {"ghbm-tau": (tau_rows, tau_markdown, plot_result),
            "ghbm-fig1": (deviation_rows, deviation_markdown, plot_deviation)}.get(
        experiment, (table, table_markdown, plot_result))


def write_result(result: dict, out, write_json: bool = True) -> list[Path]:
    """Write ``OUT/<experiment>.json`` (unless ``write_json`` is False), its markdown report and its figure, the
    summary rows computed from the runs (:func:`_views`)."""
    if result["experiment"] != "ghbm-quadratic":
        result = result | {"rows": _views(result["experiment"])[0](result["runs"])}
    return write_files(result, out, report, figure, write_json)


def figure(result: dict):
    from matplotlib.figure import Figure
    if result["experiment"] == "ghbm-quadratic":
        return plot_quadratic(result)
    cfg = result["config"]
    fig = Figure(figsize=(6 * (len(cfg["splits"]) + 1), 5))
    _views(result["experiment"])[2](result, fig)
    fig.suptitle(f"{result['experiment']}{title_tag(result)} on {result['dataset']}: "
                 f"{cfg['model']}, {cfg['clients']} clients, C = {cfg['participation']:g}, J = {cfg['local_steps']}, "
                 f"{cfg['rounds']} rounds, {cfg['seeds']} seed{'s' * (cfg['seeds'] > 1)}"
                 + (f"\nTable 7 retuned: {', '.join(cfg['retune'])}" if cfg.get("retune") else ""))
    rows = -(-len(fig.legends[0].get_texts()) // LEGEND_COLUMNS) if fig.legends else 0
    fig.tight_layout(rect=(0, 0.045 * rows, 1, 1))
    return fig


def paper_setting(result: dict) -> GhbmSetting:
    """The paper's setting of a GHBM result's experiment, on the result's dataset where the paper has it (else on
    CIFAR-10)."""
    dataset = result["config"]["dataset"]
    return setting(result["experiment"], quick=False,
                   **({"dataset": dataset} if dataset in ("cifar10-jpeg", "shakespeare") else {}))


def report(result: dict, per_run: bool = True) -> str:
    """The markdown of a GHBM result: command, machine, scale, the table beside the paper's, and per run."""
    if result["experiment"] == "ghbm-quadratic":
        return quadratic_markdown(result)
    cfg, runs = saved_config(GhbmSetting, result["config"]), result["runs"]
    full = "; FedCM, full participation: every client" if any(r["method"] == "fedcm-full" for r in runs) else ""
    notes = [f"Dataset: **{result['dataset']}**, model {cfg['model']}, {cfg['clients']} clients, C = "
             f"{cfg['participation']:g} ({cfg['sampling']} sampling{full}), J = {cfg['local_steps']} steps of batch "
             f"{cfg['batch']}, {cfg['rounds']} rounds, {cfg['seeds']} seed(s); final accuracy = mean test accuracy "
             f"over the evaluations (every {cfg['eval_every']} rounds) of the last {cfg['last']} rounds."]
    if difference := paper_difference(paper_setting(result), cfg, SELECTION):
        notes.append(difference + " Not comparable with the paper's numbers; a short budget can also change the "
                     "ordering (App. C.10).")
    if paper_reference(cfg):
        notes.append("Paper columns: the paper's numbers (Table 8 CIFAR-10 CNN / Table 2 Shakespeare), a reference"
                     + (" on the lossy CIFAR-10 copy." if cfg["dataset"] == "cifar10-jpeg" else "."))
    body = _views(result["experiment"])[1](result)
    lines = heading(result) + [" ".join(notes), "", body]
    if per_run:
        lines += ["", "| split | method | tau | seed | final acc. (%) | MB exchanged | client steps | wall s |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['split']} | {r['method']} | {r['tau'] or '–'} | {r['seed']} | {100 * r['final']:.1f} | "
                  f"{(r['bytes_up'] + r['bytes_down']) / 1e6:.0f} | {r['client_steps']:,} | {r['wall_seconds']:.0f} |"
                  for r in runs]
    return "\n".join(lines)


# -- Fig. 1: how far the mean of the last tau pseudo-gradients lies from all clients' ---------------------------

class DeviationProbe(FedAvg):
    """FedAvg that measures Fig. 1 of the GHBM paper every ``every`` rounds: with ``g^k`` round k's server
    pseudo-gradient (its participants' weighted ``theta^{k-1} - y_i``, taken at past models as eq. (4) reuses
    them) and ``g_all`` the same over every client from the current model ``theta^{t-1}`` (fresh local runs),
    ``||mean_{k in (t-tau, t]} g^k - g_all||^2 / ||g_all||^2`` for each tau in ``taus``. The probe's local runs
    draw from the clients' batch streams (the run is seeded, not the same as an unprobed one)."""

    taus: tuple = (1,)
    every: int = 1

    def __init__(self, fed, history, cfg):
        super().__init__(fed, history, cfg)
        self.past = deque(maxlen=max(self.taus))
        self.deviation = {"round": [], "tau": {str(t): [] for t in self.taus}}

    def server_step(self, clients, delta, pseudo):
        self.past.append(pseudo)
        if (self.round + 1) % self.every == 0 and len(self.past) == self.past.maxlen:
            everyone = list(range(self.fed.n))
            jobs = [self.queue.submit(i, self.w, self.K, self.lr, self.cfg.weight_decay) for i in everyone]
            g_all = self.weights(everyone) @ (self.w - torch.stack([job.result() for job in jobs]))
            past = torch.stack(list(self.past))
            self.deviation["round"].append(self.round + 1)
            for tau in self.taus:
                gap = past[-tau:].mean(0) - g_all
                self.deviation["tau"][str(tau)].append(float(gap @ gap / (g_all @ g_all)))
        super().server_step(clients, delta, pseudo)


def deviation_probe(taus, every: int) -> type:
    """A :class:`DeviationProbe` measuring ``taus`` every ``every`` rounds (for ``run_algorithm(learner_class=)``)."""
    return type("DeviationProbe", (DeviationProbe,), {"taus": tuple(int(t) for t in taus), "every": int(every)})


def deviation_rows(runs: list[dict]) -> dict:
    """``ghbm-fig1``: ``rows[split][str(tau)]`` = the relative deviation averaged over a run's measurements:
    ``mean``, ``std``, ``per_seed`` over seeds."""
    rows: dict = {}
    for r in runs:
        for tau, values in r["deviation"]["tau"].items():
            rows.setdefault(r["split"], {}).setdefault(tau, []).append(float(np.mean(values)))
    return {split: {tau: _stats(v) for tau, v in by.items()} for split, by in rows.items()}


def plot_deviation(result: dict, fig) -> None:
    """Fig. 1: the relative deviation against rounds, one line per tau and a panel per split; then its mean
    against tau beside Lemma 4.4's factor ``E[((n - |S_tau|)/n)^2]`` (uniform sampling)."""
    from matplotlib.ticker import NullLocator
    runs, cfg = result["runs"], result["config"]
    splits, taus = list(cfg["splits"]), [str(t) for t in cfg["probe_taus"]]
    axes = fig.subplots(1, len(splits) + 1)
    shades = {"taus": list(cfg["probe_taus"])}
    for ax, split in zip(axes, splits):
        rs = [r for r in runs if r["split"] == split]
        t = rs[0]["deviation"]["round"]
        for tau in taus:
            values = np.asarray([r["deviation"]["tau"][tau] for r in rs])
            st = row_style(f"ghbm tau={tau}", shades)
            ax.plot(t, values.mean(0), color=st["color"], linestyle=st["linestyle"], label=f"τ = {tau}")
        ax.set(yscale="log", xlabel="round (simulated time)", ylabel="‖mean of last τ pseudo-gradients − all "
               "clients'‖² / ‖all‖²", title=f"{split}: deviation of the τ-averaged pseudo-gradient"
               + (f" (mean of {cfg['seeds']} seeds)" if cfg["seeds"] > 1 else ""))
        ax.legend(fontsize=7)
    ax = axes[-1]
    for k, split in enumerate(splits):
        cells = result["rows"][split]
        ax.errorbar([int(t) for t in taus], [cells[t]["mean"] for t in taus],
                    yerr=error_bars(cells[t]["std"] for t in taus),
                    marker="o", color=style("ghbm")["color"], alpha=1.0 - 0.45 * k, label=f"{split}, measured")
    n, s = cfg["clients"], round(cfg["participation"] * cfg["clients"])
    ax.plot([int(t) for t in taus], [unseen_fraction_moment(n, s, int(t)) for t in taus], color="black",
            linestyle=":", marker=".", label="Lemma 4.4's factor E[((n − |S_τ|)/n)²]")
    ax.axvline(1 / cfg["participation"], color="gray", linestyle="--", lw=1, label="τ = 1/C")
    ax.set(xscale="log", yscale="log", xlabel="τ (rounds averaged)", ylabel="mean relative deviation",
           title="mean over the run" + (" (bars: ± std over seeds)" if cfg["seeds"] > 1 else ""))
    ax.set_xticks([int(t) for t in taus], taus)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.legend(fontsize=7)


def deviation_markdown(result: dict) -> str:
    cfg, rows = result["config"], result["rows"]
    splits = list(cfg["splits"])
    n, s = cfg["clients"], round(cfg["participation"] * cfg["clients"])
    lines = ["Relative deviation ‖mean of the last τ server pseudo-gradients − all clients' pseudo-gradient at "
             "the current model‖² / ‖all‖², averaged over the run (measured every "
             f"{cfg['eval_every']} rounds of FedAvg), beside Lemma 4.4's factor for uniform sampling:", "",
             "| τ | " + " | ".join(splits) + " | E[((n − abs(S_τ))/n)²] |", "|---" * (len(splits) + 2) + "|"]
    for tau in (str(t) for t in cfg["probe_taus"]):
        cells = [f"{c['mean']:.3g}" + ("" if c["std"] is None else f" ± {c['std']:.2g}")
                 for c in (rows[sp][tau] for sp in splits)]
        lines.append(f"| {tau} | " + " | ".join(cells) + f" | {unseen_fraction_moment(n, s, int(tau)):.3g} |")
    return "\n".join(lines)


# -- App. C.9: the quadratic ------------------------------------------------------------------------------------

#: numbers the quadratic's A and b may hold (two arrays of clients x dim floats: 1.6 GB at the limit)
QUADRATIC_FLOATS = 10**8


@dataclass(frozen=True)
class QuadraticSetting:
    """C.9's federation: ``clients`` quadratics ``f_i(x) = 1/2 (x - b_i)^T A_i (x - b_i)`` in ``dim`` dimensions,
    ``A_i`` diagonal with eigenvalues uniform in ``[mu, L]`` and ``b_i ~ N(0, spread^2 I)`` (the heterogeneity),
    ``per_round`` of them per round cyclically; exact gradients, momentum ``beta``, GHBM's tau = 1/C. The local
    lr is ``round_lr / J``, so that a round moves as far for every J. The paper leaves dimension, heterogeneity
    and learning rates unstated: these are ours."""

    clients: int = 10
    per_round: int = 2
    dim: int = 20
    mu: float = 0.1
    L: float = 1.0
    spread: float = 10.0
    round_lr: float = 0.05
    beta: float = 0.9
    rounds: int = 500
    steps: tuple = (1, 5, 10, 20)
    seed: int = 0

    def __post_init__(self):
        check_int("clients", self.clients, 2, QUADRATIC_FLOATS, hint=f"at most {QUADRATIC_FLOATS:.0e} (each holds a "
                  "quadratic of dim numbers)")
        check_int("per_round", self.per_round, 1, self.clients)
        check(self.clients % self.per_round == 0, "per_round", self.per_round, f"a divisor of clients = {self.clients}")
        check_real("L", self.L, 0, strict_low=True)
        check_real("mu", self.mu, 0, self.L, strict_low=True, hint="0 < mu <= L")
        check_real("round_lr", self.round_lr, 0, 1 / self.L, strict_low=True, hint="0 < round_lr <= 1/L")
        check_real("beta", self.beta, 0, 1, strict_high=True)
        check_int("rounds", self.rounds, 1)
        check_int("dim", self.dim, 1, QUADRATIC_FLOATS // self.clients,
                  hint=f"at most {QUADRATIC_FLOATS:.0e} numbers in the clients' A and b together")
        check_real("spread", self.spread, 0)
        check_int("seed", self.seed, 0)
        check(len(self.steps) > 0, "steps", self.steps, "at least one number of local steps J")
        for J in self.steps:
            check_int("steps", J, 1)

    def work(self) -> Work:
        """At most the work of the figure: every curve's ``rounds`` of (at most) every client taking each J of
        ``steps`` (a step: one client's exact gradient), the loss recorded every round."""
        curves = len(QUADRATIC_METHODS) * len(self.steps)
        return Work(len(QUADRATIC_METHODS) * self.rounds * self.clients * sum(self.steps),
                    curves * evaluations(self.rounds, 1), fields_of(self, "rounds", "clients", "steps"),
                    fields_of(self, "rounds", "steps"))


#: the quadratic's curves: name -> (tau, who takes part: one cyclic group or all clients, momentum form)
QUADRATIC_METHODS = {"fedcm": (1, "cyclic", "heavy-ball"), "ghbm": ("1/C", "cyclic", "heavy-ball"),
                     "ghbm-eq4": ("1/C", "cyclic", "window"), "fedavg": (1, "cyclic", "none"),
                     "fedcm-full": (1, "all", "heavy-ball")}


def quadratic_problem(cfg: QuadraticSetting):
    rng = np.random.default_rng(cfg.seed)
    A = rng.uniform(cfg.mu, cfg.L, size=(cfg.clients, cfg.dim))
    b = rng.normal(0, cfg.spread, size=(cfg.clients, cfg.dim))
    x_star = (A * b).sum(0) / A.sum(0)
    f = lambda x: 0.5 * np.mean(np.sum(A * (x - b) ** 2, axis=-1), axis=0)  # noqa: E731
    return A, b, f, float(f(x_star))


def quadratic_run(cfg: QuadraticSetting, J: int, tau: int, per_round: int, momentum: str = "heavy-ball") -> list[float]:
    """Training loss ``f(x^t) - f*`` per round, ``per_round`` clients taken cyclically, J exact local steps at
    lr ``eta_l = round_lr / J``, the server averaging (eta = 1). ``momentum``:

    - ``"heavy-ball"``: GHBM as run in the paper's experiments (Algorithm 2, eq. (7)): every local step adds
      ``beta/(tau J) (x^{t-1} - x^{t-tau-1})``. tau = 1 is FedCM (Sec. 3.3).
    - ``"window"``: the momentum analysed in the proofs (eq. (4)), written in the FedAvg-M form of Cheng et al.
      (2024) that the proofs build on: ``m^t = beta m^{t-1} + (1-beta) mean_{k in (t-tau, t]} gbar^k`` with
      ``gbar^k`` round k's mean local gradient; local steps ``w -= eta((1-beta) grad f_i(w) + beta m^{t-1})`` and
      the server step ``x^t = x^{t-1} - eta J m^t``, with ``eta = eta_l / (1-beta)``, so that tau = 1 is the
      heavy-ball FedCM again, step for step. (The OCR of the paper lost Algorithm 3 itself; this is our
      reading of eq. (4) and of the quantities E_t, Lambda_t of its proof.)
    - ``"none"``: plain FedAvg (beta = 0).
    """
    check_choice("momentum", momentum, ["heavy-ball", "window", "none"])
    A, b, f, f_star = quadratic_problem(cfg)
    groups = np.random.default_rng(cfg.seed + 1).permutation(cfg.clients).reshape(-1, per_round)
    lr, beta = cfg.round_lr / J, (0.0 if momentum == "none" else cfg.beta)
    models, loss = [np.zeros(cfg.dim)], [float(f(np.zeros(cfg.dim))) - f_star]
    m, window = np.zeros(cfg.dim), []
    for t in range(1, cfg.rounds + 1):
        x, S = models[-1], groups[(t - 1) % len(groups)]
        w, gradient_sum = np.repeat(x[None], len(S), axis=0), 0.0
        if momentum == "window":
            eta = lr / (1 - beta)
            for _ in range(J):
                g = A[S] * (w - b[S])
                gradient_sum = gradient_sum + g.mean(0)
                w = w - eta * ((1 - beta) * g + beta * m)
            window = (window + [gradient_sum / J])[-tau:]
            m = beta * m + (1 - beta) * np.mean(window, axis=0)
            models.append(x - eta * J * m)
        else:
            push = beta / (tau * J) * (x - models[-tau - 1]) if len(models) > tau else 0.0
            for _ in range(J):
                w = w - lr * A[S] * (w - b[S]) + push
            models.append(w.mean(0))
        loss.append(float(f(models[-1])) - f_star)
    return loss


def run_quadratic(out="results", quick: bool = False, fresh: bool = False, allow_large: bool = False,
                  **overrides) -> list[Path]:
    """App. C.9 / Fig. 9: FedCM, GHBM (tau = 1/C) as run (eq. 7) and as analysed (eq. 4), and FedAvg, with cyclic
    partial participation, and FedCM with every client, for each J; exact, seconds on a CPU. ``quick`` has no
    effect (the experiment is small). A saved result of another setting in ``out`` is replaced only with
    ``fresh``."""
    for field in overrides:
        check_choice("setting field", field, [f.name for f in fields(QuadraticSetting)])
    cfg = with_overrides(QuadraticSetting(), overrides)
    stop_if_estimating(cfg.work())
    check_work(cfg.work(), allow_large, "--allow-large", changed=overrides)
    saved = Path(out) / "ghbm-quadratic.json"
    if saved.is_file() and not fresh:
        try:
            same = {k: v for k, v in json.loads(saved.read_text())["config"].items() if k != "tau"} == json.loads(
                json.dumps({f.name: getattr(cfg, f.name) for f in fields(cfg)}))
        except (ValueError, KeyError, TypeError):
            same = False
        check(same, "--out", str(out), "a folder whose ghbm-quadratic.json this command may replace: it holds a result "
              "of another setting; add --fresh to replace it, or write elsewhere with --out")
    period = cfg.clients // cfg.per_round
    curves = {}
    for J in cfg.steps:
        curves[str(J)] = {}
        for name, (tau, who, momentum) in QUADRATIC_METHODS.items():
            curves[str(J)][name] = quadratic_run(cfg, J, period if tau == "1/C" else tau,
                                                 cfg.clients if who == "all" else cfg.per_round, momentum)
    command = "afl repro ghbm-quadratic" + set_flags(overrides)
    result = {"experiment": "ghbm-quadratic", "command": command, "machine": machine("cpu"),
              "afl_commit": afl_commit(), "quick": quick,
              "config": {f.name: getattr(cfg, f.name) for f in fields(cfg)} | {"tau": period}, "curves": curves}
    return write_result(result, output_dir(out))


def _quadratic_labels(cfg: dict) -> dict:
    C = f"{cfg['per_round'] / cfg['clients']:g}"
    return {"fedcm": f"FedCM, cyclic C = {C}", "ghbm": f"GHBM τ = {cfg['tau']} as run (Alg. 2, eq. 7), cyclic",
            "ghbm-eq4": f"GHBM τ = {cfg['tau']} as analysed (eq. 4), cyclic", "fedavg": f"FedAvg, cyclic C = {C}",
            "fedcm-full": "FedCM, full participation"}


def plot_quadratic(result: dict):
    from matplotlib.figure import Figure
    curves, cfg = result["curves"], result["config"]
    fig = Figure(figsize=(4.2 * len(curves), 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(curves), sharey=True))
    names = _quadratic_labels(cfg)
    for ax, (J, by) in zip(axes, curves.items()):
        for m, loss in by.items():
            st = style(m)
            ax.plot(np.maximum(loss, 1e-12), color=st["color"], linestyle=st["linestyle"], label=names[m],
                    linewidth=2.2 if m == "ghbm-eq4" else 1.4)
        ax.set(yscale="log", xlabel="round (simulated time)", title=f"J = {J} local steps, η_l = {cfg['round_lr']}/{J}")
    axes[0].set_ylabel("training loss f(x) − f* (floored at 1e-12)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(names), fontsize=8)
    fig.suptitle(f"GHBM App. C.9: {cfg['clients']} heterogeneous quadratics (d = {cfg['dim']}), "
                 f"{cfg['per_round']} per round cyclically, β = {cfg['beta']}")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def quadratic_markdown(result: dict) -> str:
    cfg = result["config"]
    names = _quadratic_labels(cfg)
    methods = list(next(iter(result["curves"].values())))
    lines = ["# ghbm-quadratic", "", f"Command: `{result['command']}`", "", f"Machine: {result['machine']}", "",
             f"{cfg['clients']} quadratics in {cfg['dim']} dimensions (eigenvalues in [{cfg['mu']}, {cfg['L']}], "
             f"optima spread {cfg['spread']}), {cfg['per_round']} clients per round cyclically, beta {cfg['beta']}, "
             f"local lr {cfg['round_lr']}/J, GHBM tau = 1/C = {cfg['tau']}. Loss f(x) - f* after {cfg['rounds']} "
             "rounds (the paper's Fig. 9: GHBM reaches FedCM with every client, FedCM with partial participation "
             "stalls). GHBM as analysed (eq. 4) does; GHBM as run (eq. 7) ends on FedAvg's cycle: on a cycle of "
             "period tau, x^{t-1} - x^{t-tau-1} = 0, so its momentum vanishes.", "",
             "| J | " + " | ".join(names[m] for m in methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for J, by in result["curves"].items():
        lines.append(f"| {J} | " + " | ".join(f"{by[m][-1]:.3g}" for m in methods) + " |")
    return "\n".join(lines)


#: every experiment of this module (the quadratic has its own setting, :class:`QuadraticSetting`)
EXPERIMENTS = {**SETTINGS, "ghbm-quadratic": QuadraticSetting}


__all__ = ["PAPER_ROWS", "TABLE_METHODS", "HYPER", "PAPER", "DATASETS", "GhbmSetting", "EXPERIMENTS", "setting",
           "load_task", "client_parts", "final_accuracy", "compute_run", "run_key", "same_run", "run_grid", "grid",
           "table", "tau_rows", "cost_to_reach", "DeviationProbe", "deviation_probe", "deviation_rows",
           "run_experiment", "write_result", "report", "QuadraticSetting", "QUADRATIC_METHODS", "quadratic_run",
           "run_quadratic"]
