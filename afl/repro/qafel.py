"""QAFeL (Ortega & Jafarkhani 2023, ``shared/papers/003_*``): what a message costs, how much each quantizer
errs, a first probe of the hidden state, and the paper's experiments (Tables 1-2, Figure 3) with their
settings (quick and paper scale).

The paper's model is FLSim's SimpleConvNet (``celeba-cnn``, ``variant="fedbuff"``: 29,282 parameters); its
"n-bit qsgd" on CelebA is FLSim's per-tensor min-max channel (``scalar:<n>`` in :mod:`afl.compress`), whose
message sizes are the paper's Table 1 to the byte; its Table 2 server top-k is FLSim's sparse mask channel
(``topk-mask:0.1``, 15.404 kB). ``QafelSetting.quantizer="qsgd"`` runs the rows with the stochastic QSGD of the
paper's Example B.1 instead (what its theory assumes; other message sizes).

Protocol (App. D and the authors' FLSim fork): clients arrive at a constant rate (100 per time unit; Fig. 3:
the rate that gives 100 / 500 / 1000 clients in training), each trains one local epoch of its 1-32 images
(one step of batch 32) for a HalfNormal(1) duration; client lr 4.7e-6, server SGD lr 1000 with momentum 0.3
on the *sum* of a buffer of K = 10 updates; a staleness weight only in Fig. 3 (FLSim's sqrt(2 / (1 + tau)); the
paper's form, 1/sqrt(1 + tau), as ``staleness="sqrt"``). The metric is the number of uploads until the
validation accuracy first reaches the target (90 % on CelebA).

Data: the paper's LEAF CelebA (smiling or not) where the user has it (``dataset="celeba"``: LEAF's 84x84 images
resized to 32x32, one user per celebrity). Offline, ``dataset="cifar10-jpeg"`` is the substitute that keeps
the model and its byte counts exact: CIFAR-10 (the lossy JPEG copy) at 32x32, vehicles vs animals, split into
LEAF-like users of 1-32 images whose images share few original classes (as a person's photos share a face:
Dirichlet(alpha) over the ten original classes); ``dataset="cifar10"`` is the same task on torchvision's CIFAR-10,
which ``afl data download cifar10`` fetches (notebook 03's live race takes it where the mirror's copy is absent).
Every result names the dataset it ran on. A user's local
epoch is one step on a batch of 32 drawn from its shuffled epochs (:mod:`afl.streams`), so users with fewer
than 32 images repeat some of them within the step.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace
from functools import partial as partial_fn
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..algorithms import make_federation, run_algorithm
from ..compress import make_quantizer
from ..budget import MAX_BATCH, MAX_HELD, Work, evaluations, fields_of
from ..checkpoint import checkpointing
from ..data import Dataset, load_dataset, partition as make_partition
from ..engine import PRECISIONS
from ..errors import check, check_choice, check_int, check_real
from ..fleet import Outcome, run_fleet
from ..models import build_model
from ..papers import qafel as paper
from ..plots import style
from ..results import RunProgress
from ..runtime import resolve_device
from ..stats import error_bars, mean_std, paired_ratio, pm
from ..sim import HalfNormal, rate_for_concurrency
from ..sim.speeds import SpeedProfile
from .runner import (MAX_SEEDS, Grid, base_setting, execute, heading, paper_difference, run_tasks, same_settings,
                     saved_config, settings_record, title_tag, with_overrides, write_files)

#: the paper's model, FLSim's SimpleConvNet (with ``variant="fedbuff"``)
MODEL = "celeba-cnn"
#: QAFeL Table 1's message sizes in bytes (paper numbers, shown only as labelled references)
PAPER_BYTES = {"identity": 117128, "scalar:8": 29924, "scalar:4": 15380, "scalar:2": 8108}


def qafel_shapes() -> list[tuple]:
    """Parameter shapes of the paper's model (FLSim SimpleConvNet, 2 classes)."""
    return [tuple(p.shape) for p in build_model(MODEL, num_classes=2, variant="fedbuff").parameters()]


def _model(shapes) -> tuple[list[tuple], int]:
    """``shapes`` (default: the paper's model) and the model's size ``d``."""
    shapes = shapes or qafel_shapes()
    return shapes, sum(math.prod(s) for s in shapes)


def message_bytes(specs, shapes=None) -> dict[str, int]:
    """Bytes of one message of the model with ``shapes`` (default: the paper's) for each quantizer spec."""
    shapes, d = _model(shapes)
    return {spec: make_quantizer(spec, shapes=shapes).nbytes(d) for spec in specs}


def relative_errors(specs, shapes=None, draws: int = 20, seed: int = 12345) -> dict[str, dict]:
    """``||Q(x) - x||^2 / ||x||^2`` of each quantizer, averaged over ``draws`` Gaussian vectors of the model's size
    (their seed differs from the quantizers' own), beside its worst-case ``error_bound``; below 1 means the
    quantizer has a Definition 2.1 parameter ``delta = 1 - bound``."""
    shapes, d = _model(shapes)
    x = torch.randn(draws, d, generator=torch.Generator().manual_seed(seed))
    out = {}
    for spec in specs:
        q = make_quantizer(spec, shapes=shapes)
        err = float((((q.roundtrip(x) - x) ** 2).sum(1) / (x ** 2).sum(1)).mean())
        out[spec] = {"measured": err, "bound": q.error_bound(d), "bits_per_coordinate": q.bits(d) / d}
    return out


