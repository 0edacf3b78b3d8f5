"""Probe: is a gap between FedAvg and the GHBM family a method effect or a step size? FedAvg at several local
learning rates eta_l, all else as the GHBM experiment's setting; prints the test-accuracy curve and the final
accuracy (mean over the last rounds) of each.

Default: IID Fashion-MNIST, the committed CPU setting (300 rounds, seed 0), eta_l = 0.01 (Table 7's) and 0.1 =
0.01 / (1 - beta), the step heavy-ball momentum with beta = 0.9 takes (results/ghbm/fashion-mnist/ghbm-table2.md).
Shakespeare: FedAvg at eta_l = 0.1 (afl's first reading of the GHBM family's, now 1), non-IID, 30 rounds:

    AFL_DATA=../shared/data .venv/bin/python tools/ghbm_step_probe.py
    AFL_DATA=../shared/data .venv/bin/python tools/ghbm_step_probe.py --dataset shakespeare --split noniid \\
        --rounds 30 --last 10 --eval-every 10 --lrs 0.1
"""
import argparse

from afl.algorithms import make_federation, run_algorithm
from afl.repro import ghbm as gh

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--dataset", default="fashion-mnist")
p.add_argument("--split", default="iid")
p.add_argument("--rounds", type=int, default=300)
p.add_argument("--last", type=int, default=50)
p.add_argument("--eval-every", type=int, default=10)
p.add_argument("--lrs", type=float, nargs="+", default=[0.01, 0.1])
args = p.parse_args()

cfg = gh.setting("ghbm-table2", quick=True, dataset=args.dataset, rounds=args.rounds, last=args.last,
                 eval_every=args.eval_every)
data = gh.load_task(cfg)
parts = gh.client_parts(cfg, data, args.split, seed=0)
for lr in args.lrs:
    algorithm, kw = cfg.run_kwargs("fedavg")
    fed = make_federation(data, cfg.model, cfg.clients, batch_size=cfg.batch, seed=0, parts=parts)
    out = run_algorithm(algorithm, fed, total_time=cfg.rounds, eval_every=cfg.eval_every, **(kw | {"lr": lr}))
    curve = ", ".join(f"{t:.0f}: {100 * a:.1f}" for t, a in zip(out["curve"]["time"], out["curve"]["accuracy"]))
    final = 100 * gh.final_accuracy(out["curve"], cfg.rounds, cfg.last)
    print(f"FedAvg, {args.dataset} {args.split}, eta_l = {lr}: {final:.1f} % (mean of the last {cfg.last} of "
          f"{cfg.rounds} rounds); test accuracy by round: {curve}", flush=True)
