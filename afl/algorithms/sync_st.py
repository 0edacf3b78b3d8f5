"""Synchronous simultaneous training, FedAST's baselines (``shared/papers/004_*``, Sec. 5.2): Sync-ST (Bhuyan et
al. 2023), Sync-UCB-ST (Bhuyan and Moharir 2022) and Sync-Bayes-ST (Zhou et al. 2022), with the first-k straggler
mitigation of Bonawitz et al. 2019 (App. D.1).

Every round the ``cap`` available clients (the paper's 300 of 1,000) are split among the tasks still training in
proportion to their allocation ``R_m`` (``int(cap R_m / sum R)``, at least one, the rest one by one to tasks drawn
at random, as the authors' code does), each client training one task. Each task keeps the first ``first_k`` updates
to arrive (all with ``first_k=None``, "NoStrag.Mit.") and steps ``x_m <- x_m - eta_s mean(x_m - y)``; the round ends
when the last kept update of any task has arrived. A discarded straggler keeps computing: a client's jobs are
served first come, first served, so one picked again waits for its old job (the code's client clock).

Who trains what (``selection``):

* ``"uniform"`` (Sync-ST): a uniform random partition of the clients.
* ``"ucb"`` (Sync-UCB-ST): each task ranks clients by a discounted UCB index ``L/N + sqrt(2 log(sum_t gamma^t)
  / N)`` (``N``, ``L``: gamma-discounted counts and training losses of that client on that task; clients never
  tried first) and takes its best among ``cap + 5`` clients drawn as available, tasks choosing in turn. The loss
  is the returned model's mean loss on the client's data (the code's is the loss during local training).
* ``"bayes"`` (Sync-Bayes-ST): a Gaussian process over assignments (one 0/1 entry per (task, client)) models the
  round's cost ``alpha sum_m (longest kept job of task m) + (1 - alpha) sum_m Var(selection counts of task m)``;
  each round the assignment of 75 random ones (from ``cap + 5`` available clients) with the largest expected
  improvement runs; ``alpha = 0.25`` (the code's). The GP is a small numpy one (:class:`SmallGP`): no new
  dependency (scikit-learn) for a baseline the paper reports as no better than Sync-ST.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..checkpoint import EVERY_S, RunCheckpoint, boundary
from ..errors import check, check_choice, check_int, check_real
from ..sim.clock import EventQueue
from ..sim.queues import FCFSQueues
from ..sim.timeline import Timeline
from .base import History, TargetReached
from .fedast import check_pool_work, tasks_identity, tasks_restore, tasks_snapshot

SELECTIONS = ("uniform", "ucb", "bayes")


def split_clients(cap: int, requests, live, rng) -> list[int]:
    """Clients per task this round: ``max(1, int(cap R_m / sum R))`` for tasks still training, the remainder one
    by one to tasks drawn uniformly (the authors' code); 0 for finished tasks."""
    total = sum(r for r, a in zip(requests, live) if a)
    out = [max(1, int(cap * r / total)) if a else 0 for r, a in zip(requests, live)]
    idx = [m for m, a in enumerate(live) if a]
    for m in rng.choice(idx, size=max(0, cap - sum(out)), replace=True):
        out[int(m)] += 1
    return out


class SmallGP:
    """Gaussian-process regression with a Matern-3/2 kernel (scikit-learn's default, which the authors use) on
    normalized targets; the length scale is the one of a log-spaced grid with the largest marginal likelihood
    (scikit-learn fits it by L-BFGS)."""

    def __init__(self, noise: float = 1e-6):
        self.noise = noise

    @staticmethod
    def kernel(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
        d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
        r = np.sqrt(np.maximum(d2, 0.0)) * math.sqrt(3) / scale
        return (1 + r) * np.exp(-r)

    def fit(self, x: np.ndarray, y: np.ndarray) -> "SmallGP":
        self.x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        self.mean, self.std = y.mean(), y.std() or 1.0
        z = (y - self.mean) / self.std
        best = None
        d = np.sqrt(np.maximum((self.x ** 2).sum(1).max(), 1.0))
        for scale in d * np.logspace(-1.5, 1.5, 13):
            K = self.kernel(self.x, self.x, scale) + self.noise * np.eye(len(z))
            L = np.linalg.cholesky(K + 1e-9 * np.eye(len(z)))
            alpha = np.linalg.solve(L.T, np.linalg.solve(L, z))
            evidence = -0.5 * z @ alpha - np.log(np.diag(L)).sum()
            if best is None or evidence > best[0]:
                best = (evidence, scale, L, alpha)
        _, self.scale, self.L, self.alpha = best
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = self.kernel(np.asarray(x, dtype=float), self.x, self.scale)
        mu = k @ self.alpha
        v = np.linalg.solve(self.L, k.T)
        var = np.maximum(1.0 - (v * v).sum(0), 1e-12)
        return mu * self.std + self.mean, np.sqrt(var) * self.std


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float) -> np.ndarray:
    """EI of a cost to minimize below ``best``: ``(best - mu) Phi(z) + sigma phi(z)``, ``z = (best - mu) / sigma``."""
    z = (best - mu) / sigma
    cdf = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    return (best - mu) * cdf + sigma * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)


