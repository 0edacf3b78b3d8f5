"""Federated partitions of a training set: one LongTensor of train indices per client, all seeded.

- :func:`iid`: a uniform random split into near-equal parts.
- :func:`dirichlet`: label skew of Hsu et al. 2019 (arXiv:1909.06335), as used by GHBM (App. C.2):
  client i draws class proportions q_i ~ Dir(alpha * p), p the class prior, and its samples are drawn
  class by class following q_i, without replacement across clients; all clients get the same size.
  alpha = 0 (GHBM's "NON-IID") gives each client a single class; alpha = 10 000 is GHBM's "IID".
- :func:`shards`: FAVAS (Sec. 5) non-IID split: each client takes ``classes_per_client`` distinct classes;
  each class is cut into equal shards, one per client holding it; every sample is used once.
- :func:`fixed_size`: FedAST (App. C): every client gets exactly ``size`` (300) points, "repeating the train
  set if necessary", with Dirichlet(alpha) label skew following Yurochkin et al. 2019 (class c's
  proportions over clients ~ Dir_K(alpha)).
- :func:`by_group`: one client per natural group (LEAF Shakespeare role, CelebA celebrity).
- :func:`sized`: clients of given sizes (QAFeL's LEAF CelebA users hold 1-32 images each), each drawing its
  samples from a Dirichlet(alpha) class mix, without replacement.
"""
from __future__ import annotations

from numbers import Integral

import numpy as np
import torch

from afl.errors import ParameterError, check, check_choice, check_int, check_real

PARTITION_SCHEMES = ("iid", "dirichlet", "shards", "fixed_size", "by_group", "sized")


# --- validation helpers ----------------------------------------------------------------------------------

def _labels(labels, name: str = "labels") -> np.ndarray:
    if hasattr(labels, "train_y"):          # a Dataset
        labels = labels.train_y
    if torch.is_tensor(labels):
        labels = labels.detach().cpu().numpy()
    arr = np.asarray(labels)
    check(arr.ndim == 1 and arr.size > 0, name, f"array of shape {arr.shape}", "a non-empty 1-D array")
    check(np.issubdtype(arr.dtype, np.integer), name, f"dtype {arr.dtype}", "integer labels")
    check(arr.min() >= 0, name, f"min {arr.min()}", "labels >= 0")
    return arr.astype(np.int64)


def _seed(seed) -> np.random.Generator:
    return np.random.default_rng(check_int("seed", seed, 0))


def _n_clients(n_clients, n: int) -> int:
    return check_int("n_clients", n_clients, 1, n, hint="at most the number of samples")


def _tensors(parts) -> list[torch.Tensor]:
    return [torch.from_numpy(np.sort(np.asarray(p, dtype=np.int64))) for p in parts]


def _fill(q: np.ndarray, need: int, avail: np.ndarray, rng) -> np.ndarray:
    """Per-class counts of ``need`` draws from class distribution ``q`` limited by ``avail``: draws that hit
    an exhausted class are redrawn from q renormalized over the classes left (the remaining data when q
    has no class left)."""
    got = np.zeros_like(avail)
    while need > 0:
        left = avail - got
        w = q * (left > 0)
        if w.sum() <= 0:
            w = left.astype(float)
        draw = np.minimum(rng.multinomial(need, w / w.sum()), left)
        got += draw
        need -= int(draw.sum())
    return got


def _class_pools(y: np.ndarray, num_classes: int, rng, copies: int = 1) -> list[np.ndarray]:
    return [np.concatenate([rng.permutation(np.flatnonzero(y == c)) for _ in range(copies)])
            for c in range(num_classes)]


# --- partitioners --------------------------------------------------------------------------------------

def iid(n_samples_or_labels, n_clients: int, seed: int = 0) -> list[torch.Tensor]:
    """Uniform random split of ``range(n)`` into ``n_clients`` parts whose sizes differ by at most one."""
    if isinstance(n_samples_or_labels, Integral) and not isinstance(n_samples_or_labels, bool):
        n = check_int("n_samples_or_labels", n_samples_or_labels, 1, hint="or a label array")
    else:
        n = len(_labels(n_samples_or_labels, "n_samples_or_labels"))
    k = _n_clients(n_clients, n)
    rng = _seed(seed)
    return _tensors(np.array_split(rng.permutation(n), k))


