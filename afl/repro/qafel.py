"""QAFeL (Ortega & Jafarkhani 2023, ``shared/papers/003_*``): what a message costs, how much each quantizer
errs, and a first probe of the hidden state against quantizing the model itself.

The paper's model is FLSim's SimpleConvNet (``celeba-cnn``, ``variant="fedbuff"``: 29,282 parameters); its
"n-bit qsgd" on CelebA is FLSim's per-tensor min-max channel (``scalar:<n>`` in :mod:`afl.compress`), whose
message sizes are the paper's Table 1 to the byte. The paper's Table 1/2 and Figure 3 experiments are not
here yet (issue 9); :func:`probe` is a small seeded experiment on MNIST, labelled as such wherever it is shown.
"""
from __future__ import annotations

import math

import torch

from ..algorithms import make_federation, run_algorithm
from ..compress import make_quantizer
from ..data import load_dataset
from ..fleet import Outcome, run_fleet
from ..models import build_model

#: QAFeL Table 1's message sizes in bytes (paper numbers, shown only as labelled references)
PAPER_BYTES = {"identity": 117128, "scalar:8": 29924, "scalar:4": 15380, "scalar:2": 8108}


def qafel_shapes() -> list[tuple]:
    """Parameter shapes of the paper's model (FLSim SimpleConvNet, 2 classes)."""
    return [tuple(p.shape) for p in build_model("celeba-cnn", num_classes=2, variant="fedbuff").parameters()]


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


def main() -> None:
    """``python -m afl.repro.qafel``: run the probe and print its table (about 10 s on 2 CPU cores)."""
    import time
    t0 = time.perf_counter()
    outcomes = probe()
    print(f"{len(outcomes)} runs as one fleet in {time.perf_counter() - t0:.0f} s\n")
    print(probe_markdown(outcomes))


if __name__ == "__main__":
    main()


__all__ = ["PAPER_BYTES", "qafel_shapes", "message_bytes", "relative_errors", "PROBE", "PROBE_SETTING", "probe",
           "probe_markdown"]
