"""Benchmark: vectorized local SGD against a per-client loop written the way the papers' codes train.

The reference trains one client after another: ``copy.deepcopy`` of the model, a ``DataLoader`` over the
client's ``Subset`` of a dataset that yields PIL images through torchvision's usual transforms
(ToTensor + Normalize; RandomCrop + flip for CIFAR), ``torch.optim.SGD``. The engine runs the same
clients, steps and batch size through :class:`afl.jobs.JobQueue` (mini-batch sampling included).
FLOPs come from ``torch.utils.flop_counter``; the peak is a matmul in the engine's precision, measured in the
same run.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import multiprocessing
import os
import time

import numpy as np
import torch
from torch import nn

from . import conv
from .budget import check_work
from .data import load_dataset
from .engine import PRECISIONS, LocalSGD, sgd_step_flops
from .errors import check, check_choice, check_int
from .fleet import Outcome, process_threads, run_in_processes
from .jobs import JobQueue
from .models import build_model
from .repro import favas, ghbm, qafel
from .runtime import resolve_device
from .strategies import STRATEGIES
from .streams import ClientStreams

#: model -> (dataset, batch size) of the benchmark settings: each paper's (LeNet-5 on Fashion-MNIST at FedAST's 32).
SETTINGS = {"mlp32": ("mnist", 128), "mlp200": ("mnist", 128), "cnn-cifar": ("cifar10-jpeg", 64),
            "resnet20": ("cifar10-jpeg", 64), "char-lstm": ("shakespeare", 100), "lenet5": ("fashion-mnist", 32)}
#: model -> its keywords for its benchmark dataset (Fashion-MNIST has one channel)
MODEL_KW = {"lenet5": {"in_channels": 1}}


def matmul_peak_gflops(device: torch.device, n: int = 2048, seconds: float = 1.0,
                       dtype: torch.dtype = torch.float32) -> float:
    """Measured matmul rate in GFLOP/s: the best of repeated n×n products in ``dtype`` over ``seconds``. Where a
    product is slow (bfloat16 on a CPU without bf16 units: 0.3 GFLOP/s, a minute for 2048×2048), the size is the
    largest power of two from 256 up to ``n`` whose product takes under an eighth of ``seconds``."""
    size = min(256, n)
    while True:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        _sync(device)
        t0 = time.perf_counter()
        a @ b                                   # also the warm-up of this size
        _sync(device)
        if size >= n or time.perf_counter() - t0 >= seconds / 8:
            break
        size = min(2 * size, n)
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end or best == float("inf"):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * size ** 3 / best / 1e9


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PilImages(torch.utils.data.Dataset):
    """uint8 images served as PIL images through a transform, as torchvision's dataset classes do."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform):
        from PIL import Image
        self.images, self.labels, self.transform, self.to_pil = images, labels, transform, Image.fromarray

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.to_pil(self.images[i])), int(self.labels[i])


def _uint8_images(dataset) -> np.ndarray:
    """The original uint8 pixels (HWC or HW), recovered from the normalised tensors by rounding."""
    x = dataset.train_x.cpu()
    if x.dtype != torch.uint8:
        mean = torch.tensor(dataset.mean).view(1, -1, 1, 1)
        std = torch.tensor(dataset.std).view(1, -1, 1, 1)
        x = (x * std + mean).mul(255).round().clamp(0, 255).to(torch.uint8)
    x = x.permute(0, 2, 3, 1).numpy()
    return x[..., 0] if x.shape[-1] == 1 else x


def _reference_transform(dataset):
    import torchvision.transforms as T
    tf = [T.ToTensor(), T.Normalize(dataset.mean, dataset.std)]
    if dataset.augment == "crop_flip":
        tf = [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip()] + tf
    return T.Compose(tf)