def dirichlet(labels, n_clients: int, alpha: float, seed: int = 0, size: int | None = None) -> list[torch.Tensor]:
    """Hsu et al. 2019 label skew: q_i ~ Dir(alpha p) per client, ``size`` samples each (default n // K),
    drawn without replacement across clients. alpha = 0: one class per client (class chosen with
    probability proportional to the clients it can still fill; with unequal classes the default size is
    the largest one for which that is possible)."""
    y = _labels(labels)
    n = len(y)
    k = _n_clients(n_clients, n)
    a = check_real("alpha", alpha, 0, hint="0: one class per client")
    rng = _seed(seed)
    counts = np.bincount(y)
    c = len(counts)
    if size is not None:
        size = check_int("size", size, 1, n // k, hint=f"size * n_clients <= {n}")
    pools = _class_pools(y, c, rng)
    used = np.zeros(c, dtype=np.int64)
    parts = []
    if a == 0:
        s = size if size is not None else n // k
        if size is None:
            while s > 1 and (counts // s).sum() < k:
                s -= 1
        if (counts // s).sum() < k:
            raise ParameterError("size", size, f"at most {max(t for t in range(1, n // k + 1) if (counts // t).sum() >= k)}"
                                 " for alpha=0 (each client must be filled from one class)")
        for _ in range(k):
            slots = (counts - used) // s
            cls = rng.choice(c, p=slots / slots.sum())
            parts.append(pools[cls][used[cls]:used[cls] + s])
            used[cls] += s
        return _tensors(parts)
    s = size if size is not None else n // k
    prior = counts / n
    support = np.flatnonzero(counts)
    for _ in range(k):
        q = np.zeros(c)
        q[support] = rng.dirichlet(a * prior[support])
        if not np.all(np.isfinite(q)) or q.sum() <= 0:
            q = np.eye(c)[rng.choice(c, p=prior)]
        got = _fill(q, s, counts - used, rng)
        parts.append(np.concatenate([pools[j][used[j]:used[j] + got[j]] for j in range(c)]))
        used += got
    return _tensors(parts)


def _assign_classes(k: int, per: int, m: np.ndarray, rng) -> np.ndarray:
    """A (k, per) class table with distinct classes per row and class j used m[j] times (each m[j] <= k):
    a valid table built column-wise from the class blocks, then mixed by random valid swaps."""
    order = rng.permutation(len(m))
    flat = np.repeat(order, m[order])
    table = flat.reshape(per, k).T.copy()          # entries i, i+k, i+2k... of a block of length <= k differ
    cells = k * per
    picks = rng.integers(0, cells, size=(10 * cells, 2))
    for a, b in picks:
        i1, j1, i2, j2 = a // per, a % per, b // per, b % per
        u, v = table[i1, j1], table[i2, j2]
        if i1 != i2 and u != v and v not in table[i1] and u not in table[i2]:
            table[i1, j1], table[i2, j2] = v, u
    return table


def shards(labels, n_clients: int, classes_per_client: int = 2, seed: int = 0) -> list[torch.Tensor]:
    """FAVAS (Sec. 5) non-IID split: each client holds ``classes_per_client`` distinct classes; class c,
    held by m_c clients (balanced: m_c differ by at most one), is shuffled and cut into m_c near-equal
    shards. Every sample is used exactly once."""
    y = _labels(labels)
    n = len(y)
    k = _n_clients(n_clients, n)
    counts = np.bincount(y)
    present = np.flatnonzero(counts)
    nc = len(present)
    per = check_int("classes_per_client", classes_per_client, 1, nc, hint="the number of classes present")
    rng = _seed(seed)
    total = k * per
    m = np.full(nc, total // nc)
    m[rng.choice(nc, total % nc, replace=False)] += 1
    short = np.flatnonzero(m > counts[present])
    if len(short):
        j = short[0]
        raise ParameterError("n_clients", n_clients, f"at most one shard per sample: class {present[j]} has "
                             f"{counts[present[j]]} samples but would be cut into {m[j]} shards; use fewer "
                             f"clients or classes_per_client")
    table = present[_assign_classes(k, per, m, rng)]
    holders = {int(c): np.flatnonzero((table == c).any(axis=1)) for c in present}
    pieces = [[] for _ in range(k)]
    for c in present:
        chunks = np.array_split(rng.permutation(np.flatnonzero(y == c)), len(holders[int(c)]))
        for client, chunk in zip(holders[int(c)], chunks):
            pieces[client].append(chunk)
    return _tensors(np.concatenate(p) for p in pieces)


def fixed_size(labels, n_clients: int, size: int = 300, seed: int = 0, alpha: float | None = None) -> list[torch.Tensor]:
    """FedAST (App. C, "Datasets"): each client gets exactly ``size`` points; the training set is repeated
    r = ceil(K size / n) times when K size > n, so a sample appears at most r times in all. alpha=None:
    IID. alpha > 0: Yurochkin et al. 2019 label skew (FedAST uses 0.1, 1 for CIFAR-100/ResNet-18): class c's
    share of each client ~ Dir_K(alpha); each client's ``size`` points follow its resulting class mix."""
    y = _labels(labels)
    n = len(y)
    k, size = check_int("n_clients", n_clients, 1), check_int("size", size, 1)
    rng = _seed(seed)
    copies = -(-k * size // n)
    if alpha is None:
        pool = np.concatenate([rng.permutation(n) for _ in range(copies)])
        return _tensors(pool[:k * size].reshape(k, size))
    a = check_real("alpha", alpha, 0, strict_low=True, hint="or None for no label skew")
    counts = np.bincount(y)
    c = len(counts)
    pools = _class_pools(y, c, rng, copies)
    share = np.zeros((c, k))
    for j in np.flatnonzero(counts):
        share[j] = rng.dirichlet(np.full(k, a)) * counts[j]
    used = np.zeros(c, dtype=np.int64)
    parts = [None] * k
    for i in rng.permutation(k):
        q = share[:, i] / share[:, i].sum() if share[:, i].sum() > 0 else counts / n
        got = _fill(q, size, counts * copies - used, rng)
        parts[i] = np.concatenate([pools[j][used[j]:used[j] + got[j]] for j in range(c)])
        used += got
    return _tensors(parts)


def sized(labels, sizes, seed: int = 0, alpha: float | None = None) -> list[torch.Tensor]:
    """One client per entry of ``sizes`` holding that many samples, every sample used at most once. alpha=None:
    uniform draws; alpha > 0: each client's class mix ~ Dir(alpha * p), p the class prior (label skew, as a
    LEAF user's images share a person or a style), filled as :func:`dirichlet` fills its clients."""
    y = _labels(labels)
    sizes = np.asarray(sizes)
    check(sizes.ndim == 1 and sizes.size >= 1 and np.issubdtype(sizes.dtype, np.integer) and sizes.min() >= 1,
          "sizes", f"array of shape {sizes.shape}", "a 1-D array of positive integers, one per client")
    check(int(sizes.sum()) <= len(y), "sizes", f"{int(sizes.sum())} samples in all",
          f"at most the {len(y)} samples of the data")
    rng = _seed(seed)
    if alpha is None:
        order = rng.permutation(len(y))
        return _tensors(np.split(order[:int(sizes.sum())], np.cumsum(sizes)[:-1]))
    a = check_real("alpha", alpha, 0, strict_low=True, hint="or None for no label skew")
    counts = np.bincount(y)
    prior = counts / counts.sum()
    pools = _class_pools(y, len(counts), rng)
    used = np.zeros(len(counts), dtype=np.int64)
    parts = []
    for size in sizes:
        q = rng.dirichlet(np.maximum(a * prior, 1e-12))
        got = _fill(q, int(size), counts - used, rng)
        parts.append(np.concatenate([pools[j][used[j]:used[j] + got[j]] for j in range(len(counts))]))
        used += got
    return _tensors(parts)


def by_group(groups, n_clients: int | None = None, seed: int = 0, min_samples: int = 1) -> list[torch.Tensor]:
    """One client per natural group id in ``groups`` (e.g. ``Dataset.train_groups``), in id order.
    Groups with fewer than ``min_samples`` samples are left out; ``n_clients`` picks that many of the
    remaining groups at random (FedAST uses 1000 Shakespeare roles)."""
    g = _labels(groups, "groups")
    min_samples = check_int("min_samples", min_samples, 1)
    ids, counts = np.unique(g, return_counts=True)
    eligible = ids[counts >= min_samples]
    check(len(eligible) > 0, "min_samples", min_samples, f"at most {counts.max()} (the largest group)")
    if n_clients is not None:
        k = check_int("n_clients", n_clients, 1, len(eligible),
                      hint=f"or None; groups with >= {min_samples} samples")
        eligible = np.sort(_seed(seed).choice(eligible, k, replace=False))
    order = np.argsort(g, kind="stable")
    starts = np.searchsorted(g[order], eligible, side="left")
    ends = np.searchsorted(g[order], eligible, side="right")
    return _tensors(order[s:e] for s, e in zip(starts, ends))


_KWARGS = {"iid": set(), "dirichlet": {"alpha", "size"}, "shards": {"classes_per_client"},
           "fixed_size": {"size", "alpha"}, "by_group": {"min_samples", "groups"}, "sized": {"sizes", "alpha"}}


def partition(scheme: str, data, n_clients: int | None = None, seed: int = 0, **kw) -> list[torch.Tensor]:
    """Dispatch to a partitioner. ``data`` is a Dataset (its ``train_y``, or ``train_groups`` for
    ``by_group``) or a label array. Examples: ``partition("dirichlet", ds, 100, seed=0, alpha=0.1)``,
    ``partition("shards", ds, 100, classes_per_client=2)``, ``partition("by_group", ds)``."""
    check_choice("scheme", scheme, PARTITION_SCHEMES)
    for key in kw:
        if key not in _KWARGS[scheme]:
            raise ParameterError(key, kw[key], f"an option of {scheme!r}: "
                                 + (", ".join(sorted(_KWARGS[scheme])) or "none"))
    if scheme == "by_group":
        groups = kw.pop("groups", None)
        if groups is None:
            groups = getattr(data, "train_groups", None) if hasattr(data, "train_y") else data
        if groups is None:
            raise ParameterError("data", getattr(data, "name", data), "a Dataset with train_groups, a group-id "
                                 "array, or groups=...")
        return by_group(groups, n_clients, seed, **kw)
    if scheme == "sized":
        if "sizes" not in kw:
            raise ParameterError("sizes", None, "one size per client for scheme 'sized'")
        check(n_clients is None or n_clients == len(kw["sizes"]), "n_clients", n_clients,
              f"None or {len(kw['sizes'])}, the number of sizes")
        return sized(data, seed=seed, **kw)
    if n_clients is None:
        raise ParameterError("n_clients", None, "a positive int")
    if scheme == "iid":
        return iid(_labels(data), n_clients, seed)
    if scheme == "dirichlet":
        if "alpha" not in kw:
            raise ParameterError("alpha", None, "a number >= 0 for scheme 'dirichlet'")
        return dirichlet(data, n_clients, seed=seed, **kw)
    if scheme == "shards":
        return shards(data, n_clients, seed=seed, **kw)
    return fixed_size(data, n_clients, seed=seed, **kw)


# --- inspection -----------------------------------------------------------------------------------------

def label_histogram(labels, parts, num_classes: int | None = None) -> np.ndarray:
    """(n_clients, num_classes) array: samples of each class held by each client."""
    y = _labels(labels)
    c = int(num_classes) if num_classes is not None else int(y.max()) + 1
    return np.stack([np.bincount(y[np.asarray(p, dtype=np.int64)], minlength=c)[:c] for p in parts])


def summary(labels, parts, num_classes: int | None = None) -> dict:
    """Sizes, classes per client, sample reuse, and label skew (mean total-variation distance between a
    client's label distribution and the global one: 0 = IID, near 1 = disjoint classes)."""
    y = _labels(labels)
    hist = label_histogram(y, parts, num_classes)
    sizes = hist.sum(axis=1)
    allidx = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
    distinct = len(np.unique(allidx))
    glob = np.bincount(y, minlength=hist.shape[1])[:hist.shape[1]] / len(y)
    local = hist / np.maximum(sizes[:, None], 1)
    ncls = (hist > 0).sum(axis=1)
    return {"n_clients": len(parts),
            "size_min": int(sizes.min()), "size_mean": float(sizes.mean()), "size_max": int(sizes.max()),
            "total": int(sizes.sum()), "distinct": distinct, "coverage": distinct / len(y),
            "disjoint": distinct == len(allidx),
            "classes_min": int(ncls.min()), "classes_mean": float(ncls.mean()), "classes_max": int(ncls.max()),
            "label_skew_tv": float(0.5 * np.abs(local - glob).sum(axis=1).mean())}


def plot_partition(hist, ax=None, title: str | None = "Samples per client and class", max_clients: int = 100,
                   class_names=None):
    """Stacked bar per client (first ``max_clients``), one colour per class; returns the Axes."""
    import matplotlib.pyplot as plt

    h = np.asarray(hist)[:max_clients]
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12, 2 + 0.12 * len(h)), 3.5))
    c = h.shape[1]
    cmap = plt.get_cmap("tab10" if c <= 10 else "tab20" if c <= 20 else "viridis")
    bottom = np.zeros(len(h))
    x = np.arange(len(h))
    for j in range(c):
        color = cmap(j if c <= 20 else j / max(c - 1, 1))
        label = str(class_names[j]) if class_names is not None else f"class {j}"
        ax.bar(x, h[:, j], bottom=bottom, color=color, width=0.9, label=label if c <= 20 else None)
        bottom += h[:, j]
    ax.set_xlabel("client")
    ax.set_ylabel("samples")
    if title:
        ax.set_title(title)
    if c <= 20:
        ax.legend(fontsize="x-small", ncol=2 if c > 10 else 1, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  title="class", title_fontsize="small")
    else:
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, c - 1))
        ax.figure.colorbar(sm, ax=ax, label="class")
    ax.set_xlim(-0.6, len(h) - 0.4)
    return ax
