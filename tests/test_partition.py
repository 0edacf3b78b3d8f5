"""Partitioners: ranges, disjointness, sizes, determinism, the skew each scheme promises, input validation."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from afl.data import (by_group, dirichlet, fixed_size, iid, label_histogram, make_synthetic, partition,
                      plot_partition, shards, summary)
from afl.errors import ParameterError

# CIFAR-10-like labels: 10 classes x 500 samples, shuffled
LABELS = torch.from_numpy(np.random.default_rng(0).permutation(np.repeat(np.arange(10), 500)))
# MNIST-like unequal classes
UNEVEN = torch.from_numpy(np.random.default_rng(1).permutation(
    np.repeat(np.arange(10), [592, 674, 596, 613, 584, 542, 592, 627, 585, 595])))


def flat(parts):
    return torch.cat(parts)


def assert_disjoint_in_range(parts, n):
    allidx = flat(parts)
    assert all(p.dtype == torch.int64 for p in parts)
    assert allidx.min() >= 0 and allidx.max() < n
    assert allidx.unique().numel() == allidx.numel()


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_iid():
    parts = iid(LABELS, 7, seed=3)
    assert_disjoint_in_range(parts, 5000)
    sizes = [len(p) for p in parts]
    assert sum(sizes) == 5000 and max(sizes) - min(sizes) <= 1
    assert same(parts, iid(5000, 7, seed=3)) and not same(parts, iid(5000, 7, seed=4))


@pytest.mark.parametrize("alpha", [0, 0.1, 1.0, 10_000])
def test_dirichlet_disjoint_equal_sizes_deterministic(alpha):
    parts = dirichlet(LABELS, 100, alpha, seed=0)
    assert_disjoint_in_range(parts, 5000)
    assert {len(p) for p in parts} == {50}
    assert same(parts, dirichlet(LABELS, 100, alpha, seed=0))
    assert not same(parts, dirichlet(LABELS, 100, alpha, seed=1))


def test_dirichlet_alpha_zero_is_one_class_per_client():
    hist = label_histogram(LABELS, dirichlet(LABELS, 100, 0, seed=0), 10)
    assert ((hist > 0).sum(axis=1) == 1).all()
    assert ((hist > 0).sum(axis=0) == 10).all()        # 5000 / 50 / 10 classes: every class fills 10 clients
    # unequal classes: the size shrinks so that one class can still fill every client
    parts = dirichlet(UNEVEN, 10, 0, seed=2)
    h = label_histogram(UNEVEN, parts, 10)
    assert ((h > 0).sum(axis=1) == 1).all() and len({len(p) for p in parts}) == 1
    assert_disjoint_in_range(parts, len(UNEVEN))


def test_dirichlet_small_alpha_is_more_skewed():
    skew = {a: np.mean([summary(LABELS, dirichlet(LABELS, 50, a, seed=s))["label_skew_tv"] for s in range(3)])
            for a in (0.05, 0.5, 5.0, 1000.0)}
    assert skew[0.05] > skew[0.5] > skew[5.0] > skew[1000.0]
    assert skew[1000.0] < 0.2 and skew[0.05] > 0.7      # 100 samples: sampling noise alone gives ~0.12
    ncls = summary(LABELS, dirichlet(LABELS, 50, 0.05, seed=0))["classes_mean"]
    assert ncls < summary(LABELS, dirichlet(LABELS, 50, 1000.0, seed=0))["classes_mean"]


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", None, True])
def test_dirichlet_bad_alpha(bad):
    with pytest.raises(ParameterError, match="alpha"):
        dirichlet(LABELS, 10, bad, seed=0)


def test_dirichlet_bad_size():
    with pytest.raises(ParameterError, match="size"):
        dirichlet(LABELS, 10, 1.0, seed=0, size=501)
    parts = dirichlet(LABELS, 10, 1.0, seed=0, size=20)
    assert {len(p) for p in parts} == {20}


def test_shards_two_classes_each():
    parts = shards(LABELS, 100, 2, seed=0)
    assert_disjoint_in_range(parts, 5000)
    assert flat(parts).numel() == 5000                          # every sample used once
    hist = label_histogram(LABELS, parts, 10)
    assert ((hist > 0).sum(axis=1) == 2).all()
    assert ((hist > 0).sum(axis=0) == 20).all()                 # 200 shards, 20 per class
    assert {len(p) for p in parts} == {50}
    assert same(parts, shards(LABELS, 100, 2, seed=0)) and not same(parts, shards(LABELS, 100, 2, seed=1))
    pairs = {tuple(np.flatnonzero(h)) for h in hist}
    assert len(pairs) > 20                                      # class pairs are mixed, not a fixed pattern
    h3 = label_histogram(UNEVEN, shards(UNEVEN, 30, 3, seed=5), 10)
    assert ((h3 > 0).sum(axis=1) == 3).all() and h3.sum() == len(UNEVEN)


def test_shards_impossible():
    with pytest.raises(ParameterError, match="classes_per_client"):
        shards(LABELS, 10, 11, seed=0)
    with pytest.raises(ParameterError, match="classes_per_client"):
        shards(LABELS, 10, 0, seed=0)
    tiny = torch.arange(30) % 10                                # 3 samples per class
    with pytest.raises(ParameterError, match="n_clients"):
        shards(tiny, 20, 2, seed=0)                             # 40 shards > 30 samples


def test_fixed_size_fedast():
    y = LABELS[:3000]
    parts = fixed_size(y, 100, 300, seed=0, alpha=0.1)          # 30 000 > 3 000: the set is repeated 10 times
    assert all(len(p) == 300 for p in parts) and len(parts) == 100
    allidx = flat(parts)
    assert allidx.min() >= 0 and allidx.max() < 3000
    assert torch.bincount(allidx, minlength=3000).max() <= 10
    assert summary(y, parts)["coverage"] > 0.99
    assert same(parts, fixed_size(y, 100, 300, seed=0, alpha=0.1))
    skewed = summary(y, parts)["label_skew_tv"]
    plain = summary(y, fixed_size(y, 100, 300, seed=0))["label_skew_tv"]
    assert skewed > plain + 0.3
    small = fixed_size(y, 5, 300, seed=0)                      # 1500 <= 3000: no repetition, disjoint
    assert_disjoint_in_range(small, 3000)
    with pytest.raises(ParameterError, match="alpha"):
        fixed_size(y, 10, 300, seed=0, alpha=0)
    with pytest.raises(ParameterError, match="size"):
        fixed_size(y, 10, 0, seed=0)


def test_by_group():
    groups = torch.tensor([2, 0, 2, 1, 0, 2, 5])
    parts = by_group(groups)
    assert [p.tolist() for p in parts] == [[1, 4], [3], [0, 2, 5], [6]]
    assert [p.tolist() for p in by_group(groups, min_samples=2)] == [[1, 4], [0, 2, 5]]
    sub = by_group(groups, n_clients=2, seed=3)
    assert len(sub) == 2 and same(sub, by_group(groups, n_clients=2, seed=3))
    with pytest.raises(ParameterError, match="n_clients"):
        by_group(groups, n_clients=5)
    with pytest.raises(ParameterError, match="min_samples"):
        by_group(groups, min_samples=0)


def test_partition_dispatch_and_dataset_input():
    ds = make_synthetic(400, 50, (2,), 4, seed=0, groups=8)
    assert same(partition("iid", ds, 4, seed=1), iid(400, 4, seed=1))
    assert same(partition("dirichlet", ds, 4, seed=1, alpha=0.3), dirichlet(ds.train_y, 4, 0.3, seed=1))
    assert same(partition("shards", ds, 4, seed=1, classes_per_client=2), shards(ds.train_y, 4, 2, seed=1))
    assert same(partition("fixed_size", ds, 4, seed=1, size=30), fixed_size(ds.train_y, 4, 30, seed=1))
    assert len(partition("by_group", ds)) == 8
    with pytest.raises(ParameterError, match="scheme"):
        partition("pathological", ds, 4)
    with pytest.raises(ParameterError, match="beta"):
        partition("dirichlet", ds, 4, beta=1.0)
    with pytest.raises(ParameterError, match="alpha"):
        partition("dirichlet", ds, 4)
    with pytest.raises(ParameterError, match="data"):
        partition("by_group", make_synthetic(10, 5, (2,), 2, seed=0))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, 5001, "10", None])
def test_bad_n_clients(bad):
    with pytest.raises(ParameterError, match="n_clients"):
        partition("iid", LABELS, bad)


def test_bad_seed_and_labels():
    with pytest.raises(ParameterError, match="seed"):
        iid(LABELS, 10, seed=-1)
    with pytest.raises(ParameterError, match="seed"):
        iid(LABELS, 10, seed=1.5)
    with pytest.raises(ParameterError, match="labels"):
        dirichlet(torch.tensor([0.5, 1.0]), 2, 1.0)
    with pytest.raises(ParameterError, match="labels"):
        shards(torch.zeros(2, 2, dtype=torch.long), 2)


def test_histogram_summary_and_plot():
    parts = shards(LABELS, 20, 2, seed=0)
    hist = label_histogram(LABELS, parts, 10)
    assert hist.shape == (20, 10) and hist.sum() == 5000
    s = summary(LABELS, parts)
    assert s["n_clients"] == 20 and s["disjoint"] and s["coverage"] == 1.0
    assert s["classes_min"] == s["classes_max"] == 2 and math.isclose(s["size_mean"], 250)
    ax = plot_partition(hist, title="shards, 2 classes per client")
    assert ax.get_xlabel() == "client" and ax.get_ylabel() == "samples"
    assert ax.get_title() == "shards, 2 classes per client" and ax.get_legend() is not None
    ax100 = plot_partition(np.ones((5, 100)))
    assert len(ax100.figure.axes) == 2                      # many classes: a colour bar instead of a legend
    import matplotlib.pyplot as plt
    plt.close("all")


def test_sized_gives_each_client_its_size_without_reuse_and_skews_labels():
    y = np.repeat(np.arange(10), 500)
    sizes = np.random.default_rng(0).integers(1, 33, 200)
    for alpha in (None, 0.1):
        parts = partition("sized", y, seed=3, sizes=sizes, alpha=alpha)
        assert [len(p) for p in parts] == list(sizes)
        flat = np.concatenate([p.numpy() for p in parts])
        assert len(np.unique(flat)) == len(flat) == sizes.sum()
    def top_share(parts):
        return np.mean([np.bincount(y[p.numpy()]).max() / len(p) for p in parts if len(p) >= 16])
    skewed, uniform = partition("sized", y, seed=3, sizes=sizes, alpha=0.1), partition("sized", y, seed=3, sizes=sizes)
    assert top_share(skewed) > 0.7 > 0.35 > top_share(uniform)
    with pytest.raises(ParameterError, match="sizes"):
        partition("sized", y, sizes=[4000, 2000])
    with pytest.raises(ParameterError, match="sizes"):
        partition("sized", y, sizes=[3, 0])
    with pytest.raises(ParameterError, match="n_clients"):
        partition("sized", y, n_clients=5, sizes=[1, 2])


def test_relabel_makes_a_binary_task_and_keeps_the_old_labels():
    from afl.data import make_synthetic
    ds = make_synthetic(100, 40, (3, 4, 4), 10, seed=0)
    vehicles = [1, 1, 0, 0, 0, 0, 0, 0, 1, 1]                       # CIFAR-10: airplane, automobile, ship, truck
    binary = ds.relabel(vehicles, name="vehicles-vs-animals")
    assert binary.num_classes == 2 and binary.name == "vehicles-vs-animals"
    assert torch.equal(binary.train_y, torch.tensor(vehicles)[ds.train_y])
    assert torch.equal(binary.info["original_train_y"], ds.train_y)
    with pytest.raises(ParameterError, match="mapping"):
        ds.relabel([0, 1])
    with pytest.raises(ParameterError, match="mapping"):
        ds.relabel([0, 2, 0, 0, 0, 0, 0, 0, 2, 2])