#: The probe's methods: name -> (client quantizer, server quantizer, hidden state); None: FedBuff.
PROBE = {
    "fedbuff": (None, None, None),
    "qafel scalar 4/4": ("scalar:4", "scalar:4", True),
    "qafel scalar 2/2": ("scalar:2", "scalar:2", True),
    "no hidden state, scalar 2/2": ("scalar:2", "scalar:2", False),
    "qafel qsgd 4/4": ("qsgd:4", "qsgd:4", True),
    "qafel qsgd 8/2": ("qsgd:8", "qsgd:2", True),
    "qafel qsgd(max, bucket 64) 4/4": ("qsgd:4:norm=max:bucket=64", "qsgd:4:norm=max:bucket=64", True),
}
#: FedBuff's setting in the probe: 20 clients in flight, buffer 10, 5 local steps, staleness weight 1/sqrt(1+tau)
PROBE_SETTING = dict(K=5, lr=0.1, Z=10, concurrency=20, staleness="sqrt", server_time=0.0)


def probe(methods=tuple(PROBE), seeds=(0, 1), total_time: float = 600.0, eval_every: float = 100.0,
          root=None) -> list[Outcome]:
    """FedBuff, QAFeL and the no-hidden-state ablation on IID MNIST (mlp32, 100 clients, batch 32), every
    (method, seed) as one fleet. Not the paper's setting: a quick look at which quantizers keep the hidden state
    on track."""
    data = load_dataset("mnist", root=root, normalize=False)

    def run(name, seed):
        client, server, hidden = PROBE[name]
        fed = make_federation(data, "mlp32", 100, "iid", batch_size=32, seed=seed)
        extra = {} if client is None else dict(client_quantizer=client, server_quantizer=server, hidden_state=hidden)
        out = run_algorithm("fedbuff" if client is None else "qafel", fed, total_time=total_time,
                            eval_every=eval_every, **PROBE_SETTING, **extra)
        return {k: out[k] for k in ("curve", "final_accuracy", "bytes_up", "bytes_down", "server_steps")}
    return run_fleet([((m, s), lambda m=m, s=s: run(m, s)) for m in methods for s in seeds])