class SyncSTServer:
    """The synchronous server: one model and :class:`~afl.algorithms.base.History` per task, rounds driven by
    :func:`run_sync_st`."""

    def __init__(self, feds, tasks, total_time, eval_every):
        self.feds, self.tasks = list(feds), list(tasks)
        self.w = [fed.init.clone() for fed in self.feds]
        self.histories = [History(fed.queue, eval_every, total_time, target=t.target)
                          for fed, t in zip(self.feds, self.tasks)]
        self.requests = [t.requests for t in self.tasks]
        self.live = [True] * len(self.tasks)
        self.finished_at = [None] * len(self.tasks)

    def snapshot(self) -> dict:
        """The server between two rounds, for a checkpoint (:mod:`afl.checkpoint`)."""
        own = dict(w=self.w, requests=self.requests, live=self.live, finished_at=self.finished_at)
        return tasks_snapshot(self.feds, self.histories, own)

    def restore(self, state: dict, now: float) -> None:
        vars(self).update(tasks_restore(self.feds, self.histories, state, now))

    def submit(self, m: int, client: int):
        task, fed = self.tasks[m], self.feds[m]
        self.histories[m].counters["bytes_down"] += fed.model_bytes
        return fed.queue.submit(client, self.w[m], task.steps, task.lr, task.weight_decay)

    def step(self, m: int, t: float, jobs) -> None:
        """Task m's round ends at t with the kept jobs: record, then ``x <- x - eta_s mean(x - y)``. A task whose new
        model reaches its target finishes at once, at this aggregation, its time to the target (the paper evaluates
        after each one; its clients go to the other tasks from the next round)."""
        task, h = self.tasks[m], self.histories[m]
        try:
            h.record(t, self.w[m])
        except TargetReached:
            self._finish(m, t)
            return
        self.w[m] = self.w[m] - task.server_lr * torch.stack([self.w[m] - j.result() for j in jobs]).mean(0)
        c = h.counters
        c["server_steps"] += 1
        c["uploads"] += len(jobs)
        c["client_steps"] += task.steps * len(jobs)
        c["bytes_up"] += len(jobs) * self.feds[m].model_bytes
        try:
            h.reach(t, self.w[m])                      # tested after every aggregation: reached at t
        except TargetReached:
            self._finish(m, t)

    def _finish(self, m: int, t: float) -> None:
        """Task m reached its target: its share goes to the tasks still training, in proportion to theirs."""
        self.live[m], self.finished_at[m] = False, t
        freed, self.requests[m] = self.requests[m], 0
        total = sum(self.requests)
        for i in range(len(self.tasks)):
            if self.live[i] and total > 0:
                self.requests[i] += freed * self.requests[i] / total

    def finish(self) -> None:
        for h, w in zip(self.histories, self.w):
            if h.reached is None:
                try:
                    h.finish(w)
                except TargetReached:
                    pass