def reference_steps_per_s(module: nn.Module, dataset, parts, steps: int, batch: int, lr: float) -> float:
    """Client-steps per second of the paper-style per-client loop (CPU, as those codes run)."""
    if dataset.train_x.dim() == 2:      # token windows (Shakespeare): served as tensors, as LEAF's code does
        samples = torch.utils.data.TensorDataset(dataset.train_x.cpu().long(), dataset.train_y.cpu())
    else:
        samples = PilImages(_uint8_images(dataset), dataset.train_y.cpu().numpy(), _reference_transform(dataset))
    module = copy.deepcopy(module).cpu()
    done, t0 = 0, time.perf_counter()
    for part in parts:
        local = copy.deepcopy(module)
        opt = torch.optim.SGD(local.parameters(), lr=lr)
        loader = torch.utils.data.DataLoader(torch.utils.data.Subset(samples, part.tolist()),
                                             batch_size=batch, shuffle=True, drop_last=True)
        k = 0
        while k < steps:
            for x, y in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(local(x), y).backward()
                opt.step()
                k += 1
                if k == steps:
                    break
        done += k
    return done / (time.perf_counter() - t0)


def side_by_side_steps_per_s(model: str, clients: int, steps: int, device: str, root, lr: float, strategy: str,
                             precision: str, seconds: float, barrier, part, on_outcome) -> list[Outcome]:
    """In a process of :func:`afl.fleet.run_in_processes` (one ``part``, one key): the engine of
    :func:`local_sgd_case` called over and over from the moment every process has warmed up (``barrier``) until
    ``seconds`` have passed; reports its client-steps per second over whole calls."""
    module, dataset, parts, batch = local_sgd_case(model, clients, resolve_device(device), root)
    engine = LocalSGD(module, dataset, batch, strategy=strategy, precision=precision)
    start = engine.model.flatten().to(engine.device)
    queue = JobQueue(engine, ClientStreams(parts, batch, seed=0))

    def call() -> None:
        jobs = [queue.submit(c, start, steps, lr) for c in range(len(parts))]
        jobs[0].result()
        _sync(engine.device)
    call()
    barrier.wait()
    done, t0 = 0, time.perf_counter()
    while done == 0 or time.perf_counter() - t0 < seconds:
        call()
        done += len(parts) * steps
    outcomes = [Outcome(key, done / (time.perf_counter() - t0)) for key in part]
    for outcome in outcomes:
        on_outcome(outcome)
    return outcomes


def engine_steps_per_s(module: nn.Module, dataset, parts, steps: int, batch: int, lr: float,
                       repeats: int = 4, strategy: str = "auto", precision: str = "fp32",
                       cuda_graphs: bool | None = None) -> tuple[float, LocalSGD]:
    """Client-steps per second of the engine (best of ``repeats`` runs after a warm-up), and the engine. With CUDA
    graphs the second run records the call and the later ones replay it (:mod:`afl.graphs`)."""
    engine = LocalSGD(module, dataset, batch, strategy=strategy, precision=precision, cuda_graphs=cuda_graphs)
    start = engine.model.flatten().to(engine.device)
    queue = JobQueue(engine, ClientStreams(parts, batch, seed=0))
    best = float("inf")
    for r in range(repeats + 1):
        _sync(engine.device)
        t0 = time.perf_counter()
        jobs = [queue.submit(c, start, steps, lr) for c in range(len(parts))]
        jobs[0].result()
        _sync(engine.device)
        if r:   # the first run warms up allocators and kernels
            best = min(best, time.perf_counter() - t0)
    return len(parts) * steps / best, engine


