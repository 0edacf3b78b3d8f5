"""``load_dataset(name)``: locate + verify + decode (cached) + put on a device, for every dataset afl uses.

================  ==========================  =====================  ==========  =========
name              files (under a data root)   stored as              classes     augment
================  ==========================  =====================  ==========  =========
mnist             MNIST/raw/*.gz              float32 (N,1,28,28)    10          None
fashion-mnist     FashionMNIST/raw/*.gz       float32 (N,1,28,28)    10          None
cifar10           cifar-10-batches-py/        float32 (N,3,32,32)    10          crop_flip
cifar10-jpeg      cifar10/cifar10_jpeg_q75    float32 (N,3,32,32)    10          crop_flip
cifar100          cifar-100-python/           float32 (N,3,32,32)    100         crop_flip
shakespeare       shakespeare/raw_data.txt    uint8 ids (N,80)       80 symbols  None
tinyimagenet      tiny-imagenet-200/          uint8 (N,3,64,64)      200         flip
celeba            celeba/data/ (LEAF split)   uint8 (N,3,84,84)      2           None
================  ==========================  =====================  ==========  =========

``cifar10-jpeg`` is a lossy (JPEG quality 75) copy of CIFAR-10 with exact labels; it has its own name
so that results on it are never labelled CIFAR-10.
"""
from __future__ import annotations

import numpy as np
import torch

from afl.data import cache, files, folders, shakespeare, vision
from afl.data.dataset import Dataset
from afl.data.registry import DATASET_NAMES, SOURCES
from afl.errors import ParameterError, check, check_real

# Per-channel mean/std of the training images in [0, 1] (the values used throughout the FL literature).
STATS = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar10-jpeg": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "tinyimagenet": ((0.4802, 0.4481, 0.3975), (0.2302, 0.2265, 0.2262)),
    "celeba": ((0.5063, 0.4258, 0.3832), (0.3107, 0.2904, 0.2897)),
}
AUGMENT = {"cifar10": "crop_flip", "cifar10-jpeg": "crop_flip", "cifar100": "crop_flip", "tinyimagenet": "flip"}
NUM_CLASSES = {"mnist": 10, "fashion-mnist": 10, "cifar10": 10, "cifar10-jpeg": 10, "cifar100": 100,
               "shakespeare": len(shakespeare.VOCAB), "tinyimagenet": 200, "celeba": 2}
_FLOAT = ("mnist", "fashion-mnist", "cifar10", "cifar10-jpeg", "cifar100")

_READERS = {
    "mnist": lambda loc: vision.load_idx(loc, "MNIST"),
    "fashion-mnist": lambda loc: vision.load_idx(loc, "FashionMNIST"),
    "cifar10": vision.load_cifar10,
    "cifar100": vision.load_cifar100,
    "cifar10-jpeg": vision.load_cifar10_jpeg,
}


def load_dataset(name: str, root=None, device="cpu", download: bool | None = None, *,
                 checksums: dict | None = None, verify: bool = True, **options) -> Dataset:
    """Load dataset ``name`` (one of :data:`DATASET_NAMES`) as tensors on ``device``.

    root: a data root (torchvision layout); default search: ``$AFL_DATA``, the project's ``data/``,
    ``~/.cache/afl/data``. download: None = allowed unless ``AFL_DOWNLOAD=0``. checksums: {relative path:
    md5} overriding published MD5s (files of another release, or written by tests); verify=False skips
    MD5 checks. options: shakespeare ``train_fraction=0.8``, ``leaf_split=False``; image sets ``normalize=True``
    (False keeps pixels in [0, 1], as the public QuAFL code that FAVAS builds on feeds MNIST).
    Raises ParameterError (unknown name/option), DataMissingError, ChecksumError.
    """
    if name not in DATASET_NAMES:
        raise ParameterError("dataset", name, "one of " + ", ".join(DATASET_NAMES))
    allowed = {"train_fraction", "leaf_split"} if name == "shakespeare" else {"normalize"}
    for k in options:
        if k not in allowed:
            raise ParameterError(k, options[k], f"no such option for {name!r}"
                                 + (f"; options: {', '.join(sorted(allowed))}" if allowed else ""))
    loc = files.locate(name, root=root, download=download, checksums=checksums, verify=verify)
    if name == "shakespeare":
        ds = _load_shakespeare(loc, **options)
    elif name in ("tinyimagenet", "celeba"):
        ds = _load_folder_set(loc, name, **options)
    else:
        ds = _load_small_images(loc, name, **options)
    ds.info.update({"root": str(loc.root), "md5": loc.md5, "source": SOURCES[name].citation})
    return ds.to(device)