def probe_markdown(outcomes: list[Outcome], d: int = 25450) -> str:
    """The probe's table: final accuracy per seed, bytes per message, and each server quantizer's error."""
    shapes = [tuple(p.shape) for p in build_model("mlp32").parameters()]
    lines = ["| method | server quantizer: error on N(0, I) | its bound | final accuracy per seed (%) | "
             "kB/upload | kB/broadcast |", "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(o.key[0] for o in outcomes):
        client, server, _ = PROBE[name]
        acc = " / ".join(f"{100 * o.value['final_accuracy']:.1f}" for o in outcomes if o.key[0] == name)
        up = make_quantizer(client or "identity", shapes=shapes).nbytes(d) / 1000
        if server is None:
            lines.append(f"| {name} | - | - | {acc} | {up:.2f} | - |")
            continue
        e = relative_errors([server], shapes)[server]
        down = make_quantizer(server, shapes=shapes).nbytes(d) / 1000
        lines.append(f"| {name} | {e['measured']:.3g} | {e['bound']:.3g} | {acc} | {up:.2f} | {down:.2f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- the experiments
#: The paper's rows by afl's method names: Table 1 (qsgd bits client/server) and Table 2 (a top-10 % server)
PAPER_ROWS = {"fedbuff": "FedBuff",
              **{f"qafel_c{c}_s{s}": f"client {c}-bit qsgd, server {s}-bit qsgd" for c in (8, 4, 2) for s in (8, 4, 2)},
              **{f"qafel_c{c}_stopk": f"QAFeL (client {c}-bit qsgd)" for c in (8, 4, 2)}}


def _paper_rows(table, column: str, pm: bool) -> dict:
    cells = {m: table[r, column] for m, r in PAPER_ROWS.items() if (r, column) in table.cells}
    return {m: (c.value, c.pm) if pm else c.value for m, c in cells.items()}


#: The paper's Table 1 (uploads to 90 %, thousands, mean ± std over 3 runs), a labelled reference beside ours, read
#: from its transcription (:mod:`afl.papers.qafel`).
PAPER_TABLE1 = _paper_rows(paper.TABLE1, paper.COLUMNS[0], pm=True)
#: The paper's Table 2 (server top-k 10 %; the 2-bit row averages the two runs that reached 90 %).
PAPER_TABLE2 = _paper_rows(paper.TABLE2, paper.COLUMNS[0], pm=True)
#: The paper's message sizes per row (kB/upload, kB/download; Tables 1-2).
PAPER_KB = {m: (up, down) for table in (paper.TABLE1, paper.TABLE2) for (m, up), down in zip(
    _paper_rows(table, paper.COLUMNS[1], pm=False).items(), _paper_rows(table, paper.COLUMNS[2], pm=False).values())}

#: Table 1's rows, then QAFeL's ablation (no hidden state) beside its 4/4 and 2/2 rows
TABLE1_METHODS = ("fedbuff",) + tuple(f"qafel_c{c}_s{s}" for c in (8, 4, 2) for s in (8, 4, 2)) + (
    "nohidden_c4_s4", "nohidden_c2_s2")
TABLE2_METHODS = ("fedbuff", "qafel_c8_stopk", "qafel_c4_stopk", "qafel_c2_stopk")
FIG3_METHODS = ("fedbuff", "qafel_c4_s4")
#: the asynchronous baselines beyond the paper (FedAsync, CA2FL, FADAS) raced on QAFeL's protocol beside FedBuff
#: and QAFeL 4/4 (``qafel-async-family``); their rates where QAFeL's protocol leaves them open are ours
#: (:meth:`QafelSetting.run_kwargs`)
BEYOND_METHODS = ("fedasync", "ca2fl", "fadas")
ASYNC_FAMILY_METHODS = ("fedbuff", "qafel_c4_s4", *BEYOND_METHODS)
_ROW = re.compile(r"^(?:fedbuff|fedasync|ca2fl|fadas|(qafel|nohidden)_c([248])_s([248]|topk))$")
#: CIFAR-10's classes airplane, automobile, bird, cat, deer, dog, frog, horse, ship, truck -> vehicle (1) or not
VEHICLES = (1, 1, 0, 0, 0, 0, 0, 0, 1, 1)
DATASETS = ("cifar10-jpeg", "cifar10", "celeba")


@dataclass(frozen=True)
class QafelSetting:
    """One QAFeL experiment's settings (defaults: the paper's protocol, App. D, on the offline substitute).

    ``users``, ``max_size``, ``alpha``: the substitute's users (sizes uniform in 1..max_size, Dirichlet(alpha)
    mix of the original classes); ``validation``: the first that many test images are the validation set (None:
    all); ``target`` and ``max_uploads``: the accuracy to reach and the budget of uploads to reach it in;
    ``eval_every``: uploads between validations. The paper's target is 90 % on CelebA (``--set dataset=celeba
    --set target=0.9``); on the substitute FedBuff reached 85 % after about 7,250 uploads (80 % after 3,250,
    87 % at 10,000; seed 0, 2,500 users, measured with ``compute_run`` and ``target=0.99`` while choosing it),
    so 85 % leaves the quantized rows room within the budget as 90 % does on CelebA. ``concurrencies``: Fig. 3's
    clients in training (None: arrivals at ``rate``); ``quantizer``: ``"scalar"`` (FLSim's channel, the paper's
    sizes) or ``"qsgd"`` (Example B.1).
    ``dropout``: before the classifier, 0.1 as App. D and FLSim's CelebA config; ``staleness``: Fig. 3's weight,
    FLSim's ``"sqrt-flsim"`` (sqrt(2 / (1 + tau))) or ``"sqrt"`` (1/sqrt(1 + tau), FedBuff's paper form; see
    :data:`afl.algorithms.fedbuff.STALENESS`).
    """

    #: what results saved before a field existed ran with (runner.saved_config): no dropout, FedBuff's weight
    BEFORE = {"dropout": 0.0, "staleness": "sqrt"}

    dataset: str = "cifar10-jpeg"
    users: int = 2500
    max_size: int = 32
    alpha: float = 10.0
    validation: int | None = 2000
    lr: float = 4.7e-6
    batch: int = 32
    server_lr: float = 1000.0
    server_momentum: float = 0.3
    Z: int = 10
    rate: float = 100.0
    duration: float = 1.0
    quantizer: str = "scalar"
    dropout: float = 0.1
    staleness: str = "sqrt-flsim"
    target: float = 0.85
    max_uploads: int = 150_000
    eval_every: int = 500
    seeds: int = 3
    methods: tuple = TABLE1_METHODS
    concurrencies: tuple = (None,)
    precision: str = "fp32"          # the engine's (afl.engine.PRECISIONS); "bf16" is opt-in mixed precision
    fadas_lr: float = 1e-4           # FADAS's server rate (qafel-async-family; ours: the README's sweep)

    def __post_init__(self):
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("dataset", self.dataset, DATASETS)
        check_choice("quantizer", self.quantizer, ("scalar", "qsgd"))
        check_real("dropout", self.dropout, 0, 1, strict_high=True)
        check_choice("staleness", self.staleness, ("sqrt", "sqrt-flsim"))
        check_int("users", self.users, 1, MAX_HELD)
        check_int("max_size", self.max_size, 1, MAX_HELD // self.users,
                  hint=f"images per user at most, users x max_size at most {MAX_HELD:.0e}")
        check_real("alpha", self.alpha, 0, strict_low=True)
        for name in ("lr", "server_lr", "duration", "fadas_lr"):
            check_real(name, getattr(self, name), 0, strict_low=True)
        check_real("server_momentum", self.server_momentum, 0, 1, strict_high=True)
        check_int("batch", self.batch, 1, MAX_BATCH)
        check_int("seeds", self.seeds, 1)
        if self.validation is not None:
            check_int("validation", self.validation, 1)
        check_real("target", self.target, 0, 1, strict_low=True, hint="an accuracy in (0, 1]")
        check_int("max_uploads", self.max_uploads, 1)
        check_int("Z", self.Z, 1, self.max_uploads, hint="uploads a server step waits for, at most max_uploads")
        check_int("eval_every", self.eval_every, 1, self.max_uploads, hint="uploads, at most max_uploads")
        check_real("rate", self.rate, 0, strict_low=True)
        for m in self.methods:
            check(_ROW.match(m) is not None, "methods", m, "fedbuff, qafel_c<bits>_s<bits|topk>, "
                  "nohidden_c<bits>_s<bits> (bits 2, 4 or 8), fedasync, ca2fl or fadas")
        for c in self.concurrencies:
            if c is not None:
                check_int("concurrencies", c, 1, self.users, hint="clients in training, at most users")

    def work(self) -> Work:
        """At most the work of one run: ``max_uploads`` uploads of one local step each, plus the clients still
        training when it ends (at most ``users``), a validation every ``eval_every`` uploads."""
        return Work(self.max_uploads + self.users, evaluations(self.max_uploads, self.eval_every),
                    fields_of(self, "max_uploads", "users"), fields_of(self, "eval_every", "max_uploads"))

    def arrival_rate(self, concurrency: int | None) -> float:
        """Clients per time unit: ``rate``, or the rate giving ``concurrency`` in training (Little's law:
        QAFeL App. D's 125 / 627 / 1253 for 100 / 500 / 1000)."""
        return self.rate if concurrency is None else rate_for_concurrency(concurrency, HalfNormal(self.duration))

    def run_kwargs(self, method: str, concurrency: int | None = None) -> tuple[str, dict]:
        """``method``'s algorithm and its settings in this experiment. FedBuff's server step (``server_lr`` on the
        sum of a buffer of ``Z``) carried over to the baselines beyond the paper (ours): FedAsync mixes each arrival
        in at once and has no server rate, so its clients take that step (``lr x server_lr``; alpha 0.6 and
        s = (tau + 1)^-0.5, its paper's); CA2FL averages its buffer, so its rate is ``Z x server_lr``; FADAS's
        AMSGrad step divides by the update's scale plus eps = 1e-8, which the paper's updates of 1e-8 would
        swamp, so its clients too take ``lr x server_lr``, and its rate is ``fadas_lr``. None has server
        momentum."""
        m = _ROW.match(method)
        check(m is not None, "method", method, "a row of QafelSetting.methods")
        common = dict(K=1, server_time=0.0, arrival_rate=self.arrival_rate(concurrency), concurrency=None)
        if method == "fedasync":
            return "fedasync", common | dict(lr=self.lr * self.server_lr, alpha=0.6, mixing="poly:0.5")
        if method == "ca2fl":
            return "ca2fl", common | dict(lr=self.lr, Z=self.Z, server_lr=self.Z * self.server_lr)
        if method == "fadas":
            return "fadas", common | dict(lr=self.lr * self.server_lr, Z=self.Z, server_lr=self.fadas_lr)
        kw = common | dict(lr=self.lr, Z=self.Z, server_lr=self.server_lr, server_momentum=self.server_momentum,
                           reducer="sum", staleness="none" if concurrency is None else self.staleness)
        if m[1] is None:
            return "fedbuff", kw
        server = "topk-mask:0.1" if m[3] == "topk" else f"{self.quantizer}:{m[3]}"
        return "qafel", kw | dict(client_quantizer=f"{self.quantizer}:{m[2]}", server_quantizer=server,
                                  hidden_state=m[1] == "qafel")


#: Experiments: name -> (paper setting, quick setting). The quick settings (each under 3 minutes on 2 CPU cores)
#: keep the protocol and shrink the rest: 300 users, 500 validation images, 1,000 uploads, a target of 70 % that
#: FedBuff reaches within them, one seed, and in Table 1 the rows that show its trends (client bits against
#: server bits, the ablation). They show the pipeline and the trends' direction, not the paper's numbers.
_QUICK = dict(users=300, validation=500, target=0.7, max_uploads=1000, eval_every=100, seeds=1)
QUICK_TABLE1 = ("fedbuff", "qafel_c8_s8", "qafel_c4_s4", "qafel_c4_s2", "qafel_c2_s4", "qafel_c2_s2",
                "nohidden_c2_s2")
EXPERIMENTS = {
    "qafel-table1": (QafelSetting(), QafelSetting(methods=QUICK_TABLE1, **_QUICK)),
    "qafel-table2": (QafelSetting(methods=TABLE2_METHODS), QafelSetting(methods=TABLE2_METHODS, **_QUICK)),
    "qafel-fig3": (QafelSetting(methods=FIG3_METHODS, concurrencies=(100, 500, 1000)),
                   QafelSetting(methods=FIG3_METHODS, concurrencies=(10, 50, 100), **_QUICK)),
    "qafel-async-family": (QafelSetting(methods=ASYNC_FAMILY_METHODS, seeds=5),
                           QafelSetting(methods=ASYNC_FAMILY_METHODS, **(_QUICK | dict(seeds=5)))),
}


def setting(experiment: str, quick: bool | None = None, **overrides) -> QafelSetting:
    """The paper or quick setting of ``experiment`` (quick by default when ``AFL_QUICK=1``), with overrides."""
    return with_overrides(base_setting(EXPERIMENTS, QafelSetting, experiment, quick, overrides), overrides)


def load_task(cfg: QafelSetting, root=None, device="cpu") -> Dataset:
    """The experiment's binary task at 32x32, normalized as the paper does (mean 0.5, std 0.5 per channel), no
    augmentation, its validation set the first ``cfg.validation`` test images."""
    if cfg.dataset == "celeba":
        data = load_dataset("celeba", root=root, device=device)
        small = lambda x: torch.nn.functional.interpolate(x.float() / 255, size=(32, 32), mode="bilinear",  # noqa
                                                          antialias=True, align_corners=False)
        data = replace(data, train_x=small(data.train_x), test_x=small(data.test_x), name="celeba-32")
    else:
        data = load_dataset(cfg.dataset, root=root, device=device, normalize=False)
        data = data.relabel(VEHICLES, name=f"{cfg.dataset} vehicles vs animals")
    n = data.n_test if cfg.validation is None else check_int(
        "validation", cfg.validation, 1, data.n_test, hint=f"at most the {data.n_test} test images, or None for all")
    return replace(data, train_x=data.train_x * 2 - 1, test_x=data.test_x[:n] * 2 - 1, test_y=data.test_y[:n],
                   test_groups=None, mean=None, std=None, augment=None)


def user_parts(cfg: QafelSetting, data: Dataset, seed: int) -> list[Tensor]:
    """The users' sample indices: LEAF's users (CelebA: one per celebrity) or the substitute's LEAF-like ones."""
    if cfg.dataset == "celeba":
        return make_partition("by_group", data.train_groups.cpu())
    sizes = np.random.default_rng([seed, 1549775860]).integers(1, cfg.max_size + 1, cfg.users)
    labels = data.info.get("original_train_y", data.train_y).cpu()
    return make_partition("sized", labels, seed=seed, sizes=sizes, alpha=cfg.alpha)


def compute_run(cfg: QafelSetting, method: str, concurrency: int | None, seed: int, *, dataset=None,
                device="cpu", root=None, learner_class=None, checkpoints=None) -> dict:
    """One seeded run of ``method``: stopped when the validation accuracy first reaches ``cfg.target`` (else at
    ``cfg.max_uploads``); its curve against uploads, uploads to target and message sizes. ``learner_class``: an
    instrumented subclass of the method's learner (a probe: :func:`afl.algorithms.run_algorithm`). ``checkpoints``:
    a folder where the run saves its state as it goes and from which it goes on (:mod:`afl.checkpoint`)."""
    algorithm, kw = cfg.run_kwargs(method, concurrency)
    data = dataset if dataset is not None else load_task(cfg, root=root, device=device)
    parts = user_parts(cfg, data, seed)
    profile = SpeedProfile(["all"], np.zeros(len(parts), dtype=int), [HalfNormal(cfg.duration)])
    fed = make_federation(data, MODEL, len(parts), batch_size=cfg.batch, profile=profile, seed=seed,
                          device=device, parts=parts, model_kw=dict(variant="fedbuff", dropout=cfg.dropout),
                          precision=cfg.precision)
    rate = kw["arrival_rate"]
    out = run_algorithm(algorithm, fed, total_time=cfg.max_uploads / rate, eval_every=cfg.eval_every / rate,
                        target=cfg.target, allow_large=True,   # the work was checked for the grid: runner.execute
                        learner_class=learner_class, **kw, **checkpointing(checkpoints, concurrency, method, seed))
    out.pop("schedule")
    out.pop("model")
    d = fed.init.numel()
    up = make_quantizer(kw.get("client_quantizer", "identity"), shapes=fed.engine.model.shapes).bits(d) / 8000
    down = make_quantizer(kw.get("server_quantizer", "identity"), shapes=fed.engine.model.shapes).bits(d) / 8000
    reached = out["target_reached_at"]
    uploads = out["curve"]["uploads"]
    out.update(method=method, algorithm=algorithm, concurrency=concurrency, seed=seed, dataset=data.name,
               settings=settings_record(out["settings"]), kb_per_upload=up, kb_per_download=down,
               uploads_to_target=uploads[-1] if reached is not None else None,
               broadcasts_to_target=out["curve"]["server_steps"][-1] if reached is not None else None)
    return out


def channel_errors(run: dict) -> dict:
    """A QAFeL run's channel errors between its curve's points (:mod:`afl.algorithms.qafel`'s counters):
    ``uploads`` (each window's end), ``upload`` (the mean of ``|Q_c(Delta) - Delta|^2 / |Delta|^2`` over the
    window's uploads), ``buffer`` (the mean over its server steps of the buffer sum's relative error) and, where
    the run recorded them (afl since the server channel's counters), ``broadcast`` (the mean relative error of
    its broadcasts) and ``gap`` (the mean of ``|x - x_hat|^2`` in squared server steps), and where it recorded that
    too, ``lag`` (the mean of the gap's part along the last server step, in steps)."""
    c = run["curve"]
    check("upload_error" in c, "run", run.get("method"), "a QAFeL run (its curve holds the channel's errors)")
    ups, steps = np.diff(c["uploads"]), np.diff(c["server_steps"])
    keep = (ups > 0) & (steps > 0)
    per_step = {name: key for name, key in (("broadcast", "broadcast_error"), ("gap", "hidden_gap"),
                                            ("lag", "hidden_lag")) if key in c}
    return {"uploads": list(np.asarray(c["uploads"][1:])[keep]),
            "upload": list(np.diff(c["upload_error"])[keep] / ups[keep]),
            "buffer": list(np.diff(c["buffer_error"])[keep] / steps[keep]),
            **{name: list(np.diff(c[key])[keep] / steps[keep]) for name, key in per_step.items()}}


def window_means(curve: dict, start: int, stop: int, width: int, key: str = "accuracy") -> list[float | None]:
    """The mean of ``curve[key]`` over the evaluations in each window ``(a, a + width]`` of uploads, ``a`` from
    ``start`` to ``stop``; None where the run had stopped (no evaluation in it)."""
    uploads, values = np.asarray(curve["uploads"]), np.asarray(curve[key], dtype=float)
    out = []
    for a in range(start, stop, width):
        inside = (uploads > a) & (uploads <= a + width)
        out.append(float(values[inside].mean()) if inside.any() else None)
    return out


def curve_agreement(run: dict, committed: dict | None, keys=("accuracy", "uploads"),
                    shown=("accuracy",)) -> dict | None:
    """Whether ``run``'s curve is ``committed``'s in ``keys`` up to ``run``'s end (``same``, ``points``), else where
    they first part (``first_different_uploads``, and the two runs' values of ``shown`` there); None without a
    committed run."""
    if committed is None:
        return None
    mine, theirs = run["curve"], committed["curve"]
    n = len(mine["time"])
    for i in range(min(n, len(theirs["time"]))):
        if any(mine[k][i] != theirs[k][i] for k in keys):
            return {"same": False, "first_different_uploads": mine["uploads"][i],
                    **{k: [mine[k][i], theirs[k][i]] for k in shown}}
    return {"same": n <= len(theirs["time"]), "points": n}


def run_key(run: dict) -> tuple:
    """What identifies a run within an experiment: (concurrency, method, seed)."""
    return run["concurrency"], run["method"], run["seed"]


def same_run(run: dict, cfg: QafelSetting) -> bool:
    """Whether a saved run is what ``cfg`` computes now (its method's settings unchanged)."""
    if _ROW.match(run["method"]) is None:
        return False
    algorithm, kw = cfg.run_kwargs(run["method"], run["concurrency"])
    return same_settings(run.get("settings"), algorithm, **kw)


def run_grid(cfg: QafelSetting, keys: list[tuple], *, device="cpu", root=None, fleet: bool = True,
             fleet_size: int | None = None, on_outcome=None, checkpoints=None) -> list[Outcome]:
    """The runs ``keys`` ((concurrency, method, seed) each) of ``cfg`` on one machine, as a fleet or one by one."""
    data = load_task(cfg, root=root, device=device)
    tasks = [(key, partial_fn(compute_run, cfg, key[1], key[0], key[2], dataset=data, device=device,
                              checkpoints=checkpoints)) for key in keys]
    return run_tasks(tasks, fleet=fleet, fleet_size=fleet_size, on_outcome=on_outcome)


def probe_runs(cfg: QafelSetting, runs: list[tuple], *, device="cpu", root=None) -> list[dict]:
    """A probe's runs of ``cfg`` as one fleet, with a progress bar: ``runs`` lists ``(key, method, seed,
    learner_class)`` (:func:`compute_run`, no concurrency sweep; ``learner_class`` None for the method's own);
    their results in order, or the first failure raised."""
    data = load_task(cfg, root=root, device=device)
    tasks = [(key, partial_fn(compute_run, cfg, method, None, seed, dataset=data, device=device,
                              learner_class=learner)) for key, method, seed, learner in runs]
    with RunProgress(len(tasks), description="fleet", at_most=True) as bar:
        outcomes = run_tasks(tasks, on_outcome=lambda outcome: bar.finished(outcome.key))
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise failed[0].error
    return [o.value for o in outcomes]


def grid(cfg: QafelSetting, *, seeds: int | None = None, device="cpu", root=None, fleet: bool = True,
         fleet_size: int | None = None, name: str = "qafel") -> Grid:
    """Every (concurrency, method, seed) of ``cfg`` as a :class:`~afl.repro.runner.Grid` named ``name``."""
    seeds = cfg.seeds if seeds is None else check_int("seeds", seeds, 1, MAX_SEEDS)
    keys = [(c, m, s) for s in range(seeds) for c in cfg.concurrencies for m in cfg.methods]
    work = partial_fn(run_grid, cfg, device=str(device), root=root, fleet=fleet, fleet_size=fleet_size)
    return Grid(name, replace(cfg, seeds=seeds), keys, work, run_key, partial_fn(same_run, cfg=cfg),
                ("seeds", "methods", "concurrencies"), checkpoints=True)


def table(runs: list[dict]) -> dict:
    """``{row: {...}}`` per (method, concurrency): uploads to target in thousands (mean, std and per seed over
    the seeds that reached it, as the paper counts its 2-bit row), how many seeds reached it, kB per upload and
    per download, and MB uploaded and broadcast until then (mean over those seeds; one broadcast per server
    step, as the paper's Fig. 3 counts it)."""
    rows: dict = {}
    for r in runs:
        key = r["method"] if r["concurrency"] is None else f"{r['method']}@{r['concurrency']}"
        rows.setdefault(key, []).append(r)
    out = {}
    for key, rs in rows.items():
        hit = [r for r in rs if r["uploads_to_target"] is not None]
        k_up = [r["uploads_to_target"] / 1000 for r in hit]
        mb_up = [r["uploads_to_target"] * r["kb_per_upload"] / 1000 for r in hit]
        mb_down = [r["broadcasts_to_target"] * r["kb_per_download"] / 1000 for r in hit]
        mean, std = mean_std(k_up)
        out[key] = {"method": rs[0]["method"], "concurrency": rs[0]["concurrency"],
                    "uploads_to_target": {"mean": mean, "std": std, "per_seed": [
                        None if r["uploads_to_target"] is None else r["uploads_to_target"] / 1000 for r in rs]},
                    "reached": len(hit), "seeds": len(rs),
                    "best_accuracy": [max(a for a in r["curve"]["accuracy"]) for r in rs],
                    "kb_per_upload": rs[0]["kb_per_upload"], "kb_per_download": rs[0]["kb_per_download"],
                    "mb_uploaded": mean_std(mb_up)[0], "mb_broadcast": mean_std(mb_down)[0]}
    return out




def table_markdown(rows: dict, paper: dict | None = None) -> str:
    """Our uploads to target (thousands) and message sizes per row, beside the paper's (labelled)."""
    lines = ["| row | uploads to target (k, ours) | reached | uploads (k, paper) | kB/upload (ours / paper) | "
             "kB/download (ours / paper) | MB up | MB broadcast |", "|---|---|---|---|---|---|---|---|"]
    for key, r in rows.items():
        u = r["uploads_to_target"]
        ours = pm(u["mean"], u["std"], 2)
        p = (paper or {}).get(key)
        kb = [f"{v:.3f}" for v in PAPER_KB[r["method"]]] if r["method"] in PAPER_KB else ["–", "–"]
        mb = lambda v: "–" if v is None else f"{v:.1f}"  # noqa: E731
        lines.append(f"| {key} | {ours} | {r['reached']}/{r['seeds']} | {'–' if p is None else f'{p[0]} ± {p[1]}'} "
                     f"| {r['kb_per_upload']:.3f} / {kb[0]} | {r['kb_per_download']:.3f} / {kb[1]} "
                     f"| {mb(r['mb_uploaded'])} | {mb(r['mb_broadcast'])} |")
    return "\n".join(lines)


def paired_ratios(rows: dict, paper: dict | None = None) -> str:
    """Each row's uploads to the target over FedBuff's at the same concurrency, paired by seed (a seed where
    either never reached is left out): the geometric mean of the per-seed ratios with its 95 % t interval
    (:func:`afl.stats.paired_ratio`), beside the paper's ratio of means (a reference: its ± over 3 runs makes
    that ratio uncertain too, e.g. 4/4's 27.8 ± 10.4 k over 26.1 ± 6.7 k is 1.07 with a standard error near 0.3).
    What a reader may conclude: a row is slower than FedBuff where the whole interval lies above 1."""
    lines = ["Uploads to the target over FedBuff's, paired by seed (geometric mean, 95 % t interval; pairs: seeds "
             "where both reached):", "", "| row | ratio (ours) | 95 % interval | pairs | paper ratio of means | "
             "reading |", "|---|---|---|---|---|---|"]
    for key, r in rows.items():
        base = "fedbuff" if r["concurrency"] is None else f"fedbuff@{r['concurrency']}"
        if r["method"] == "fedbuff" or base not in rows:
            continue
        q = paired_ratio(r["uploads_to_target"]["per_seed"], rows[base]["uploads_to_target"]["per_seed"])
        p = (paper or {}).get(key)
        ref = f"{p[0] / paper['fedbuff'][0]:.2f}" if p and "fedbuff" in paper else "–"
        if q["low"] is None:
            interval, reading = "–", "too few pairs"
        else:
            interval = f"{q['low']:.2f} – {q['high']:.2f}"
            reading = ("slower than FedBuff" if q["low"] > 1 else "faster than FedBuff" if q["high"] < 1
                       else "not told apart from FedBuff")
        ratio = "–" if q["ratio"] is None else f"{q['ratio']:.2f}"
        lines.append(f"| {key} | {ratio} | {interval} | {q['n']}/{r['seeds']} | {ref} | {reading} |")
    return "\n".join(lines)


def paper_reference(experiment: str) -> dict | None:
    return {"qafel-table1": PAPER_TABLE1, "qafel-table2": PAPER_TABLE2}.get(experiment)


def label(method: str) -> str:
    """A row's legend label (FedBuff here at full precision, as QAFeL's baseline)."""
    return "FedBuff (float32 both ways)" if method == "fedbuff" else style(method)["label"]


def plot_result(result: dict, fig) -> None:
    """Accuracy against uploads per row (every seed; the dotted line is the target), and uploads and MB to the
    target per row (mean ± std over the seeds that reached it)."""
    runs, rows, cfg = result["runs"], result["rows"], saved_config(QafelSetting, result["config"])
    ax_curve, ax_up, ax_mb = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[1.3, 1, 1]))
    shown = set()
    markers = dict(zip(dict.fromkeys(r["concurrency"] for r in runs), "os^Dv"))   # one marker per concurrency
    for r in runs:
        st = style(r["method"])
        name = label(r["method"]) + ("" if r["concurrency"] is None else f", concurrency {r['concurrency']}")
        ax_curve.plot(np.asarray(r["curve"]["uploads"]) / 1000, 100 * np.asarray(r["curve"]["accuracy"]),
                      color=st["color"], linestyle=st["linestyle"], label=None if name in shown else name, lw=1.2,
                      marker=None if r["concurrency"] is None else markers[r["concurrency"]], markersize=3)
        shown.add(name)
    ax_curve.axhline(100 * cfg["target"], color="black", linestyle=":", lw=1)
    ax_curve.set(xlabel="uploads (thousands)", ylabel="validation accuracy (%)",
                 title=f"accuracy until the target ({100 * cfg['target']:.0f} %, dotted)")
    ax_curve.legend(fontsize=6)
    keys = list(rows)
    x = np.arange(len(keys))
    colors = [style(rows[k]["method"])["color"] for k in keys]
    up = [rows[k]["uploads_to_target"]["mean"] or 0 for k in keys]
    err = error_bars(rows[k]["uploads_to_target"]["std"] for k in keys)
    ax_up.bar(x, up, yerr=err, color=colors, capsize=2)
    for i, k in enumerate(keys):
        if rows[k]["reached"] < rows[k]["seeds"]:
            ax_up.text(i, up[i], f"{rows[k]['reached']}/{rows[k]['seeds']}", ha="center", va="bottom", fontsize=7)
    seeds = max(r["seeds"] for r in rows.values())
    ax_up.set(ylabel="uploads to target (thousands)",
              title=f"uploads to target\n(mean ± std over the seeds that reached it; k/{seeds}: how many did)"
              if seeds > 1 else "uploads to target (one seed)")
    w = 0.4
    ax_mb.bar(x - w / 2, [rows[k]["mb_uploaded"] or 0 for k in keys], w, color=colors, label="uploaded")
    ax_mb.bar(x + w / 2, [rows[k]["mb_broadcast"] or 0 for k in keys], w, color=colors, hatch="//",
              alpha=0.6, label="broadcast (hatched)")
    ax_mb.set(ylabel="MB until the target", title="communication to target (none: not reached)")
    if any(rows[k]["mb_uploaded"] for k in keys):
        ax_mb.set_yscale("log")
    ax_mb.legend(fontsize=7)
    for ax in (ax_up, ax_mb):
        ax.set_xticks(x, [k.replace("qafel_", "").replace("nohidden_", "nohid ") for k in keys], rotation=60,
                      fontsize=7)