def _memory_bytes(device: torch.device) -> int:
    """The device's memory: a GPU's, or the machine's."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def local_sgd_case(model: str, clients: int, device, root=None) -> tuple[nn.Module, object, list, int]:
    """The benchmark setting of ``model`` (:data:`SETTINGS`): the seeded model, its dataset on ``device``,
    ``clients`` disjoint random parts of ``n / max(clients, 100)`` samples each, and the batch size."""
    check_choice("model", model, SETTINGS)
    data_name, batch = SETTINGS[model]
    dataset = load_dataset(data_name, root=root, device=device)
    check_int("clients", clients, 1, len(dataset.train_y), hint=f"at most one client per sample of {data_name}")
    torch.manual_seed(0)
    module = build_model(model, **MODEL_KW.get(model, {}))
    need = 4 * clients * sum(p.numel() for p in module.parameters()) * 4     # start, parameters, gradients, result
    have = _memory_bytes(torch.device(device))
    check(need <= have, "clients", clients, f"a number whose models fit in memory ({need / 2**30:.1f} GiB for "
          f"{model}'s parameters alone, of {have / 2**30:.0f} GiB)")
    per_client = len(dataset.train_y) // max(clients, 100)
    order = np.random.default_rng(0).permutation(len(dataset.train_y))
    parts = [torch.from_numpy(order[c * per_client:(c + 1) * per_client]) for c in range(clients)]
    return module, dataset, parts, batch


def bench_local_sgd(models=tuple(SETTINGS), clients: int = 20, steps: int = 20, device: str = "cpu",
                    root: str | None = None, reference: bool = True, lr: float = 0.05,
                    strategy: str = "auto", precision: str = "fp32", cuda_graphs: bool | None = None,
                    processes: int | None = None, seconds: float = 15.0) -> list[dict]:
    """One result dict per model (see module docstring for what is measured); ``strategy``, ``precision`` and
    ``cuda_graphs`` as in :class:`afl.engine.LocalSGD` (``"auto"``: the engine's choice for the device and model;
    graphs: on a GPU unless ``AFL_CUDA_GRAPHS=0``). With ``precision="bf16"`` the peak is the bfloat16 matmul's.
    ``processes``: also ``processes`` engines side by side, each in a process of its own with ``1/processes`` of
    the threads (as ``afl repro --processes`` splits a grid), timed over the same ``seconds``
    (:func:`side_by_side_steps_per_s`): ``processes_engine_steps_per_s`` is their sum, ``processes_speedup`` its
    ratio to one such process with every thread, timed alike (``one_process_engine_steps_per_s``: a mean over
    ``seconds``, where ``engine_steps_per_s`` is the best of a few calls). Where one engine's small kernels leave
    cores idle (LeNet-5 on a CPU), the sum is the larger."""
    dev = resolve_device(device)
    clients, steps = check_int("clients", clients, 1), check_int("steps", steps, 1)
    if processes is not None:
        processes = check_int("processes", processes, 1)
        check(dev.type == "cpu", "processes", processes, "engines side by side on a CPU (device cpu)")
    for name in models:
        check_choice("model", name, SETTINGS)
    check_choice("precision", precision, PRECISIONS)
    check_choice("strategy", strategy, STRATEGIES)
    peak = matmul_peak_gflops(dev, dtype=torch.bfloat16 if precision == "bf16" else torch.float32)
    rows = []
    for name in models:
        module, dataset, parts, batch = local_sgd_case(name, clients, dev, root)
        flops = sgd_step_flops(copy.deepcopy(module), dataset.inputs(dataset.train_x[:1].cpu())[0], batch)
        eng, engine = engine_steps_per_s(module, dataset, parts, steps, batch, lr, strategy=strategy,
                                         precision=precision, cuda_graphs=cuda_graphs)
        ref = reference_steps_per_s(module, dataset, parts[:min(clients, 20)], steps, batch, lr) if reference else None
        rows.append({
            "model": name, "dataset": SETTINGS[name][0], "device": str(dev), "strategy": engine.strategy.name,
            "precision": precision, "chunk": engine.chunk, "memory_basis": engine.memory_basis,
            "cuda_graphs": _graphs_used(engine), "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "conv_weight_gradient": ("cudnn" if dev.type not in conv.MATMUL_WEIGHT_GRADIENT else "matmul"
                                     if dev.type not in conv.MEASURED_WEIGHT_GRADIENT else f"auto {conv.choices()}"),
            "bytes_per_client": engine.bytes_per_client,
            "threads": torch.get_num_threads(),
            "clients": clients, "steps": steps, "batch": batch,
            "reference_steps_per_s": ref, "engine_steps_per_s": eng,
            "speedup": eng / ref if ref else None,
            "peak_gflops": peak, "flops_per_client_step": flops,
            "engine_gflops": eng * flops / 1e9, "fraction_of_peak": eng * flops / 1e9 / peak,
        } | ({} if processes is None else _side_by_side(name, clients, steps, dev, root, lr, strategy, precision,
                                                         processes, seconds)))
    return rows


def _side_by_side(model: str, clients: int, steps: int, dev: torch.device, root, lr: float, strategy: str,
                  precision: str, processes: int, seconds: float) -> dict:
    """The fields of one process and of ``processes`` processes of engines timed side by side
    (:func:`side_by_side_steps_per_s`)."""
    def together(n: int) -> float:
        barrier = multiprocessing.get_context("spawn").Barrier(n)
        work = functools.partial(side_by_side_steps_per_s, model, clients, steps, str(dev), root, lr, strategy,
                                 precision, seconds, barrier)
        return sum(o.value for o in run_in_processes(work, list(range(n)), n))   # a failure raises there
    one, total = together(1), together(processes)
    return {"processes": processes, "threads_per_process": process_threads(processes),
            "one_process_engine_steps_per_s": one, "processes_engine_steps_per_s": total,
            "processes_speedup": total / one}


def _graphs_used(engine: LocalSGD) -> str:
    """How the engine's calls ran: ``"off"``, ``"replayed"`` (the timed calls were replays) or why not."""
    graphs = engine.graphs
    if graphs is None:
        return "off"
    if graphs.failed is not None:
        return f"failed: {graphs.failed!r}"[:300]
    return "replayed" if graphs.replays else "not replayed"


