"""Datasets as on-device tensors, their augmentations and their federated partitions.

>>> from afl.data import load_dataset, partition
>>> ds = load_dataset("mnist")                                   # doctest: +SKIP
>>> parts = partition("dirichlet", ds, n_clients=100, seed=0, alpha=0.1)  # doctest: +SKIP
"""
from afl.data.dataset import Dataset, make_synthetic
from afl.data.datasets import load_dataset, STATS
from afl.data.files import first_present
from afl.data.registry import DATASET_NAMES, SOURCES
from afl.data.augment import augment_noise, random_crop, random_crop_flip, random_flip
from afl.data.partition import (PARTITION_SCHEMES, by_group, dirichlet, fixed_size, iid, label_histogram,
                                partition, plot_partition, shards, sized, summary)

__all__ = ["Dataset", "make_synthetic", "load_dataset", "STATS", "DATASET_NAMES", "SOURCES", "first_present",
           "augment_noise", "random_crop", "random_crop_flip", "random_flip", "PARTITION_SCHEMES", "iid",
           "dirichlet", "shards", "fixed_size", "by_group", "sized", "partition", "label_histogram", "summary",
           "plot_partition"]