def run_experiment(experiment: str, *, quick: bool = False, seeds: int | None = None, out="results",
                   root=None, device="cpu", progress: bool = True, fresh: bool = False, reuse=(),
                   fleet: bool = True, fleet_size: int | None = None, ray: str | None = None,
                   processes: int | None = None,
                   allow_large: bool = False, **overrides) -> list[Path]:
    """Compute a QAFeL experiment and write ``OUT/<experiment>.json``, ``.md`` and ``.png`` (as
    :func:`afl.repro.favas.run_experiment`: saved as runs end, resumed, reused, fleet or Ray)."""
    cfg = setting(experiment, quick=quick, **overrides)
    dev = resolve_device(device)
    g = grid(cfg, seeds=seeds, device=dev, root=root, fleet=fleet, fleet_size=fleet_size, name=experiment)
    done = execute(g, out=out, quick=quick, seeds=seeds, fresh=fresh, reuse=reuse, progress=progress, fleet=fleet,
                   fleet_size=fleet_size, ray=ray, processes=processes, device=dev, overrides=overrides,
                   allow_large=allow_large)
    paper = paper_reference(experiment)
    return done.publish({
        "dataset": done.runs[0]["dataset"], "rows": table(done.runs),
        "paper": None if paper is None else {k: {"mean": v[0], "std": v[1]} for k, v in paper.items()},
        "paper_kb": PAPER_KB}, out, write_result)