def run_sync_st(feds, tasks, profile, total_time: float, eval_every: float, cap: int | None = None,
                first_k: int | None = 30, selection: str = "uniform", seed=0, ucb_gamma: float = 0.99,
                bayes_alpha: float = 0.25, bayes_candidates: int = 75, allow_large: bool = False, checkpoint=None,
                checkpoint_every: float = EVERY_S) -> dict:
    """Train ``tasks`` (:class:`~afl.algorithms.fedast.FedASTTask`: ``requests`` is the task's allocation R_m,
    ``server_lr`` the synchronous one, 1 in the paper) in synchronous rounds of ``cap`` clients (all ``n`` if None)
    until ``total_time`` or until every task reached its target. Returns ``{"tasks", "schedule"}`` like
    :func:`~afl.algorithms.fedast.run_fedast`; ``schedule`` holds ``timeline``, ``round_ends``, ``kept`` and
    ``discarded`` counts per round and task, ``finished_at``. ``allow_large``: run even above afl's work limits
    (:func:`~afl.algorithms.fedast.pool_work`). ``checkpoint``, ``checkpoint_every``: as in
    :func:`~afl.algorithms.fedast.run_fedast` (saved between two rounds)."""
    feds, tasks = list(feds), list(tasks)
    check(len(feds) == len(tasks) >= 1, "feds", f"{len(feds)} federations", f"one per task ({len(tasks)})")
    n = profile.n
    for m, fed in enumerate(feds):
        check(fed.n == n, f"feds[{m}]", f"{fed.n} clients", f"the pool's {n} clients")
    check(len(profile.costs) >= len(tasks), "profile", f"{len(profile.costs)} model costs",
          f"one cost per task ({len(tasks)})")
    cap = n if cap is None else check_int("cap", cap, len(tasks), n, hint="clients per round, from M to n")
    if first_k is not None:
        first_k = check_int("first_k", first_k, 1)
    check_choice("selection", selection, SELECTIONS)
    total_time = check_pool_work(profile, len(tasks), total_time, eval_every, allow_large)
    check_real("ucb_gamma", ucb_gamma, 0, 1, strict_low=True)
    check_real("bayes_alpha", bayes_alpha, 0, 1)
    check_int("bayes_candidates", bayes_candidates, 1)
    rng = EventQueue(seed).rng
    fcfs = FCFSQueues(n)
    server = SyncSTServer(feds, tasks, total_time, eval_every)
    M = len(tasks)
    timeline = Timeline.for_profile(profile)
    schedule = {"timeline": timeline, "round_ends": [], "kept": [], "discarded": []}
    ucb_n, ucb_l = np.zeros((M, n)), np.zeros((M, n))
    counts = np.zeros((M, n))
    gp_x, gp_y = [], []
    now, rounds = 0.0, 0
    saving = None if checkpoint is None else RunCheckpoint(checkpoint, tasks_identity(
        "sync-st", feds, tasks, total_time=total_time, eval_every=eval_every, cap=cap, first_k=first_k,
        selection=selection, seed=seed, ucb_gamma=ucb_gamma, bayes_alpha=bayes_alpha,
        bayes_candidates=bayes_candidates), checkpoint_every)
    saved = None if saving is None else saving.load(server.w[0].device)
    if saved is not None:
        rng.bit_generator.state = saved["rng"]
        fcfs.load_state_dict(saved["fcfs"])
        schedule, ucb_n, ucb_l, counts = saved["schedule"], saved["ucb_n"], saved["ucb_l"], saved["counts"]
        timeline, gp_x, gp_y, now, rounds = schedule["timeline"], saved["gp_x"], saved["gp_y"], saved["now"], \
            saved["rounds"]
        server.restore(saved["server"], now)
    while now < total_time and any(server.live):
        boundary(saving, lambda: dict(rng=rng.bit_generator.state, fcfs=fcfs.state_dict(), schedule=schedule,
                                      ucb_n=ucb_n, ucb_l=ucb_l, counts=counts, gp_x=gp_x, gp_y=gp_y, now=now,
                                      rounds=rounds, server=server.snapshot()),
                 f"after round {rounds}, at simulated time {now:g}")
        sizes = split_clients(cap, server.requests, server.live, rng)
        available = rng.permutation(n)[:min(n, cap + 5)]
        if selection == "uniform":
            order = rng.permutation(n)
            groups = np.split(order[:sum(sizes)], np.cumsum(sizes)[:-1])
        elif selection == "ucb":
            groups = _ucb_groups(ucb_n, ucb_l, sizes, available, rounds, ucb_gamma)
        else:
            groups, x = _bayes_groups(sizes, available, n, gp_x, gp_y, bayes_candidates, rng)
        kept_clients, ends, longest = serve_round(profile, tasks, groups, now, fcfs, rng, first_k, timeline)
        kept_jobs = [[server.submit(m, c) for c in kept] for m, kept in enumerate(kept_clients)]
        for m, g in enumerate(groups):
            counts[m, [int(c) for c in g]] += 1
        now = ends
        if now > total_time:
            break
        schedule["round_ends"].append(now)
        schedule["kept"].append([len(k) for k in kept_clients])
        schedule["discarded"].append([len(g) - len(k) for g, k in zip(groups, kept_clients)])
        for m in range(M):
            if server.live[m] and kept_jobs[m]:
                server.step(m, now, kept_jobs[m])
        if selection == "ucb":
            ucb_n *= ucb_gamma
            ucb_l *= ucb_gamma
            for m, clients in enumerate(kept_clients):
                if clients and server.finished_at[m] is None:
                    y = torch.stack([j.result() for j in kept_jobs[m]])
                    parts = [feds[m].queue.streams.parts[c] for c in clients]
                    ucb_n[m, clients] += 1
                    ucb_l[m, clients] += feds[m].engine.train_loss(y, parts).cpu().numpy()
        if selection == "bayes":
            cost = bayes_alpha * longest + (1 - bayes_alpha) * float(sum(np.var(counts[m]) for m in range(M)))
            gp_x.append(x)
            gp_y.append(cost)
        rounds += 1
    if saving is not None:
        saving.discard()
    for fed in feds:
        fed.queue.cancel_jobs()
    server.finish()
    schedule["finished_at"] = server.finished_at
    return {"tasks": [h.to_dict() | {"model": w, "name": t.name}
                      for h, w, t in zip(server.histories, server.w, tasks)], "schedule": schedule}


