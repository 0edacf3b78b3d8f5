"""Probe (not a reproduction): QAFeL against FedBuff and the no-hidden-state ablation, per quantizer family.

IID MNIST, mlp32 (d = 25,450), 100 clients, 20 in flight, buffer Z = 10, K = 5 local steps at lr 0.1, batch 32,
staleness weight 1/sqrt(1 + tau), simulated time 600; two seeds, run as one fleet. It asks one question the
paper's experiments leave open: which quantizers keep the hidden state x_hat close to the server model?
Prints a markdown table of final test accuracies, bytes per message, and each server quantizer's relative
error ||Q(x) - x||^2 / ||x||^2 measured on Gaussian vectors beside its worst-case bound (``error_bound``).
The hidden state's error e = x - x_hat is re-quantized every step, so a server quantizer whose error exceeds
||e||^2 makes it grow geometrically.

    python tools/probe_qafel_quantizers.py            # about 20 s on 2 CPU cores
"""
from __future__ import annotations

import time

import torch

from afl.algorithms import make_federation, run_algorithm
from afl.compress import make_quantizer
from afl.data import load_dataset
from afl.fleet import run_fleet

BASE = dict(K=5, lr=0.1, Z=10, concurrency=20, staleness="sqrt", server_time=0.0)
D = 25450
VARIANTS = {                                   # name: (client quantizer, server quantizer, hidden state)
    "fedbuff": (None, None, None),
    "qafel qsgd 4/4": ("qsgd:4", "qsgd:4", True),
    "qafel qsgd 2/8": ("qsgd:2", "qsgd:8", True),
    "qafel qsgd 8/2": ("qsgd:8", "qsgd:2", True),
    "qafel qsgd(max, bucket 64) 4/4": ("qsgd:4:norm=max:bucket=64", "qsgd:4:norm=max:bucket=64", True),
    "qafel scalar 4/4": ("scalar:4", "scalar:4", True),
    "qafel scalar 2/2": ("scalar:2", "scalar:2", True),
    "no hidden state, qsgd 8/8": ("qsgd:8", "qsgd:8", False),
    "no hidden state, scalar 4/4": ("scalar:4", "scalar:4", False),
    "no hidden state, scalar 2/2": ("scalar:2", "scalar:2", False),
}


def run(name: str, seed: int, data) -> dict:
    client, server, hidden = VARIANTS[name]
    fed = make_federation(data, "mlp32", 100, "iid", batch_size=32, seed=seed)
    if client is None:
        return run_algorithm("fedbuff", fed, total_time=600, eval_every=100, **BASE)
    return run_algorithm("qafel", fed, total_time=600, eval_every=100, client_quantizer=client,
                         server_quantizer=server, hidden_state=hidden, **BASE)


def main() -> None:
    from afl.models import build_model
    shapes = [tuple(p.shape) for p in build_model("mlp32").parameters()]
    data = load_dataset("mnist", normalize=False)
    t0 = time.perf_counter()
    outcomes = run_fleet([((v, s), lambda v=v, s=s: run(v, s, data)) for v in VARIANTS for s in (0, 1)])
    print(f"{len(outcomes)} runs as one fleet in {time.perf_counter() - t0:.0f} s\n")
    x = torch.randn(20, D, generator=torch.Generator().manual_seed(12345))   # not the quantizers' seeds
    print("| method | server quantizer: measured error on N(0, I) | its bound (Def. 2.1 needs < 1) | "
          "final accuracy, seeds 0 / 1 (%) | kB/upload | kB/broadcast |")
    print("|---|---|---|---|---|---|")
    for name, (client, server, _) in VARIANTS.items():
        acc = [100 * o.value["final_accuracy"] for o in outcomes if o.key[0] == name]
        up = make_quantizer(client or "identity", shapes=shapes).nbytes(D) / 1000
        if server is None:
            print(f"| {name} | - | - | {acc[0]:.1f} / {acc[1]:.1f} | {up:.2f} | - |")
            continue
        qs = make_quantizer(server, shapes=shapes)
        err = float((((qs.roundtrip(x) - x) ** 2).sum(1) / (x ** 2).sum(1)).mean())
        print(f"| {name} | {err:.3g} | {qs.error_bound(D):.3g} | {acc[0]:.1f} / {acc[1]:.1f} | {up:.2f} | "
              f"{qs.nbytes(D) / 1000:.2f} |")


if __name__ == "__main__":
    main()
