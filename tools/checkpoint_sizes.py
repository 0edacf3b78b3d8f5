"""MB of one run's checkpoint on GHBM's protocol, per method, measured (what a job with a
time limit leaves to carry on from; docs/speed.md quotes them).

    python tools/checkpoint_sizes.py --dataset cifar10-jpeg --methods fedavg fedcm ghbm localghbm fedhbm --rounds 11
    python tools/checkpoint_sizes.py --dataset shakespeare --methods fedprox feddyn --rounds 3

Each method runs ``--rounds`` rounds of the paper-scale setting (one seed, non-IID) with a checkpoint at every round
boundary (``AFL_CHECKPOINT_EVERY=0``); the size printed is that of the last one written, the run's whole state then
(server model, momenta, past models, every client's table). GHBM's past models fill up over tau rounds: measure those
at round tau + 1 (11 for the paper's tau = 10); the others' state has its full size after one round.
"""
import argparse
import json
import os
import tempfile

from afl import checkpoint
from afl.repro import ghbm


def sizes(dataset: str, methods: list[str], rounds: int, device: str = "cpu") -> dict[str, float]:
    """MB of each method's last checkpoint after ``rounds`` rounds (evaluations at the end only)."""
    cfg = ghbm.setting("ghbm-table2", quick=False, dataset=dataset, rounds=rounds + 1, eval_every=rounds + 1,
                       last=1, seeds=1, splits=("noniid",), methods=tuple(methods))
    data = ghbm.load_task(cfg, device=device)
    written: dict[str, int] = {}
    save = checkpoint.RunCheckpoint.save

    def recording(self, state):
        save(self, state)
        written[self.path.name] = self.path.stat().st_size
    checkpoint.RunCheckpoint.save = recording
    every = os.environ.get("AFL_CHECKPOINT_EVERY")
    os.environ["AFL_CHECKPOINT_EVERY"] = "0"
    out = {}
    try:
        for method in methods:
            with tempfile.TemporaryDirectory() as folder:
                written.clear()
                ghbm.compute_run(cfg, "noniid", method, None, 0, dataset=data, device=device, checkpoints=folder)
                out[method] = round(max(written.values()) / 1e6, 1)
    finally:
        checkpoint.RunCheckpoint.save = save
        if every is None:
            os.environ.pop("AFL_CHECKPOINT_EVERY")
        else:
            os.environ["AFL_CHECKPOINT_EVERY"] = every
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="cifar10-jpeg")
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--rounds", type=int, default=11, help="the round after which the size is taken (default 11)")
    args = p.parse_args()
    print(json.dumps({"dataset": args.dataset, "rounds": args.rounds,
                      "checkpoint_mb": sizes(args.dataset, args.methods, args.rounds)}))
