"""FedAvg on a toy problem small enough to see whole (notebook ``00a_fl_in_20_minutes``): every client holds a
quadratic ``f_i(x) = 1/2 (x - c_i)^T A_i (x - c_i)`` in a few dimensions, and the federation minimises their
mean ``f = (1/n) sum_i f_i``, whose minimiser is ``x* = (sum_i A_i)^{-1} sum_i A_i c_i``.

A FedAvg round (McMahan et al. 2017, Algorithm 1) sends the server model ``x`` to ``s`` of the ``n`` clients; each
takes ``K`` local gradient steps ``y <- y - lr (A_i (y - c_i) + noise)`` from ``x``; the server averages what comes
back. On a quadratic a client's ``K`` steps without noise are exact: ``y_K = c_i + M_i^K (x - c_i)`` with
``M_i = I - lr A_i``, so with every client taking part FedAvg converges (for ``lr`` small enough) to the fixed
point of ``x = mean_i [c_i + M_i^K (x - c_i)]``::

    x_K = (I - mean_i M_i^K)^{-1} mean_i (I - M_i^K) c_i          (fedavg_fixed_point)

``K = 1`` gives ``x*`` (one step of gradient descent on ``f``); so does any ``K`` when every ``A_i`` is the same.
Clients whose curvatures differ pull each other's local runs towards their own ``c_i`` differently: for ``K > 1``
the fixed point moves away from ``x*``. That gap is **client drift** (Karimireddy et al. 2020, SCAFFOLD, Sec. 3).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import check, check_int, check_real


@dataclass(frozen=True)
class Quadratics:
    """``n`` clients' curvatures ``A`` (n x d x d, symmetric positive definite) and minimisers ``c`` (n x d)."""

    A: np.ndarray
    c: np.ndarray

    @property
    def n(self) -> int:
        return len(self.c)

    def loss(self, x: np.ndarray) -> float:
        """``f(x) = (1/n) sum_i 1/2 (x - c_i)^T A_i (x - c_i)``."""
        d = x[None, :] - self.c
        return float(0.5 * np.einsum("ni,nij,nj->n", d, self.A, d).mean())

    def optimum(self) -> np.ndarray:
        """``x* = (sum_i A_i)^{-1} sum_i A_i c_i``, where the gradient of ``f`` vanishes."""
        return np.linalg.solve(self.A.sum(0), np.einsum("nij,nj->i", self.A, self.c))

    def gap(self, x: np.ndarray) -> float:
        """``f(x) - f(x*)``."""
        return self.loss(x) - self.loss(self.optimum())


def quadratic_clients(n: int = 10, dim: int = 2, spread: float = 1.0, curvature: float = 4.0,
                      seed: int = 0) -> Quadratics:
    """``n`` clients: minimisers ``c_i ~ N(0, spread^2 I)``; curvatures ``A_i = R_i diag(1, ..., curvature) R_i^T``
    with random rotations ``R_i`` (``curvature = 1``: every ``A_i = I``, the case without drift)."""
    check_int("n", n, 1, 10_000)
    check_int("dim", dim, 1, 100)
    check_real("spread", spread, 0)
    check_real("curvature", curvature, 1, 1e4)
    rng = np.random.default_rng(seed)
    c = rng.normal(0.0, spread, (n, dim))
    rot = np.linalg.qr(rng.normal(size=(n, dim, dim)))[0]
    eig = np.linspace(1.0, curvature, dim)
    A = np.einsum("nij,j,nkj->nik", rot, eig, rot)
    return Quadratics(A=A, c=c)


def local_steps(q: Quadratics, i: int, x: np.ndarray, K: int, lr: float, noise: float,
                rng: np.random.Generator) -> np.ndarray:
    """Client ``i``'s ``K`` gradient steps from ``x``, each gradient plus ``N(0, noise^2 I)``."""
    y = x.copy()
    for _ in range(K):
        grad = q.A[i] @ (y - q.c[i]) + noise * rng.standard_normal(y.shape)
        y = y - lr * grad
    return y


def fedavg(q: Quadratics, rounds: int, K: int, lr: float, s: int | None = None, noise: float = 0.0,
           x0: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """FedAvg's server models ``x_0, ..., x_rounds`` (rounds + 1 rows): each round ``s`` clients drawn uniformly
    without replacement (``None``: all ``n``) run :func:`local_steps` from ``x`` and the server takes their mean."""
    s = q.n if s is None else s
    check_int("s", s, 1, q.n, hint=f"1 to n = {q.n}, the clients per round")
    check_int("K", K, 1, 100_000)
    check_int("rounds", rounds, 0, 1_000_000)
    check_real("lr", lr, 0, strict_low=True)
    check_real("noise", noise, 0)
    rng = np.random.default_rng(seed)
    x = np.zeros(q.c.shape[1]) if x0 is None else np.asarray(x0, dtype=float)
    check(x.shape == q.c.shape[1:], "x0", x0, f"a vector of {q.c.shape[1]} numbers")
    path = [x]
    for _ in range(rounds):
        chosen = rng.choice(q.n, size=s, replace=False)
        x = np.mean([local_steps(q, i, x, K, lr, noise, rng) for i in chosen], axis=0)
        path.append(x)
    return np.array(path)


def fedavg_fixed_point(q: Quadratics, K: int, lr: float) -> np.ndarray:
    """Where FedAvg with every client, ``K`` local steps of ``lr`` and no noise settles (module docstring):
    ``(I - mean_i M_i^K)^{-1} mean_i (I - M_i^K) c_i`` with ``M_i = I - lr A_i``."""
    check_int("K", K, 1, 100_000)
    check_real("lr", lr, 0, strict_low=True)
    eye = np.eye(q.c.shape[1])
    powers = np.stack([np.linalg.matrix_power(eye - lr * a, K) for a in q.A])
    rhs = np.einsum("nij,nj->i", eye[None] - powers, q.c) / q.n
    return np.linalg.solve(eye - powers.mean(0), rhs)


def max_stable_lr(q: Quadratics) -> float:
    """``2 / L``, L the largest curvature of any client: above it a client's own steps diverge."""
    return 2.0 / float(max(np.linalg.eigvalsh(a).max() for a in q.A))