def serve_round(profile, tasks, groups, now: float, fcfs: FCFSQueues, rng, first_k: int | None,
                timeline: Timeline) -> tuple[list[list[int]], float, float]:
    """One synchronous round from ``now``: task m's clients ``groups[m]`` train it (each behind its own older jobs,
    FCFS) and the first ``first_k`` arrivals of each task are kept. Returns the kept clients per task, the round's
    end (the last kept arrival) and the sum over tasks of their longest kept job (Sync-Bayes-ST's cost)."""
    durations = [[profile.request_time(rng, int(c), tasks[m].steps, model=m, per_step=False) for c in g]
                 for m, g in enumerate(groups)]
    ends, kept_clients, longest = 0.0, [], 0.0
    for m, (g, d) in enumerate(zip(groups, durations)):
        runs = [(c, *fcfs.submit(int(c), now, float(x))) for c, x in zip(g, d)]
        runs.sort(key=lambda r: r[2])
        keep = runs if first_k is None else runs[:first_k]
        for c, start, end in runs:
            timeline.add(int(c), start, end, "train" if (c, start, end) in keep else "discarded",
                         tasks[m].steps, task=tasks[m].name or m)
        kept_clients.append([int(c) for c, _, _ in keep])
        if keep:
            ends = max(ends, keep[-1][2])
            longest += max(end - start for _, start, end in keep)
    return kept_clients, ends, longest


def plan_sync_st(profile, tasks, total_time: float, cap: int | None = None, first_k: int | None = 30,
                 seed=0) -> list[int]:
    """The client steps each task computes in :func:`run_sync_st` (uniform selection) until ``total_time`` if none
    reaches its target: its rounds drawn as the run draws them, without training (the kept jobs are the computed
    ones). A plan of a run's work (:mod:`afl.queue`); equal to the run's own count until a task finishes."""
    n = profile.n
    cap = n if cap is None else cap
    rng = EventQueue(seed).rng
    fcfs, timeline = FCFSQueues(n), Timeline.for_profile(profile)
    live = [True] * len(tasks)
    steps, now = [0] * len(tasks), 0.0
    while now < total_time:
        sizes = split_clients(cap, [t.requests for t in tasks], live, rng)
        rng.permutation(n)                     # run_sync_st's draw of the available clients (UCB's and Bayes')
        groups = np.split(rng.permutation(n)[:sum(sizes)], np.cumsum(sizes)[:-1])
        kept, now, _ = serve_round(profile, tasks, groups, now, fcfs, rng, first_k, timeline)
        if now > total_time:
            break
        steps = [s + len(k) * t.steps for s, k, t in zip(steps, kept, tasks)]
    return steps


def _ucb_groups(ucb_n, ucb_l, sizes, available, rounds, gamma) -> list[np.ndarray]:
    """Tasks choose in turn (a rotating first) their best ``sizes[m]`` available clients by the UCB index."""
    M = len(sizes)
    horizon = sum(gamma ** t for t in range(max(rounds, 1)))
    taken, groups = set(), [None] * M
    for i in range(M):
        m = (rounds + i) % M
        with np.errstate(divide="ignore", invalid="ignore"):
            index = np.where(ucb_n[m] > 0, ucb_l[m] / ucb_n[m] + np.sqrt(2 * math.log(max(horizon, 1.0))
                                                                          / ucb_n[m]), np.inf)
        ranked = [int(c) for c in available[np.argsort(-index[available], kind="stable")] if int(c) not in taken]
        groups[m] = np.array(ranked[:sizes[m]], dtype=int)
        taken.update(groups[m].tolist())
    return groups


def _bayes_groups(sizes, available, n, gp_x, gp_y, candidates, rng):
    """The assignment (from ``candidates`` random ones of the available clients) with the largest expected
    improvement of the GP's cost; the first round takes the first candidate."""
    M = len(sizes)
    options = []
    for _ in range(candidates if gp_x else 1):
        perm = rng.permutation(available)
        groups = np.split(perm[:sum(sizes)], np.cumsum(sizes)[:-1])
        x = np.zeros(M * n)
        for m, g in enumerate(groups):
            x[m * n + g] = 1
        options.append((groups, x))
    if not gp_x:
        return options[0]
    gp = SmallGP().fit(np.stack(gp_x), np.array(gp_y))
    mu, sigma = gp.predict(np.stack([x for _, x in options]))
    return options[int(np.argmax(expected_improvement(mu, sigma, min(gp_y))))]


__all__ = ["SELECTIONS", "split_clients", "SmallGP", "expected_improvement", "SyncSTServer", "run_sync_st"]
