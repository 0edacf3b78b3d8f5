"""Readers for the torchvision-format image sets: IDX (MNIST, Fashion-MNIST), CIFAR python pickles, and
the lossy CIFAR-10 JPEG mirror. Each returns uint8 arrays (N, C, H, W) and int64 labels."""
from __future__ import annotations

import gzip
import io
import pickle
from pathlib import Path

import numpy as np

from afl.errors import ParameterError

_IDX_MAGIC = {2049: 1, 2051: 3}  # labels: 1 dim, images: 3 dims (big-endian header, uint8 data)


def read_idx(path: Path) -> np.ndarray:
    """Read a gzipped IDX file (LeCun's format) directly, without unpacking it to disk."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic not in _IDX_MAGIC:
        raise ValueError(f"{path}: not an IDX uint8 file (magic {magic})")
    ndim = _IDX_MAGIC[magic]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: IDX header says {dims}, found {arr.size} values")
    return arr.reshape(dims)


def load_idx(located, folder: str) -> dict[str, np.ndarray]:
    raw = f"{folder}/raw/"
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = read_idx(located.path(raw + f"{prefix}-images-idx3-ubyte.gz"))
        y = read_idx(located.path(raw + f"{prefix}-labels-idx1-ubyte.gz"))
        out[f"{split}_x"] = x[:, None]                      # (N, 1, 28, 28)
        out[f"{split}_y"] = y.astype(np.int64)
    return out


class _ArraysOnly(pickle.Unpickler):
    """Unpickles what the CIFAR python files hold (dicts, lists, bytes and numpy arrays) and nothing else: any other
    global a file names is refused, so a planted file cannot run code (``pickle.load`` would call what it names)."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a CIFAR data file")
        import codecs
        return {"_reconstruct": np.zeros(1).__reduce__()[0], "ndarray": np.ndarray, "dtype": np.dtype,
                "encode": codecs.encode}[name]


def _unpickle(path: Path) -> dict:
    """A CIFAR python file's dict, read by :class:`_ArraysOnly`; a :class:`ParameterError` naming the file if it is
    not one."""
    try:
        with open(path, "rb") as f:
            return _ArraysOnly(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as error:
        raise ParameterError("file", str(path), f"a CIFAR python data file (it could not be read as one: {error})"
                             ) from None


def _cifar_images(d: dict) -> np.ndarray:
    return np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)


def load_cifar10(located) -> dict[str, np.ndarray]:
    base = "cifar-10-batches-py/"
    parts = [_unpickle(located.path(base + f"data_batch_{i}")) for i in range(1, 6)]
    test = _unpickle(located.path(base + "test_batch"))
    meta = _unpickle(located.path(base + "batches.meta"))
    return {"train_x": np.concatenate([_cifar_images(p) for p in parts]),
            "train_y": np.concatenate([np.asarray(p[b"labels"], np.int64) for p in parts]),
            "test_x": _cifar_images(test), "test_y": np.asarray(test[b"labels"], np.int64),
            "label_names": np.array([s.decode() for s in meta[b"label_names"]])}


def load_cifar100(located) -> dict[str, np.ndarray]:
    base = "cifar-100-python/"
    train, test = _unpickle(located.path(base + "train")), _unpickle(located.path(base + "test"))
    meta = _unpickle(located.path(base + "meta"))
    return {"train_x": _cifar_images(train), "train_y": np.asarray(train[b"fine_labels"], np.int64),
            "test_x": _cifar_images(test), "test_y": np.asarray(test[b"fine_labels"], np.int64),
            "label_names": np.array([s.decode() for s in meta[b"fine_label_names"]])}


def decode_jpegs(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Decode concatenated JPEG files (image i is ``blob[offsets[i]:offsets[i+1]]``) with PIL to
    uint8 (N, H, W, 3). PIL/libjpeg-turbo is the decoder the mirror's PROVENANCE hashes were made with."""
    from PIL import Image

    buf = blob.tobytes()
    first = np.asarray(Image.open(io.BytesIO(buf[offsets[0]:offsets[1]])).convert("RGB"))
    out = np.empty((len(offsets) - 1,) + first.shape, dtype=np.uint8)
    for i in range(len(offsets) - 1):
        out[i] = np.asarray(Image.open(io.BytesIO(buf[offsets[i]:offsets[i + 1]])).convert("RGB"))
    return out


def load_cifar10_jpeg(located) -> dict[str, np.ndarray]:
    with np.load(located.path("cifar10/cifar10_jpeg_q75.npz"), allow_pickle=False) as z:
        out = {"label_names": z["label_names"]}
        for split in ("train", "test"):
            out[f"{split}_x"] = decode_jpegs(z[f"{split}_jpeg"], z[f"{split}_offsets"]).transpose(0, 3, 1, 2)
            out[f"{split}_y"] = z[f"{split}_y"].astype(np.int64)
    return out