def fleet_grids() -> dict:
    """Experiments ``afl bench fleet`` can run: name -> paper module (grids of one model, dataset and batch size)."""
    return {name: module for module, names in ((favas, favas.EXPERIMENTS), (ghbm, ghbm.SETTINGS),
                                               (qafel, qafel.EXPERIMENTS)) for name in names}


#: the engine's methods that train or evaluate (:func:`engine_work` times them)
ENGINE_WORK = ("run", "evaluate", "full_gradient", "train_loss")


@contextlib.contextmanager
def engine_work():
    """Inside the block: the engines whose :meth:`LocalSGD.run` is called, once per call, and the wall seconds
    spent in the engine's work (:data:`ENGINE_WORK`, outermost calls only) by method; yields ``(calls,
    seconds)``. On a GPU the seconds are the host's: kernels may still run when a call returns."""
    calls, seconds, depth = [], {}, [0]
    originals = {name: getattr(LocalSGD, name) for name in ENGINE_WORK}

    def timed(name, method):
        def wrapper(self, *args, **kwargs):
            if name == "run":
                calls.append(self)
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
        return wrapper
    for name, method in originals.items():
        setattr(LocalSGD, name, timed(name, method))
    try:
        yield calls, seconds
    finally:
        for name, method in originals.items():
            setattr(LocalSGD, name, method)


