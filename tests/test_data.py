"""Data layer: locating, MD5 verification, loaders (real mirror when AFL_DATA is set, small synthetic files
in each format otherwise), Shakespeare parsing, augmentation. Offline: AFL_DOWNLOAD=0 throughout."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import pickle
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from afl.data import (DATASET_NAMES, Dataset, load_dataset, make_synthetic, augment_noise, random_crop,
                      random_crop_flip, random_flip)
from afl.data import cache, files, registry, shakespeare
from afl.errors import ChecksumError, DataMissingError, ParameterError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("AFL_DOWNLOAD", "0")


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AFL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def mirror():
    root = os.environ.get("AFL_DATA")
    if not root:
        pytest.skip("AFL_DATA is not set: real-data tests need the offline data mirror (AFL_DATA=../shared/data)")
    return Path(root)


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def to_uint8(ds: Dataset, x: torch.Tensor) -> torch.Tensor:
    """Undo the float normalization (exact for 8-bit sources up to float rounding)."""
    c = x.shape[1]
    m, s = torch.tensor(ds.mean).view(1, c, 1, 1), torch.tensor(ds.std).view(1, c, 1, 1)
    return ((x * s + m) * 255).round().clamp(0, 255).to(torch.uint8)


# --- real data (offline mirror) ------------------------------------------------------------------------

MNIST_TRAIN = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_mnist_real(mirror):
    ds = load_dataset("mnist", root=mirror)
    assert ds.name == "mnist" and ds.num_classes == 10 and ds.augment is None
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert ds.train_x.dtype == torch.float32 and ds.train_y.dtype == torch.int64
    assert torch.bincount(ds.train_y).tolist() == MNIST_TRAIN
    assert torch.bincount(ds.test_y).tolist() == MNIST_TEST
    assert abs(ds.train_x.mean().item()) < 0.01 and abs(ds.train_x.std().item() - 1) < 0.01
    assert ds.info["md5"] == registry.SOURCES["mnist"].files       # every file verified, torchvision md5s
    assert ds.inputs(ds.train_x[:4]) is not None and ds.inputs(ds.train_x[:4]).dtype == torch.float32


def test_fashion_mnist_real(mirror):
    ds = load_dataset("fashion-mnist", root=mirror)
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert torch.bincount(ds.train_y).tolist() == [6000] * 10
    assert torch.bincount(ds.test_y).tolist() == [1000] * 10
    assert ds.info["md5"] == registry.SOURCES["fashion-mnist"].files


def test_cifar10_jpeg_real(mirror):
    ds = load_dataset("cifar10-jpeg", root=mirror)
    assert ds.name == "cifar10-jpeg" and ds.augment == "crop_flip" and "LOSSY" in ds.info["note"]
    assert ds.train_x.shape == (50000, 3, 32, 32) and ds.test_x.shape == (10000, 3, 32, 32)
    assert torch.bincount(ds.train_y).tolist() == [5000] * 10
    assert torch.bincount(ds.test_y).tolist() == [1000] * 10
    assert ds.train_y[:10].tolist() == [6, 9, 9, 4, 1, 1, 2, 7, 8, 3]       # PROVENANCE.md
    assert ds.test_y[:10].tolist() == [3, 8, 8, 0, 6, 6, 1, 6, 3, 1]
    import PIL
    if PIL.__version__ == "13.0.0":   # the decoder the mirror's hashes were made with (others may differ by 1)
        raw = to_uint8(ds, ds.test_x).permute(0, 2, 3, 1).contiguous().numpy()
        assert hashlib.sha256(raw.tobytes()).hexdigest() == \
            "b7018a062865e9348a704e72416eb53c816b43cc8ac42ab43276a2b967508ab6"


def test_shakespeare_real(mirror):
    ds = load_dataset("shakespeare", root=mirror)
    # LEAF's preprocess_shakespeare.py on this file: 1,130 users, 4,226,206 samples (shared/data/README.md)
    assert ds.info["n_roles"] == 1130 and ds.info["n_samples_all"] == 4226206
    assert len(ds.info["plays"]) == 36
    assert ds.train_groups.unique().numel() == 1130
    assert ds.num_classes == 80 and ds.train_x.shape[1] == 80 and ds.train_x.dtype == torch.uint8
    w = torch.from_numpy(ds.info["role_windows"])
    n_train = torch.clamp((0.8 * w.double()).floor().long(), min=1)
    n_train[w == 2] = 1
    assert ds.n_train == int(n_train.sum())
    assert ds.n_test == int(torch.clamp(w - n_train - 79, min=0).sum())
    # window semantics: the next window is this window shifted by one with the target appended
    x, y, g = ds.train_x[:5000].long(), ds.train_y[:5000], ds.train_groups[:5000]
    same = g[1:] == g[:-1]
    assert torch.equal(x[1:][same], torch.cat([x[:-1, 1:], y[:-1, None]], 1)[same])
    assert ds.inputs(ds.train_x[:3]).dtype == torch.int64
    assert shakespeare.decode(ds.train_x[0]).startswith("I")


def test_corrupt_copy_of_real_file(mirror, tmp_path, tmp_cache):
    dst = tmp_path / "root" / "MNIST" / "raw"
    dst.mkdir(parents=True)
    for f in (mirror / "MNIST" / "raw").glob("*.gz"):
        shutil.copy(f, dst / f.name)
    bad = dst / "train-labels-idx1-ubyte.gz"
    data = bytearray(bad.read_bytes())
    data[100] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(ChecksumError) as e:
        load_dataset("mnist", root=tmp_path / "root")
    msg = str(e.value)
    assert "train-labels-idx1-ubyte.gz" in msg and "d53e105ee54ea40749a09fcbcd1e9432" in msg and md5(bad) in msg


# --- synthetic files in each format --------------------------------------------------------------------

def write_idx(path: Path, arr: np.ndarray) -> None:
    magic = {1: 2049, 3: 2051}[arr.ndim]
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def make_idx_root(root: Path, folder="MNIST", n=(30, 10)):
    rng = np.random.default_rng(0)
    arrays = {}
    for split, prefix, k in (("train", "train", n[0]), ("test", "t10k", n[1])):
        x = rng.integers(0, 256, (k, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, k, dtype=np.uint8)
        write_idx(root / folder / "raw" / f"{prefix}-images-idx3-ubyte.gz", x)
        write_idx(root / folder / "raw" / f"{prefix}-labels-idx1-ubyte.gz", y)
        arrays[split] = (x, y)
    sums = {rel: md5(root / rel) for rel in registry.SOURCES["mnist" if folder == "MNIST" else "fashion-mnist"].files}
    return arrays, sums


def test_idx_reader_and_checksum_override(tmp_path, tmp_cache):
    arrays, sums = make_idx_root(tmp_path)
    with pytest.raises(ChecksumError) as e:          # not the published files
        load_dataset("mnist", root=tmp_path)
    assert "expected" in str(e.value) and "MNIST/raw/" in str(e.value)
    ds = load_dataset("mnist", root=tmp_path, checksums=sums)
    assert ds.train_x.shape == (30, 1, 28, 28) and ds.test_x.shape == (10, 1, 28, 28)
    assert torch.equal(to_uint8(ds, ds.train_x)[:, 0], torch.from_numpy(arrays["train"][0]))
    assert ds.train_y.tolist() == arrays["train"][1].tolist()
    ds2 = load_dataset("mnist", root=tmp_path, verify=False)     # escape hatch: no MD5 check
    assert torch.equal(ds2.train_y, ds.train_y)
    with pytest.raises(ParameterError, match="checksums"):
        load_dataset("mnist", root=tmp_path, checksums={"MNIST/raw/nope.gz": "0" * 32})


def test_md5_memo_and_change_detection(tmp_path, tmp_cache):
    arrays, sums = make_idx_root(tmp_path)
    load_dataset("mnist", root=tmp_path, checksums=sums)
    memo = json.loads((tmp_cache / "md5.json").read_text())
    f = tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz"
    assert memo[os.path.abspath(f)][2] == sums["MNIST/raw/t10k-labels-idx1-ubyte.gz"]
    write_idx(f, np.zeros(11, np.uint8))                 # file changes: memo is keyed by size + mtime
    with pytest.raises(ChecksumError, match="t10k-labels"):
        load_dataset("mnist", root=tmp_path, checksums=sums)


def test_missing_file_message(tmp_path, tmp_cache, monkeypatch):
    with pytest.raises(DataMissingError) as e:
        load_dataset("mnist", root=tmp_path)
    msg = str(e.value)
    for part in ("'mnist'", "MNIST/raw/train-images-idx3-ubyte.gz", str(tmp_path), "AFL_DATA", "root=",
                 "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz", "disabled"):
        assert part in msg, part
    # default search: $AFL_DATA, the project data/ folder, the cache's data/ folder -- all named
    monkeypatch.setenv("AFL_DATA", str(tmp_path / "env"))
    monkeypatch.setattr(files, "project_data_dir", lambda: tmp_path / "proj")
    with pytest.raises(DataMissingError) as e:
        load_dataset("celeba")
    msg = str(e.value)
    for part in (str(tmp_path / "env"), str(tmp_path / "proj"), str(tmp_cache / "data"), "LEAF", "preprocess.sh"):
        assert part in msg, part


def test_failed_download_is_reported(tmp_path, tmp_cache, monkeypatch):
    """Downloads allowed by the environment; the fetcher is replaced by one that fails (no network use)."""
    def boom(source, roots):
        raise OSError("network unreachable")
    monkeypatch.setattr(files, "_download", boom)
    monkeypatch.setenv("AFL_DOWNLOAD", "1")
    with pytest.raises(DataMissingError, match="download failed: OSError: network unreachable"):
        load_dataset("cifar100", root=tmp_path)


def test_search_order(tmp_path, tmp_cache, monkeypatch):
    monkeypatch.setenv("AFL_DATA", str(tmp_path / "env"))
    roots = [p for p, _ in files.data_roots()]
    assert roots[0] == tmp_path / "env" and roots[-1] == tmp_cache / "data"
    if files.project_data_dir() is not None:
        assert roots[1] == REPO / "data"
    assert [p for p, _ in files.data_roots(tmp_path / "x")] == [tmp_path / "x"]
    monkeypatch.delenv("AFL_DOWNLOAD")
    assert files.download_allowed(None) and not files.download_allowed(False)
    monkeypatch.setenv("AFL_DOWNLOAD", "0")
    assert not files.download_allowed(None) and files.download_allowed(True)


def test_unknown_dataset_and_option():
    with pytest.raises(ParameterError) as e:
        load_dataset("imagenet")
    assert all(n in str(e.value) for n in DATASET_NAMES) and "dataset='imagenet'" in str(e.value)
    with pytest.raises(ParameterError, match="leaf_split"):
        load_dataset("mnist", leaf_split=True)


def _pickle(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj, protocol=2))


def test_cifar100_synthetic(tmp_path, tmp_cache):
    rng = np.random.default_rng(1)
    base = tmp_path / "cifar-100-python"
    tr = rng.integers(0, 256, (20, 3072), dtype=np.uint8)
    te = rng.integers(0, 256, (10, 3072), dtype=np.uint8)
    _pickle(base / "train", {b"data": tr, b"fine_labels": list(range(20)), b"coarse_labels": [0] * 20})
    _pickle(base / "test", {b"data": te, b"fine_labels": list(range(10)), b"coarse_labels": [0] * 10})
    _pickle(base / "meta", {b"fine_label_names": [f"c{i}".encode() for i in range(100)]})
    with pytest.raises(ChecksumError, match="16019d7e3df5f24257cddd939b257f8d"):
        load_dataset("cifar100", root=tmp_path)
    sums = {rel: md5(tmp_path / rel) for rel in registry.SOURCES["cifar100"].files}
    ds = load_dataset("cifar100", root=tmp_path, checksums=sums)
    assert ds.num_classes == 100 and ds.augment == "crop_flip" and ds.info["label_names"][3] == "c3"
    assert ds.train_x.shape == (20, 3, 32, 32) and ds.train_x.dtype == torch.float32
    assert torch.equal(to_uint8(ds, ds.train_x), torch.from_numpy(tr.reshape(20, 3, 32, 32)))
    assert ds.test_y.tolist() == list(range(10))


def test_cifar10_synthetic(tmp_path, tmp_cache):
    base = tmp_path / "cifar-10-batches-py"
    rng = np.random.default_rng(2)
    for i in range(1, 6):
        _pickle(base / f"data_batch_{i}", {b"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8),
                                           b"labels": [i] * 4})
    _pickle(base / "test_batch", {b"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8), b"labels": [7] * 3})
    _pickle(base / "batches.meta", {b"label_names": [f"k{i}".encode() for i in range(10)]})
    sums = {rel: md5(tmp_path / rel) for rel in registry.SOURCES["cifar10"].files}
    ds = load_dataset("cifar10", root=tmp_path, checksums=sums)
    assert ds.name == "cifar10" and ds.train_x.shape == (20, 3, 32, 32) and ds.augment == "crop_flip"
    assert ds.train_y.tolist() == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4 + [5] * 4


def _save_image(path: Path, arr: np.ndarray, fmt: str) -> None:
    from PIL import Image
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, format=fmt)


def _decoded(path: Path, size=None) -> np.ndarray:
    from PIL import Image
    im = Image.open(path)
    if size:
        im = im.resize(size, Image.BICUBIC)
    return np.asarray(im.convert("RGB"))


def test_tinyimagenet_synthetic(tmp_path, tmp_cache):
    base = tmp_path / "tiny-imagenet-200"
    wnids = ["n03", "n01", "n02"]
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").parent.mkdir(parents=True, exist_ok=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    rng = np.random.default_rng(3)
    for w in wnids:
        for j in range(2):
            _save_image(base / "train" / w / "images" / f"{w}_{j}.JPEG",
                        rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), "JPEG")
    gray = rng.integers(0, 256, (64, 64), dtype=np.uint8)               # grayscale images exist in the set
    _save_image(base / "val" / "images" / "val_0.JPEG", gray, "JPEG")
    _save_image(base / "val" / "images" / "val_1.JPEG", rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), "JPEG")
    (base / "val" / "val_annotations.txt").write_text("val_0.JPEG\tn02\t0\t0\t63\t63\nval_1.JPEG\tn03\t1\t1\t9\t9\n")
    ds = load_dataset("tinyimagenet", root=tmp_path)
    assert ds.augment == "flip" and ds.num_classes == 3 and ds.info["label_names"] == ["n01", "n02", "n03"]
    assert ds.train_x.shape == (6, 3, 64, 64) and ds.train_x.dtype == torch.uint8
    assert ds.train_y.tolist() == [0, 0, 1, 1, 2, 2] and ds.test_y.tolist() == [1, 2]
    first = _decoded(base / "train" / "n01" / "images" / "n01_0.JPEG")
    assert np.array_equal(ds.train_x[0].permute(1, 2, 0).numpy(), first)
    assert np.array_equal(ds.test_x[0].permute(1, 2, 0).numpy(), _decoded(base / "val" / "images" / "val_0.JPEG"))
    x = ds.inputs(ds.train_x[:2])
    assert x.dtype == torch.float32 and x.shape == (2, 3, 64, 64)
    ref = (ds.train_x[:2].float() / 255 - torch.tensor(ds.mean).view(1, 3, 1, 1)) / torch.tensor(ds.std).view(1, 3, 1, 1)
    assert torch.allclose(x, ref)
    again = load_dataset("tinyimagenet", root=tmp_path)                  # from the cache
    assert torch.equal(again.train_x, ds.train_x)


def test_celeba_synthetic(tmp_path, tmp_cache):
    base = tmp_path / "celeba" / "data"
    rng = np.random.default_rng(4)
    names = [f"{i:06d}.jpg" for i in range(1, 8)]
    for n in names:
        _save_image(base / "raw" / "img_align_celeba" / n, rng.integers(0, 256, (218, 178, 3), dtype=np.uint8), "JPEG")
    train = {"users": ["17", "42"], "num_samples": [3, 2],
             "user_data": {"17": {"x": names[0:3], "y": [1.0, 0.0, 1.0]}, "42": {"x": names[3:5], "y": [0, 0]}}}
    test = {"users": ["17", "42"], "num_samples": [1, 1],
            "user_data": {"17": {"x": names[5:6], "y": [0]}, "42": {"x": names[6:7], "y": [1]}}}
    (base / "train").mkdir(parents=True)
    (base / "test").mkdir(parents=True)
    (base / "train" / "all_data_niid_1_keep_5_train_9.json").write_text(json.dumps(train))
    (base / "test" / "all_data_niid_1_keep_5_test_9.json").write_text(json.dumps(test))
    ds = load_dataset("celeba", root=tmp_path)
    assert ds.num_classes == 2 and ds.augment is None and ds.info["group_names"] == ["17", "42"]
    assert ds.train_x.shape == (5, 3, 84, 84) and ds.train_x.dtype == torch.uint8
    assert ds.train_y.tolist() == [1, 0, 1, 0, 0] and ds.train_groups.tolist() == [0, 0, 0, 1, 1]
    assert ds.test_groups.tolist() == [0, 1] and ds.test_y.tolist() == [0, 1]
    ref = _decoded(base / "raw" / "img_align_celeba" / names[0], (84, 84))
    assert np.array_equal(ds.train_x[0].permute(1, 2, 0).numpy(), ref)


GUTENBERG = """Header line (LEAF drops the first line)
Contents
by William Shakespeare
  THE SONNETS (skipped: before the second author line)
