"""Federated algorithms: each a learner (what is trained, sent and aggregated) on a simulator protocol.

Every algorithm is registered by name with its settings dataclass (defaults from its paper), its learner and
its protocol (:mod:`afl.algorithms.registry`); :func:`run_algorithm` is the one entry point.

>>> fed = make_federation("mnist", "mlp32", n_clients=100, partition="shards", slow_fraction=1/3, seed=0)  # doctest: +SKIP
>>> out = run_algorithm("favas", fed, total_time=5000, eval_every=100, K=20, lr=0.5, s=20)                 # doctest: +SKIP
"""
from __future__ import annotations

import math

import torch

from ..budget import Work, busy_clients_work, check_work, evaluations
from ..checkpoint import EVERY_S, RunCheckpoint
from ..data import load_dataset, partition as make_partition
from ..engine import LocalSGD
from ..errors import check
from ..jobs import JobQueue
from ..models import build_model
from ..sim.speeds import SpeedProfile, two_speed
from ..streams import ClientStreams
from . import (ca2fl, fadas, feddyn, favas, fedasync, fedavg, fedbuff, fedcm, fedprox, ghbm, mime,  # noqa: F401
               qafel, quafl, scaffold)  # each registers its algorithms
from .base import Federation, History, Learner, Settings, TargetReached
from .registry import REGISTRY, Algorithm, get, register, synchronous
from .state import ClientState

ALGORITHMS = tuple(REGISTRY)


def make_federation(dataset, model: str, n_clients: int, partition: str = "iid", *, batch_size: int = 128,
                    profile: SpeedProfile | None = None, slow_fraction: float = 1 / 3, seed: int = 0,
                    device="cpu", root=None, partition_kw: dict | None = None,
                    dataset_kw: dict | None = None, model_kw: dict | None = None, dtype: torch.dtype | None = None,
                    strategy: str = "auto", parts: list | None = None, precision: str = "fp32") -> Federation:
    """Clients holding parts of ``dataset`` (a name or a :class:`~afl.data.Dataset`), one model, seeded speeds.

    ``profile`` defaults to FAVAS's two speed classes (exponential step times of mean 2 and 8, a fraction
    ``slow_fraction`` of slow clients assigned at random). One ``seed`` fixes partition, initial model, speed
    classes, mini-batch streams and schedule. ``dtype``: train in another float type (tests compare with their
    oracles in float64); ``strategy`` and ``precision``: the engine's (:mod:`afl.strategies`,
    :data:`afl.engine.PRECISIONS`). ``parts``: the clients' sample indices, computed elsewhere (then ``partition``
    is not used).
    """
    data = (load_dataset(dataset, root=root, device=device, **(dataset_kw or {})) if isinstance(dataset, str)
            else dataset.to(device))
    if dtype is not None:
        data = data.to(device, dtype=dtype)
    if parts is None:
        parts = make_partition(partition, data.train_y.cpu(), n_clients, seed=seed, **(partition_kw or {}))
    check(len(parts) == n_clients, "parts", f"{len(parts)} clients", f"n_clients = {n_clients} index sets")
    module = build_model(model, num_classes=data.num_classes, seed=seed, **(model_kw or {}))
    if dtype is not None:
        module = module.to(dtype)
    engine = LocalSGD(module, data, batch_size, strategy=strategy, precision=precision)
    queue = JobQueue(engine, ClientStreams(parts, batch_size, seed=seed, noise=engine.augment), seed=seed)
    profile = profile or two_speed(n_clients, slow_fraction=slow_fraction, seed=seed)
    return Federation(queue, profile, engine.model.flatten().to(engine.device), seed=seed)