def bench_fleet(grid: str = "favas-table2", quick: bool = True, seeds: int | None = None, device: str = "cpu",
                root: str | None = None, fleet_size: int | None = None, overrides: dict | None = None,
                processes: int | None = None) -> dict:
    """The runs of experiment ``grid`` (its quick setting unless ``quick=False``; ``overrides``: fields of the
    setting changed) one by one and as one fleet (:mod:`afl.fleet`) in this process: wall seconds and engine
    calls of each, client steps, and how far apart the final accuracies of the two executions are (float rounding
    of bigger batched kernels, amplified by training). ``speedup_bound``: the largest speedup any execution could
    have over the one-by-one one, were every SGD FLOP computed at the measured fp32 matmul peak.
    ``sequential_engine_s`` and ``fleet_engine_s`` (on a CPU; None on a GPU): seconds inside the engine's work
    (:func:`engine_work`); ``engine_only_speedup``: one by one over the fleet's engine seconds, the speedup a
    fleet would have with nothing outside the engine. ``processes``:
    also the grid as that many fleets side by side (:func:`afl.fleet.run_in_processes`, process start-up
    included): ``processes_s`` and ``processes_speedup`` over one by one."""
    grids = fleet_grids()
    check_choice("grid", grid, grids)
    module, dev = grids[grid], resolve_device(device)
    cfg = module.setting(grid, quick=quick, **(overrides or {}))
    for name, value in (("fleet_size", fleet_size), ("processes", processes)):
        if value is not None:
            check_int(name, value, 1)
    runs = len(module.grid(cfg, seeds=seeds, device=dev, root=root).keys)
    check_work(cfg.work().times(runs), False, "afl repro with --allow-large (a benchmark stays within the limits)",
               changed=overrides or ())
    timed = {}
    for label, fleet in (("sequential", False), ("fleet", True)):
        g = module.grid(cfg, seeds=seeds, device=dev, root=root, fleet=fleet, fleet_size=fleet_size)
        t0 = time.perf_counter()
        with engine_work() as (calls, seconds):
            outcomes = g.work(g.keys)
        _sync(dev)
        timed[label] = (time.perf_counter() - t0, [o.value for o in outcomes if o.ok], calls, sum(seconds.values()))
    if processes is not None:
        g = module.grid(cfg, seeds=seeds, device=dev, root=root, fleet=True, fleet_size=fleet_size)
        t0 = time.perf_counter()
        outcomes = run_in_processes(g.work, g.keys, processes)
        timed["processes"] = (time.perf_counter() - t0, [o.value for o in outcomes if o.ok])
    seq_s, seq, seq_calls, seq_engine_s = timed["sequential"]
    fleet_s, runs, fleet_calls, fleet_engine_s = timed["fleet"]
    steps = sum(r["computed_client_steps"] for r in runs)
    gaps = [abs(a["final_accuracy"] - b["final_accuracy"]) for a, b in zip(seq, runs)]
    # The compute bound: no execution trains faster than the grid's SGD FLOPs at the fp32 matmul peak.
    engine = fleet_calls[0]
    flops = sgd_step_flops(copy.deepcopy(engine.model.module).cpu(),
                           engine.dataset.inputs(engine.dataset.train_x[:1]).cpu()[0], engine.batch_size)
    peak_steps_per_s = matmul_peak_gflops(dev) * 1e9 / flops
    # The engine's time is work per client step, which batching runs does not shrink (a CPU's figures only: a
    # GPU's engine calls return before their kernels end).
    engine_share = {"sequential_engine_s": None, "fleet_engine_s": None, "engine_only_speedup": None}
    if dev.type == "cpu":
        engine_share = {"sequential_engine_s": seq_engine_s, "fleet_engine_s": fleet_engine_s,
                        "engine_only_speedup": seq_s / fleet_engine_s}
    spread = {}
    if processes is not None:
        spread_s, spread_runs = timed["processes"]
        spread = {"processes": processes, "processes_s": spread_s, "processes_speedup": seq_s / spread_s,
                  "processes_client_steps_per_s": steps / spread_s,
                  "processes_max_final_accuracy_gap": max((abs(a["final_accuracy"] - b["final_accuracy"])
                                                           for a, b in zip(seq, spread_runs)), default=0.0),
                  "processes_failed_runs": len(g.keys) - len(spread_runs)}
    return {"grid": grid + (" (quick)" if quick else ""), "runs": len(g.keys), "device": str(dev),
            "threads": torch.get_num_threads(), "sequential_s": seq_s, "fleet_s": fleet_s,
            "speedup": seq_s / fleet_s, "client_steps": steps, "sequential_client_steps_per_s": steps / seq_s,
            "fleet_client_steps_per_s": steps / fleet_s, "sequential_engine_calls": len(seq_calls),
            "fleet_engine_calls": len(fleet_calls), **engine_share, "flops_per_client_step": flops,
            "peak_client_steps_per_s": peak_steps_per_s, "speedup_bound": peak_steps_per_s * seq_s / steps,
            "failed_runs": 2 * len(g.keys) - len(seq) - len(runs),
            "max_final_accuracy_gap": max(gaps, default=0.0)} | spread