x
x
THE TRAGEDY OF TESTING

by William Shakespeare

  HAMLET. To be, or not to be:   that is the question.
    Whether 'tis nobler in the mind to suffer
  OPHELIA. Good my lord, how does your honour for this many a day?
  HAMLET. I humbly thank you; well, well, well.
  OPHELIA. My lord, I have remembrances of yours #1
    That I have longed long to re-deliver.
  Hamlet. I never gave you aught.
  OPHELIA. Short.
  GHOST. Only
  GHOST. two lines, so dropped.
  <<stage text is not a speech>>



THE COMEDY OF ERRORS

by William Shakespeare

ANTIPHOLUS. Proceed, Solinus, to procure my fall,
And by the doom of death end woes and all.
ANTIPHOLUS. Yet this my comfort: when your words are done,
<<stage text ends the speech>>
ACT II. not a role
DROMIO. One. Here comes the dromio speaking a long enough line to make a window or two at least.
DROMIO. Two.
DROMIO. Three.



A LONELY PLAY

by William Shakespeare

  SOLO. Only one character, so the play is dropped, whatever the length of the lines.
  SOLO. Again.
  SOLO. And again.
"""


def test_shakespeare_parser_on_tiny_text():
    titles, roles = shakespeare.split_into_roles(GUTENBERG, last_line=None)
    assert titles == ["THE TRAGEDY OF TESTING", "THE COMEDY OF ERRORS"]
    assert set(roles) == {"THE_TRAGEDY_OF_TESTING_HAMLET", "THE_TRAGEDY_OF_TESTING_OPHELIA",
                          "THE_COMEDY_OF_ERRORS_ANTIPHOLUS", "THE_COMEDY_OF_ERRORS_DROMIO"}
    assert roles["THE_TRAGEDY_OF_TESTING_HAMLET"] == [          # names upper-cased: "Hamlet." joins HAMLET
        "To be, or not to be:   that is the question.", "Whether 'tis nobler in the mind to suffer",
        "I humbly thank you; well, well, well.", "I never gave you aught."]
    assert roles["THE_COMEDY_OF_ERRORS_ANTIPHOLUS"] == [
        "Proceed, Solinus, to procure my fall,", "And by the doom of death end woes and all.",
        "Yet this my comfort: when your words are done,"]
    text = shakespeare.role_text(roles["THE_TRAGEDY_OF_TESTING_HAMLET"])
    assert "  " not in text and text.startswith("To be, or not to be: that is") and text.endswith("aught. ")
    d = shakespeare.build(GUTENBERG, last_line=None)
    stream = torch.from_numpy(d["stream"])
    x, y = shakespeare.windows(stream, torch.from_numpy(d["train_starts"]))
    g = d["role_names"].tolist().index("THE_TRAGEDY_OF_TESTING_HAMLET")
    first = int(np.flatnonzero(d["train_groups"] == g)[0])
    assert shakespeare.decode(x[first]) == text[:80] and shakespeare.VOCAB[int(y[first])] == text[80]
    n = len(text) - 80
    assert d["role_windows"][g] == n
    assert (d["train_groups"] == g).sum() == int(0.8 * n)
    assert (d["test_groups"] == g).sum() == max(0, n - int(0.8 * n) - 79)


def test_shakespeare_vocab():
    assert len(shakespeare.VOCAB) == 80 and shakespeare.VOCAB[0] == "\n" and shakespeare.VOCAB[-1] == "}"
    ids = shakespeare.encode("Hi, you!#\u00e9\u2014")
    assert ids.dtype == np.uint8 and len(ids) == 11 and shakespeare.decode(ids[:8]) == "Hi, you!"
    assert (ids[8:] == shakespeare.UNKNOWN_ID).all()                  # outside LEAF's vocabulary
    assert shakespeare.encode("a")[0] == shakespeare.VOCAB.index("a")


def test_shakespeare_loader_on_tiny_text(tmp_path, tmp_cache):
    f = tmp_path / "shakespeare" / "raw_data.txt"
    f.parent.mkdir()
    f.write_text(GUTENBERG)
    with pytest.raises(ChecksumError):
        load_dataset("shakespeare", root=tmp_path)
    # the full-file end-of-plays line of LEAF (124195) lies beyond this text, so everything is read
    ds = load_dataset("shakespeare", root=tmp_path, checksums={"shakespeare/raw_data.txt": md5(f)})
    assert ds.info["n_roles"] == len(ds.info["group_names"]) and ds.train_groups.max() < ds.info["n_roles"]
    x, y = ds.train_x.long(), ds.train_y
    same = ds.train_groups[1:] == ds.train_groups[:-1]
    assert torch.equal(x[1:][same], torch.cat([x[:-1, 1:], y[:-1, None]], 1)[same])
    with pytest.raises(ParameterError, match="train_fraction"):
        load_dataset("shakespeare", root=tmp_path, checksums={"shakespeare/raw_data.txt": md5(f)},
                     train_fraction=0)


# --- augmentation, synthetic data, manifest ---------------------------------------------------------------

def noise(seed, n):
    return augment_noise(n, torch.Generator().manual_seed(seed))


def test_augment_shapes_and_determinism():
    x = torch.randn(16, 3, 32, 32)
    a = random_crop_flip(x, noise(0, 16))
    b = random_crop_flip(x, noise(0, 16))
    c = random_crop_flip(x, noise(1, 16))
    assert a.shape == x.shape and torch.equal(a, b) and not torch.equal(a, c)
    assert random_flip(x, noise(0, 16)).shape == x.shape
    u8 = torch.randint(0, 256, (5, 3, 8, 8), dtype=torch.uint8)
    assert random_crop_flip(u8, noise(0, 5), padding=2).dtype == torch.uint8
    with pytest.raises(ParameterError, match="noise"):
        random_flip(x, noise(0, 15))


def test_augment_of_a_sample_depends_only_on_its_own_bits():
    x = torch.randn(12, 3, 8, 8)
    bits = noise(4, 12)
    whole = random_crop_flip(x, bits, padding=2)
    parts = torch.cat([random_crop_flip(x[i:i + 3], bits[i:i + 3], padding=2) for i in range(0, 12, 3)])
    assert torch.equal(whole, parts)


def test_augment_offsets_and_flips_are_uniform():
    bits = noise(0, 40000)
    flips = (bits & 1).float().mean()
    offsets = torch.bincount((bits >> 1) % 9, minlength=9).float() / len(bits)
    assert abs(flips - 0.5) < 0.01 and (offsets - 1 / 9).abs().max() < 0.01


def test_crop_is_a_shifted_window_and_flip_mirrors():
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).view(2, 1, 6, 6) + 1
    fill = torch.tensor([-5.0])
    out = random_crop(x, noise(3, 2), padding=2, fill=fill)
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2), value=-5.0)
    for i in range(2):
        crops = [padded[i, :, r:r + 6, c:c + 6] for r in range(5) for c in range(5)]
        assert any(torch.equal(out[i], cr) for cr in crops)
    flips = [random_flip(x, noise(s, 2)) for s in range(8)]
    for f in flips:
        for i in range(2):
            assert torch.equal(f[i], x[i]) or torch.equal(f[i], x[i].flip(-1))
    assert any(torch.equal(f[0], x[0].flip(-1)) for f in flips) and any(torch.equal(f[0], x[0]) for f in flips)


def test_dataset_augment_pads_with_black():
    ds = make_synthetic(8, 4, (3, 8, 8), 2, seed=0)
    ds.mean, ds.std, ds.augment = (0.5, 0.4, 0.3), (0.2, 0.2, 0.2), "crop_flip"
    black = ds.pad_value(ds.train_x)
    assert torch.allclose(black, torch.tensor([-2.5, -2.0, -1.5]))
    out = ds.apply_augment(torch.zeros(64, 3, 8, 8) + 9, noise(0, 64))
    vals = set(out[:, 0].unique().tolist())
    assert vals <= {9.0, -2.5} and -2.5 in vals


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_augment_same_on_cuda_as_cpu():
    x = torch.randn(64, 3, 32, 32)
    cpu = random_crop_flip(x, noise(5, 64))
    gpu = random_crop_flip(x.cuda(), noise(5, 64))
    assert torch.equal(cpu, gpu.cpu())


def test_make_synthetic():
    a = make_synthetic(100, 20, (1, 4, 4), 5, seed=7, groups=10)
    b = make_synthetic(100, 20, (1, 4, 4), 5, seed=7, groups=10)
    assert a.train_x.shape == (100, 1, 4, 4) and a.test_x.shape == (20, 1, 4, 4)
    assert torch.equal(a.train_x, b.train_x) and torch.bincount(a.train_y).tolist() == [20] * 5
    assert a.train_groups.unique().numel() == 10 and a.to("cpu").train_x.device.type == "cpu"
    with pytest.raises(ParameterError, match="num_classes"):
        make_synthetic(10, 5, (2,), 1)


def test_uint8_inputs_and_to():
    x = torch.tensor([[[[0, 255]]]], dtype=torch.uint8)
    ds = Dataset("t", 2, x, torch.zeros(1, dtype=torch.long), x, torch.zeros(1, dtype=torch.long),
                 mean=(0.5,), std=(0.25,))
    assert torch.allclose(ds.inputs(x), torch.tensor([[[[-2.0, 2.0]]]]))
    assert ds.to("cpu").inputs(x).dtype == torch.float32


def test_manifest_matches_registry():
    on_disk = json.loads((REPO / "data" / "manifest.json").read_text())
    assert on_disk == registry.manifest()
    assert set(on_disk) == set(DATASET_NAMES)


def test_cache_key_changes_with_content(tmp_cache):
    built = []
    out = cache.arrays("t", cache.key_of("a"), lambda: built.append(1) or {"v": np.arange(3)})
    again = cache.arrays("t", cache.key_of("a"), lambda: built.append(1) or {"v": np.arange(3)})
    other = cache.arrays("t", cache.key_of("b"), lambda: built.append(1) or {"v": np.arange(4)})
    assert built == [1, 1] and np.array_equal(out["v"], again["v"]) and len(other["v"]) == 4


def test_a_changed_byte_with_its_mtime_restored_is_caught(tmp_path, tmp_cache):
    """The memo also keys on the inode's ctime, which a write changes and no user can set back."""
    arrays, sums = make_idx_root(tmp_path)
    load_dataset("mnist", root=tmp_path, checksums=sums)
    f = tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz"
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF                                      # same size, another content
    time.sleep(0.01)
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))      # mtime restored
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_size == st.st_size
    with pytest.raises(ChecksumError, match="t10k-labels"):
        load_dataset("mnist", root=tmp_path, checksums=sums)


class Planted:
    """A pickled object that, unpickled by plain ``pickle``, creates a file: what a planted file could do (a data
    file here, a checkpoint in ``tests/test_checkpoint.py``)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_a_planted_cifar_pickle_runs_nothing(tmp_path):
    from afl.data.vision import _unpickle
    marker = tmp_path / "ran"
    bad = tmp_path / "data_batch_1"
    bad.write_bytes(pickle.dumps({b"data": Planted(marker)}, protocol=2))
    with pytest.raises(ParameterError, match="file=.*data_batch_1.*CIFAR python data file"):
        _unpickle(bad)
    assert not marker.exists()
    good = tmp_path / "test_batch"                       # what a real CIFAR file holds loads as before
    want = {b"data": np.arange(12, dtype=np.uint8).reshape(2, 6), b"labels": [3, 1], b"batch_label": b"x"}
    good.write_bytes(pickle.dumps(want, protocol=2))
    got = _unpickle(good)
    assert np.array_equal(got[b"data"], want[b"data"]) and got[b"labels"] == [3, 1]


def test_first_present_prefers_what_is_here_and_else_the_first_name(tmp_path):
    from afl.data import first_present
    from afl.data.files import _expected
    assert first_present(("cifar10", "mnist"), root=tmp_path) == "cifar10"        # nothing here: the first
    for rel in _expected(registry.SOURCES["mnist"], None):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).mkdir() if rel.endswith("/") else (tmp_path / rel).write_bytes(b"")
    assert first_present(("cifar10", "mnist"), root=tmp_path) == "mnist"
    assert first_present(("fashion-mnist", "cifar10"), root=tmp_path) == "fashion-mnist"
    with pytest.raises(ParameterError, match="dataset='cifar11'"):
        first_present(("cifar11",), root=tmp_path)
    with pytest.raises(ParameterError, match="names"):
        first_present((), root=tmp_path)
