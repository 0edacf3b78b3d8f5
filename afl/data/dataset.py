"""The in-memory dataset: train/test tensors on one device, plus what is needed to feed a model.

Small image sets are stored float32 and already normalized; big ones (TinyImageNet, CelebA) are stored
uint8 (N, C, H, W) and normalized on access by :meth:`Dataset.inputs`. Shakespeare stores symbol ids as
uint8 (N, 80) (8x less memory than int64); :meth:`Dataset.inputs` returns them as int64.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor

from afl.data import augment as aug
from afl.errors import check, check_int


@dataclass
class Dataset:
    name: str
    num_classes: int
    train_x: Tensor
    train_y: Tensor
    test_x: Tensor
    test_y: Tensor
    mean: tuple | None = None
    std: tuple | None = None
    augment: str | None = None
    train_groups: Tensor | None = None      # (N,) int64 natural client id (Shakespeare role, CelebA celebrity)
    test_groups: Tensor | None = None       # same ids for the test samples (per-client evaluation)
    info: dict = field(default_factory=dict)  # provenance: files + md5, vocabulary, group names, notes
    _constants: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def device(self) -> torch.device:
        return self.train_x.device

    @property
    def n_train(self) -> int:
        return int(self.train_y.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.test_y.shape[0])

    def inputs(self, x: Tensor) -> Tensor:
        """Model-ready version of a slice of ``train_x``/``test_x``.

        uint8 images -> float32 ``(x/255 - mean)/std`` per channel; uint8 symbol ids (no mean) -> int64;
        anything else (already normalized float32) is returned as is.
        """
        if x.dtype != torch.uint8:
            return x
        if self.mean is None:
            return x.long()
        shape = (1, -1) + (1,) * (x.dim() - 2)
        mean, std = self._constant("mean", x.device).view(shape), self._constant("std", x.device).view(shape)
        return (x.float() / 255.0 - mean) / std

    def pad_value(self, x: Tensor) -> float | Tensor:
        """The value of a black pixel in ``x``'s space (0 for uint8, ``-mean/std`` per channel for float)."""
        if x.dtype == torch.uint8 or self.mean is None:
            return 0.0
        return self._constant("pad", x.device)

    def _constant(self, name: str, device: torch.device) -> Tensor:
        """``mean``, ``std`` (float32) or ``pad`` (``-mean / std``) as a tensor on ``device``, made once per device:
        a tensor built from Python numbers is a host-to-device copy at every mini-batch on a GPU, which a CUDA graph
        cannot record (:mod:`afl.graphs`)."""
        key = (name, str(device))
        if key not in self._constants:
            if name == "pad":
                value = -torch.tensor(self.mean, device=device) / torch.tensor(self.std, device=device)
            else:
                value = torch.tensor(getattr(self, name), dtype=torch.float32, device=device)
            self._constants[key] = value
        return self._constants[key]

    def apply_augment(self, x: Tensor, noise: Tensor) -> Tensor:
        """Apply this dataset's training augmentation (``self.augment``) to a batch ``x`` (B, C, H, W), with
        each sample's random bits ``noise`` (B,) (:func:`afl.data.augment.augment_noise`)."""
        if self.augment is None:
            return x
        if self.augment == "flip":
            return aug.random_flip(x, noise)
        return aug.random_crop_flip(x, noise, padding=4, fill=self.pad_value(x))

    def to(self, device, dtype: torch.dtype | None = None) -> "Dataset":
        """A copy with every tensor on ``device``; with ``dtype``, floating-point inputs in that type."""
        mv = lambda t: None if t is None else t.to(device)  # noqa: E731
        def inputs(t):
            return t.to(device, dtype) if dtype is not None and t.is_floating_point() else t.to(device)
        return replace(self, train_x=inputs(self.train_x), train_y=mv(self.train_y), test_x=inputs(self.test_x),
                       test_y=mv(self.test_y), train_groups=mv(self.train_groups),
                       test_groups=mv(self.test_groups))

    def relabel(self, mapping, name: str | None = None) -> "Dataset":
        """The same samples with label ``y`` replaced by ``mapping[y]`` (one new label per old class, e.g.
        CIFAR-10's vehicles -> 1 and animals -> 0 for a binary task); the new labels must be 0..k-1, all used.
        The old labels are kept in ``info["original_train_y"]`` (a label-skewed partition may use them)."""
        m = torch.as_tensor(list(mapping), dtype=torch.int64)
        check(m.dim() == 1 and len(m) == self.num_classes, "mapping", list(mapping),
              f"{self.num_classes} new labels, one per class of {self.name}")
        k = int(m.max()) + 1
        check(int(m.min()) == 0 and len(torch.unique(m)) == k, "mapping", m.tolist(), "labels 0..k-1, each used")
        m = m.to(self.train_y.device)
        info = dict(self.info, relabel=m.tolist(), original_train_y=self.train_y)
        return replace(self, name=name or f"{self.name}-relabelled", num_classes=k, train_y=m[self.train_y],
                       test_y=m[self.test_y], info=info)

    def __repr__(self) -> str:
        g = "" if self.train_groups is None else f", groups={int(self.train_groups.max()) + 1}"
        return (f"Dataset({self.name!r}, classes={self.num_classes}, train={tuple(self.train_x.shape)} "
                f"{str(self.train_x.dtype).replace('torch.', '')}, test={tuple(self.test_x.shape)}, "
                f"augment={self.augment!r}{g}, device={self.device})")


def make_synthetic(n_train: int = 512, n_test: int = 128, shape=(1, 8, 8), num_classes: int = 10,
                   seed: int = 0, groups: int | None = None, noise: float = 1.0) -> Dataset:
    """A learnable toy set for tests: x = class mean + Gaussian noise, float32, balanced labels.

    ``groups`` (an int) gives each training sample a natural client id (round robin after shuffling).
    """
    n_train, n_test = check_int("n_train", n_train, 1), check_int("n_test", n_test, 1)
    num_classes = check_int("num_classes", num_classes, 2)
    if groups is not None:
        groups = check_int("groups", groups, 1, n_train, hint="or None; at most n_train")
    shape = tuple(int(s) for s in shape)
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 1.0, size=(num_classes,) + shape).astype(np.float32)

    def split(n):
        y = rng.permutation(np.arange(n) % num_classes)
        x = means[y] + noise * rng.normal(0.0, 1.0, size=(n,) + shape).astype(np.float32)
        return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    tx, ty = split(n_train)
    vx, vy = split(n_test)
    tg = None if groups is None else torch.from_numpy(rng.permutation(np.arange(n_train) % groups).astype(np.int64))
    return Dataset("synthetic", num_classes, tx, ty, vx, vy, train_groups=tg,
                   info={"seed": seed, "noise": noise})
