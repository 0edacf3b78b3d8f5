"""Probe: is the GHBM family's lead over FedAvg on IID Fashion-MNIST (results/ghbm-table2.md) a method effect or
a step size? FedAvg at Table 7's eta_l = 0.01 and at 0.1 = eta_l / (1 - beta), the step heavy-ball momentum with
beta = 0.9 takes, in the committed CPU setting (300 rounds, seed 0).

    AFL_DATA=../shared/data .venv/bin/python tools/ghbm_iid_step_probe.py
"""
from afl.algorithms import make_federation, run_algorithm
from afl.repro import ghbm as gh

cfg = gh.setting("ghbm-table2", quick=True, rounds=300, last=50)
data = gh.load_task(cfg)
parts = gh.client_parts(cfg, data, "iid", seed=0)
for lr in (0.01, 0.1):
    algorithm, kw = cfg.run_kwargs("fedavg")
    fed = make_federation(data, cfg.model, cfg.clients, batch_size=cfg.batch, seed=0, parts=parts)
    out = run_algorithm(algorithm, fed, total_time=cfg.rounds, eval_every=cfg.eval_every, **(kw | {"lr": lr}))
    print(f"FedAvg, IID, eta_l = {lr}: {100 * gh.final_accuracy(out['curve'], cfg.rounds, cfg.last):.1f} % "
          f"(mean of the last {cfg.last} of {cfg.rounds} rounds)")