def _file_key(loc) -> str:
    """Cache key: the verified MD5s, or (verify=False) the files' size+mtime signature."""
    parts = []
    for rel in SOURCES[loc.name].files:
        if rel in loc.md5:
            parts.append(loc.md5[rel])
        elif not rel.endswith("/"):
            st = loc.path(rel).stat()
            parts.append(f"{loc.path(rel)}:{st.st_size}:{st.st_mtime_ns}")
    return cache.key_of(loc.name, *parts)


def _stats(name: str, normalize: bool) -> tuple[tuple, tuple]:
    check(isinstance(normalize, bool), "normalize", normalize, "True or False")
    mean, std = STATS[name]
    return (mean, std) if normalize else ((0.0,) * len(mean), (1.0,) * len(std))


def _normalize(x: np.ndarray, mean, std) -> torch.Tensor:
    c = len(mean)
    t = torch.from_numpy(x).float().div_(255.0)
    return t.sub_(torch.tensor(mean).view(1, c, 1, 1)).div_(torch.tensor(std).view(1, c, 1, 1))


def _load_small_images(loc, name: str, normalize: bool = True) -> Dataset:
    arr = cache.arrays(name, _file_key(loc), lambda: _READERS[name](loc))
    mean, std = _stats(name, normalize)
    info = {"stored": "float32, normalized with mean/std" if normalize else "float32 pixels in [0, 1]"}
    if "label_names" in arr:
        info["label_names"] = [str(s) for s in arr["label_names"]]
    if name == "cifar10-jpeg":
        info["note"] = "LOSSY JPEG q75 copy of CIFAR-10 (exact labels); not comparable to CIFAR-10 numbers"
    return Dataset(name, NUM_CLASSES[name], _normalize(arr["train_x"], mean, std), torch.from_numpy(arr["train_y"]),
                   _normalize(arr["test_x"], mean, std), torch.from_numpy(arr["test_y"]), mean, std,
                   AUGMENT.get(name), info=info)


def _load_folder_set(loc, name: str, normalize: bool = True) -> Dataset:
    if name == "tinyimagenet":
        key = cache.key_of(folders.tinyimagenet_signature(loc.root))
        arr = cache.arrays(name, key, lambda: folders.load_tinyimagenet(loc.root))
        groups = (None, None)
        info = {"label_names": [str(s) for s in arr["label_names"]]}
    else:
        key = cache.key_of(folders.celeba_signature(loc.root, files.md5sum))
        arr = cache.arrays(name, key, lambda: folders.load_celeba(loc.root))
        groups = (torch.from_numpy(arr["train_groups"]), torch.from_numpy(arr["test_groups"]))
        info = {"group_names": [str(s) for s in arr["group_names"]], "target": "Smiling (LEAF)"}
    info["stored"] = "uint8; Dataset.inputs normalizes"
    mean, std = _stats(name, normalize)
    n_classes = len(info["label_names"]) if name == "tinyimagenet" else NUM_CLASSES[name]
    return Dataset(name, n_classes, torch.from_numpy(arr["train_x"]), torch.from_numpy(arr["train_y"]),
                   torch.from_numpy(arr["test_x"]), torch.from_numpy(arr["test_y"]), mean, std,
                   AUGMENT.get(name), train_groups=groups[0], test_groups=groups[1], info=info)


def _load_shakespeare(loc, train_fraction: float = 0.8, leaf_split: bool = False) -> Dataset:
    check_real("train_fraction", train_fraction, 0, 1, strict_low=True)
    key = cache.key_of(_file_key(loc), float(train_fraction), bool(leaf_split))

    def build():
        text = loc.path("shakespeare/raw_data.txt").read_text(encoding="utf-8")
        return shakespeare.build(text, float(train_fraction), bool(leaf_split))

    arr = cache.arrays("shakespeare", key, build)
    stream = torch.from_numpy(arr["stream"])
    tx, ty = shakespeare.windows(stream, torch.from_numpy(arr["train_starts"]))
    vx, vy = shakespeare.windows(stream, torch.from_numpy(arr["test_starts"]))
    info = {"vocab": shakespeare.VOCAB, "group_names": [str(s) for s in arr["role_names"]],
            "plays": [str(s) for s in arr["plays"]], "role_windows": arr["role_windows"],
            "n_roles": len(arr["role_names"]), "n_samples_all": int(arr["role_windows"].sum()),
            "stored": "uint8 symbol ids; Dataset.inputs gives int64", "seq_len": shakespeare.SEQ_LEN,
            "split": f"per role by time: first {train_fraction:g} train, test after a {shakespeare.SEQ_LEN - 1}"
                     f"-window gap (LEAF split_data.py){'; roles without test dropped' if leaf_split else ''}"}
    return Dataset("shakespeare", NUM_CLASSES["shakespeare"], tx, ty, vx, vy, None, None, None,
                   train_groups=torch.from_numpy(arr["train_groups"]),
                   test_groups=torch.from_numpy(arr["test_groups"]), info=info)