def write_result(result: dict, out, write_json: bool = True) -> list[Path]:
    """Write ``OUT/<experiment>.json`` (unless ``write_json`` is False), its markdown report and its figure, the
    summary rows computed from the runs (:func:`table`)."""
    return write_files(result | {"rows": table(result["runs"])}, out, report, figure, write_json)


def figure(result: dict):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(16, 5))
    plot_result(result, fig)
    cfg = saved_config(QafelSetting, result["config"])
    fig.suptitle(f"{result['experiment']}{title_tag(result)} on {result['dataset']}: "
                 f"{cfg['users']} users, {cfg['seeds']} seed{'s' * (cfg['seeds'] > 1)}, quantizer family "
                 f"{cfg['quantizer']}")
    fig.tight_layout()
    return fig


def report(result: dict, per_run: bool = True) -> str:
    """The markdown of a QAFeL result: command, machine, dataset, the table beside the paper's, and per run."""
    cfg, runs = saved_config(QafelSetting, result["config"]), result["runs"]
    notes = [f"Dataset: **{result['dataset']}**" + (" (the offline substitute for CelebA; the paper's numbers are "
             "CelebA's and only a reference)" if cfg["dataset"] != "celeba" else "") + "."]
    if result["quick"]:
        notes.append("QUICK setting: not comparable with the paper's numbers.")
        ran = {k: cfg[k] for k in QafelSetting.BEFORE if cfg[k] != getattr(QafelSetting, k)}
        if ran:
            notes.append("Ran with " + ", ".join(f"{k} = {v}" for k, v in ran.items()) + " (the paper's: " + ", ".join(
                f"{k} = {getattr(QafelSetting, k)}" for k in ran) + ").")
    elif difference := paper_difference(EXPERIMENTS[result["experiment"]][0], cfg, ("seeds", "methods")):
        notes.append(difference)
    notes.append(f"Target: {100 * cfg['target']:.0f} % validation accuracy ({cfg['validation'] or 'all'} test "
                 f"images) within {cfg['max_uploads']:,} uploads, checked every {cfg['eval_every']} uploads.")
    lines = heading(result) + [" ".join(notes), "",
             table_markdown(result["rows"], paper_reference(result["experiment"])), "",
             paired_ratios(result["rows"], paper_reference(result["experiment"]))]
    if per_run:
        lines += ["", "| row | concurrency | seed | uploads to target | best acc. (%) | uploads run | wall s |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['method']} | {r['concurrency'] or '–'} | {r['seed']} | {r['uploads_to_target'] or '–'} | "
                  f"{100 * max(r['curve']['accuracy']):.1f} | {r['uploads']} | {r['wall_seconds']:.0f} |" for r in runs]
    return "\n".join(lines)


def main() -> None:
    """``python -m afl.repro.qafel``: run the probe and print its table (about 10 s on 2 CPU cores)."""
    t0 = time.perf_counter()
    outcomes = probe()
    print(f"{len(outcomes)} runs as one fleet in {time.perf_counter() - t0:.0f} s\n")
    print(probe_markdown(outcomes))


if __name__ == "__main__":
    main()


__all__ = ["PAPER_BYTES", "qafel_shapes", "message_bytes", "relative_errors", "PROBE", "PROBE_SETTING",
           "probe", "probe_markdown", "PAPER_TABLE1", "PAPER_TABLE2", "PAPER_KB", "TABLE1_METHODS", "TABLE2_METHODS",
           "FIG3_METHODS", "QafelSetting", "EXPERIMENTS", "setting", "load_task", "user_parts", "compute_run",
           "run_key", "same_run", "run_grid", "grid", "table", "table_markdown", "plot_result", "run_experiment",
           "write_result", "report"]
