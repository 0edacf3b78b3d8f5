"""Federated algorithms: each a learner (what is trained, sent and aggregated) on a simulator protocol.

>>> fed = make_federation("mnist", "mlp32", n_clients=100, partition="shards", slow_fraction=1/3, seed=0)  # doctest: +SKIP
>>> out = run_algorithm("favas", fed, K=20, lr=0.5, s=20, total_time=5000, eval_every=100)                # doctest: +SKIP
"""
from __future__ import annotations

from ..data import load_dataset, partition as make_partition
from ..engine import LocalSGD
from ..compress import make_quantizer, quantized_interval
from ..errors import check, check_choice, check_real
from ..jobs import JobQueue
from ..models import build_model
from ..sim.schedule import simulate_async_schedule, simulate_buffered_schedule, simulate_sync_schedule
from ..sim.speeds import SpeedProfile, two_speed
from ..streams import ClientStreams
from .base import Federation, History, Learner
from .fedavg import FedAvg
from .fedbuff import FedBuff
from .favas import Favas
from .quafl import QuAFL

ALGORITHMS = ("fedavg", "quafl", "fedbuff", "favas")


def make_federation(dataset, model: str, n_clients: int, partition: str = "iid", *, batch_size: int = 128,
                    profile: SpeedProfile | None = None, slow_fraction: float = 1 / 3, seed: int = 0,
                    device="cpu", root=None, partition_kw: dict | None = None,
                    dataset_kw: dict | None = None, model_kw: dict | None = None) -> Federation:
    """Clients holding parts of ``dataset`` (a name or a :class:`~afl.data.Dataset`), one model, seeded speeds.

    ``profile`` defaults to FAVAS's two speed classes (exponential step times of mean 2 and 8, a fraction
    ``slow_fraction`` of slow clients assigned at random). One ``seed`` fixes partition, initial model, speed
    classes, mini-batch streams and schedule.
    """
    data = (load_dataset(dataset, root=root, device=device, **(dataset_kw or {})) if isinstance(dataset, str)
            else dataset.to(device))
    parts = make_partition(partition, data.train_y.cpu(), n_clients, seed=seed, **(partition_kw or {}))
    module = build_model(model, num_classes=data.num_classes, seed=seed, **(model_kw or {}))
    engine = LocalSGD(module, data, batch_size)
    queue = JobQueue(engine, ClientStreams(parts, batch_size, seed=seed), seed=seed)
    profile = profile or two_speed(n_clients, slow_fraction=slow_fraction, seed=seed)
    return Federation(queue, profile, engine.model.flatten().to(engine.device), seed=seed)


def run_algorithm(name: str, fed: Federation, *, K: int, lr: float, total_time: float, eval_every: float,
                  s: int = 20, server_interval: float = 10.0, server_time: float = 10.0, Z: int = 10,
                  mode: str = "deterministic", server_lr: float = 1.0, staleness: str = "none",
                  track_variance: bool = False, quantizer=None, scale_interval_by_bits: bool = False) -> dict:
    """Train with algorithm ``name`` for ``total_time`` simulated time units; return its history as a dict.

    FAVAS, QuAFL: the server contacts ``s`` clients every ``server_interval``. FedBuff: a server step per ``Z``
    delivered updates, each taking ``server_time``. FedAvg: rounds of ``s`` clients, each ending ``server_time``
    after its slowest client. The returned dict holds the evaluation grid (``time``, ``accuracy``, ``loss``,
    counters) plus ``client_steps``, ``wall_seconds``, ``client_steps_per_s`` and the ``schedule`` (timeline).

    ``quantizer`` (QuAFL only): None (full precision, the default) or a :class:`afl.compress.Quantizer` or spec
    (``"lattice:14:1e-4"``, ``"qsgd:8"``, ...) for quantized uploads and broadcasts, bytes counted exactly
    (:mod:`afl.algorithms.quafl`). ``scale_interval_by_bits``: with a quantizer, run the server clock at
    :func:`afl.compress.quantized_interval` ``(server_interval, quantizer)`` = ``server_interval * bits / 32``,
    the QuAFL notebooks' time model (there the whole interval is interaction time; for a waiting part, compute
    the interval with ``quantized_interval(sit, q, waiting_time=swt)`` and pass it as ``server_interval``).
    """
    check_choice("algorithm", name, ALGORITHMS)
    if quantizer is not None:
        check(name == "quafl", "quantizer", quantizer, "None unless algorithm='quafl'")
        quantizer = make_quantizer(quantizer, seed=fed.seed)
        if scale_interval_by_bits:
            server_interval = quantized_interval(check_real("server_interval", server_interval, 0, strict_low=True),
                                                 quantizer)
    history = History(fed.queue, eval_every, total_time)
    common = dict(K=K, t_end=total_time, seed=fed.seed)
    if name in ("favas", "quafl"):
        learner = (Favas(fed, history, K, lr, s, server_interval, mode=mode, track_variance=track_variance)
                   if name == "favas" else
                   QuAFL(fed, history, K, lr, s, track_variance=track_variance, quantizer=quantizer))
        schedule = simulate_async_schedule(fed.profile, s=s, server_interval=server_interval, learner=learner, **common)
    elif name == "fedbuff":
        learner = FedBuff(fed, history, K, lr, Z=Z, server_lr=server_lr, staleness=staleness)
        schedule = simulate_buffered_schedule(fed.profile, Z=Z, server_time=server_time, learner=learner, **common)
    else:
        learner = FedAvg(fed, history, K, lr)
        schedule = simulate_sync_schedule(fed.profile, s=s, server_time=server_time, learner=learner, **common)
    learner.finish()
    out = history.to_dict()
    out["schedule"] = schedule
    out["model"] = learner.w
    return out


__all__ = ["ALGORITHMS", "Federation", "History", "Learner", "FedAvg", "FedBuff", "Favas", "QuAFL",
           "make_federation", "run_algorithm"]