def run_algorithm(name: str, fed: Federation, *, total_time: float, eval_every: float, target: float | None = None,
                  learner_class=None, checkpoint=None, checkpoint_every: float = EVERY_S, allow_large: bool = False,
                  **settings) -> dict:
    """Train with algorithm ``name`` for ``total_time`` simulated time units; return its history as a dict.

    ``settings``: the algorithm's own (``afl.algorithms.get(name).settings``, e.g. ``K``, ``lr``, ``s``, ``Z``,
    ``concurrency``, ``reweighting``...); the rest keep their paper defaults, and a key the algorithm does not
    have is an error that lists the allowed ones. The returned dict holds the evaluation grid (``time``,
    ``accuracy``, ``loss``, counters) plus ``client_steps``, ``wall_seconds``, ``client_steps_per_s``, the
    ``schedule`` (timeline and contacts), the final ``model`` and the ``settings`` used. With a ``target``
    accuracy the run stops at the first evaluation that reaches it (``target_reached_at``; ``schedule`` None).
    ``learner_class``: a subclass of the algorithm's learner to run instead (an instrumented run, e.g. the GHBM
    paper's Fig. 1 probe); the returned dict holds it as ``learner``. ``checkpoint``: a file path; the run saves
    its state there every ``checkpoint_every`` seconds of wall time and, started again with the same path, goes
    on from it (:mod:`afl.checkpoint`; at a round's end, or between two events of an event-driven schedule). The
    file is deleted when the run ends. A run estimated above :data:`afl.budget.MAX_CLIENT_STEPS` or
    :data:`~afl.budget.MAX_EVALUATIONS` (:func:`run_work`) is refused unless ``allow_large``.
    """
    algo = get(name)
    fed.restart()
    history = History(fed.queue, eval_every, total_time, target=target)
    cfg = algo.make_settings(**settings)
    cfg.check_federation(fed)
    check_work(run_work(algo, cfg, fed, total_time, eval_every), allow_large, "allow_large=True")
    if learner_class is not None:
        check(issubclass(learner_class, algo.learner), "learner_class", learner_class.__name__,
              f"a subclass of {name}'s learner {algo.learner.__name__}")
    learner = (learner_class or algo.learner)(fed, history, cfg)
    saving = {}
    if checkpoint is not None:
        saving["checkpoint"] = RunCheckpoint(checkpoint, run_identity(name, cfg, fed, total_time, eval_every, target),
                                             checkpoint_every)
    try:
        schedule = algo.protocol(fed, cfg, learner, total_time, **saving)
        learner.finish()
    except TargetReached:
        schedule = None
    if saving:
        saving["checkpoint"].discard()
    fed.queue.cancel_jobs()              # clients still training when the time ran out: never needed
    out = history.to_dict()
    out["schedule"] = schedule
    out["model"] = learner.w
    out["settings"] = cfg
    if learner_class is not None:
        out["learner"] = learner
    return out


def run_work(algo: Algorithm, cfg: Settings, fed: Federation, total_time: float, eval_every: float) -> Work:
    """At most how many client steps and evaluations a run computes: ``s`` clients of ``K`` steps a round on
    unit-time rounds; otherwise every client training without a pause (:func:`afl.budget.busy_clients_work`)."""
    if algo.protocol is synchronous and getattr(cfg, "timing", None) == "rounds":
        rounds = math.ceil(total_time) if math.isfinite(total_time) else math.inf
        return Work(rounds * cfg.s * cfg.K, evaluations(total_time, eval_every), {"total_time": total_time},
                    {"eval_every": eval_every, "total_time": total_time})
    return busy_clients_work(fed.profile.mean_step_times(), total_time, eval_every)


def run_identity(name: str, cfg: Settings, fed: Federation, total_time: float, eval_every: float,
                 target: float | None) -> dict:
    """What makes a run this run, for its checkpoint: the algorithm and its settings, the budget, and the
    federation (seed, clients' data sizes, batch size, initial model)."""
    return dict(algorithm=name, settings=repr(cfg), total_time=float(total_time), eval_every=float(eval_every),
                target=target, seed=fed.seed, sizes=[len(p) for p in fed.queue.streams.parts],
                batch=fed.queue.streams.batch_size, init=[fed.init.numel(), float(fed.init.double().sum())])


__all__ = ["ALGORITHMS", "REGISTRY", "ClientState", "Federation", "History", "Learner", "Settings", "TargetReached",
           "get", "register", "make_federation", "run_algorithm", "run_work"]
