"""A tiny seeded federation and a plain-loop trainer, shared by the algorithm tests.

The trainer is the oracle the fast path is checked against: a fresh model copy and ``torch.optim.SGD`` per
client, its mini-batches replayed from the same per-client streams. Both run in float64, so that float
rounding never flips a ReLU between the two (see ``tests/test_engine.py``).
"""
import copy

import torch
from torch import nn

from afl.algorithms import make_federation
from afl.data import make_synthetic
from afl.engine import FlatModel
from afl.streams import ClientStreams

N, S, K, B, SEED, LR = 6, 2, 3, 4, 5, 0.2
DATA = make_synthetic(n_train=240, n_test=60, shape=(1, 4, 4), num_classes=4, seed=1).to("cpu", torch.float64)
TIME = dict(total_time=60.0, eval_every=20.0)
#: each algorithm's settings on the tiny federation
RUN = {"favas": dict(K=K, lr=LR, s=S, server_interval=7.0), "quafl": dict(K=K, lr=LR, s=S, server_interval=7.0),
       "fedbuff": dict(K=K, lr=LR, Z=2, server_time=3.0), "fedavg": dict(K=K, lr=LR, s=S, server_time=3.0),
       "qafel": dict(K=K, lr=LR, Z=2, server_time=3.0), "fedasync": dict(K=K, lr=LR, server_time=3.0),
       "ca2fl": dict(K=K, lr=LR, Z=2, server_time=3.0), "fadas": dict(K=K, lr=LR, Z=2, server_time=3.0)}


def federation(partition="shards", dtype=torch.float64, seed=SEED):
    return make_federation(DATA, "mlp32", N, partition, batch_size=B, seed=seed, slow_fraction=0.5,
                           partition_kw={"classes_per_client": 2} if partition == "shards" else None,
                           model_kw={"in_features": 16}, dtype=dtype)


class Reference:
    """Plain per-client training: deep copies and torch.optim.SGD, batches replayed from the client streams."""

    def __init__(self, fed):
        self.module = copy.deepcopy(fed.engine.model.module).double()      # the federation's network
        self.flat = FlatModel(self.module)
        self.streams = ClientStreams(fed.queue.streams.parts, B, seed=SEED)

    def train(self, start, batches, steps, lr, rho=0.0):
        """``steps`` SGD steps from ``start``; ``rho``: on ``f + rho/2 ||w - start||^2`` (a proximal pull)."""
        m = copy.deepcopy(self.module)
        self.flat.load_into(start, m)
        anchor = [p.detach().clone() for p in m.parameters()]
        opt = torch.optim.SGD(m.parameters(), lr=lr)
        for q in range(steps):
            idx = batches[q]
            opt.zero_grad()
            nn.functional.cross_entropy(m(DATA.train_x[idx]), DATA.train_y[idx]).backward()
            for p, a in zip(m.parameters(), anchor):
                p.grad.add_(p.detach() - a, alpha=rho)
            opt.step()
        return self.flat.flatten(m)


def server_steps(contacts):
    """Contacts grouped by server step (consecutive contacts at the same time)."""
    groups = []
    for c in contacts:
        if groups and groups[-1][0].time == c.time:
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups
