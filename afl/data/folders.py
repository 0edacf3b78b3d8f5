"""Readers for the user-supplied image-folder sets: TinyImageNet (CS231n layout) and CelebA as split by
LEAF. Images are decoded with PIL in a thread pool and returned as uint8 (N, 3, H, W)."""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from afl.data.cache import key_of


def _decode_all(paths: list[Path], size: tuple[int, int] | None) -> np.ndarray:
    """Decode ``paths`` to RGB uint8 (N, H, W, 3); resize to ``size`` (w, h) like LEAF (PIL bicubic)."""
    from PIL import Image

    def one(p):
        with Image.open(p) as im:
            if size is not None and im.size != size:
                im = im.resize(size, Image.BICUBIC)
            return np.asarray(im.convert("RGB"))

    if not paths:
        raise ValueError("no images to decode")
    first = one(paths[0])
    out = np.empty((len(paths),) + first.shape, dtype=np.uint8)

    def fill(i):
        a = one(paths[i])
        if a.shape != first.shape:
            raise ValueError(f"{paths[i]}: image shape {a.shape}, expected {first.shape}")
        out[i] = a

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(fill, range(len(paths)), chunksize=256))
    return out


def _listing_signature(paths: list[Path]) -> str:
    return key_of(*(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in paths))


# --- TinyImageNet -----------------------------------------------------------------------------------

def tinyimagenet_index(root: Path):
    """Image paths and labels of TinyImageNet's train and val splits; classes in sorted-wnid order
    (torchvision ImageFolder's order). The unlabelled ``test/`` folder is not used; val is the test set."""
    base = root / "tiny-imagenet-200"
    wnids = sorted(w.strip() for w in (base / "wnids.txt").read_text().split() if w.strip())
    cls = {w: i for i, w in enumerate(wnids)}
    train_p, train_y = [], []
    for w in wnids:
        folder = base / "train" / w / "images"
        if not folder.is_dir():
            raise ValueError(f"TinyImageNet: missing folder {folder} for class {w} listed in wnids.txt")
        files = sorted(f for f in os.listdir(folder) if f.lower().endswith((".jpeg", ".jpg", ".png")))
        train_p += [folder / f for f in files]
        train_y += [cls[w]] * len(files)
    test_p, test_y = [], []
    for line in (base / "val" / "val_annotations.txt").read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        if parts[1] not in cls:
            raise ValueError(f"TinyImageNet: val_annotations.txt names class {parts[1]} absent from wnids.txt")
        test_p.append(base / "val" / "images" / parts[0])
        test_y.append(cls[parts[1]])
    return wnids, train_p, np.array(train_y, np.int64), test_p, np.array(test_y, np.int64)


def tinyimagenet_signature(root: Path) -> str:
    wnids, tp, _, vp, _ = tinyimagenet_index(root)
    return _listing_signature([root / "tiny-imagenet-200" / "wnids.txt",
                               root / "tiny-imagenet-200" / "val" / "val_annotations.txt"] + tp + vp)


def load_tinyimagenet(root: Path) -> dict[str, np.ndarray]:
    wnids, tp, ty, vp, vy = tinyimagenet_index(root)
    return {"train_x": _decode_all(tp, None).transpose(0, 3, 1, 2), "train_y": ty,
            "test_x": _decode_all(vp, None).transpose(0, 3, 1, 2), "test_y": vy,
            "label_names": np.array(wnids)}


# --- CelebA (LEAF) ------------------------------------------------------------------------------------

CELEBA_SIZE = 84  # LEAF models/celeba/cnn.py: IMAGE_SIZE = 84, Image.resize((84, 84)).convert('RGB')


def _leaf_jsons(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ValueError(f"CelebA: no LEAF .json files in {folder}")
    return files


def celeba_index(root: Path):
    """LEAF json -> (users, per split: image paths, labels, user ids). Users in first-seen order."""
    base = root / "celeba" / "data"
    users: dict[str, int] = {}
    out = {}
    for split in ("train", "test"):
        paths, ys, gs = [], [], []
        for f in _leaf_jsons(base / split):
            d = json.loads(f.read_text())
            for u in d["users"]:
                gid = users.setdefault(u, len(users))
                ud = d["user_data"][u]
                if len(ud["x"]) != len(ud["y"]):
                    raise ValueError(f"CelebA: {f} user {u}: {len(ud['x'])} images but {len(ud['y'])} labels")
                paths += [base / "raw" / "img_align_celeba" / x for x in ud["x"]]
                ys += [int(round(float(y))) for y in ud["y"]]
                gs += [gid] * len(ud["y"])
        out[split] = (paths, np.array(ys, np.int64), np.array(gs, np.int64))
    return list(users), out


def celeba_signature(root: Path, md5_of) -> str:
    """Key from the MD5 of every LEAF json plus the image folder's listing (name, size, mtime)."""
    base = root / "celeba" / "data"
    parts = [md5_of(f) for s in ("train", "test") for f in _leaf_jsons(base / s)]
    img = base / "raw" / "img_align_celeba"
    parts.append(key_of(*(f"{e.name}:{e.stat().st_size}:{e.stat().st_mtime_ns}" for e in os.scandir(img))))
    return key_of(*parts)


def load_celeba(root: Path) -> dict[str, np.ndarray]:
    users, idx = celeba_index(root)
    out = {"group_names": np.array(users)}
    for split, (paths, ys, gs) in idx.items():
        missing = next((p for p in paths if not p.is_file()), None)
        if missing is not None:
            raise FileNotFoundError(f"CelebA: image {missing} named in the LEAF json is missing")
        out[f"{split}_x"] = _decode_all(paths, (CELEBA_SIZE, CELEBA_SIZE)).transpose(0, 3, 1, 2)
        out[f"{split}_y"], out[f"{split}_groups"] = ys, gs
    return out
