"""A writable cache (``$AFL_CACHE`` or ``~/.cache/afl``) for MD5 results and decoded arrays.

Decoded arrays are stored as one ``.npy`` per array in a folder named by a content key (the MD5s or
the size/mtime signature of the source files, plus a format version), so a changed source never hits
a stale entry. Writes are atomic (temporary folder, then rename). An unwritable cache only costs speed.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

FORMAT_VERSION = "1"  # bump when a reader or parser changes what it produces
_memo: dict | None = None
_memo_file: Path | None = None


def cache_dir() -> Path:
    """``$AFL_CACHE`` if set, else ``~/.cache/afl`` (read at every call, so tests can redirect it)."""
    env = os.environ.get("AFL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "afl"


def _load_memo() -> dict:
    global _memo, _memo_file
    f = cache_dir() / "md5.json"
    if _memo is None or _memo_file != f:
        try:
            _memo = json.loads(f.read_text())
        except (OSError, ValueError):
            _memo = {}
        _memo_file = f
    return _memo


def md5_memo_get(path: str, size: int, stamp: str) -> str | None:
    """The memoised MD5 of ``path`` if its size and ``stamp`` (the file's times) are those it was computed at."""
    entry = _load_memo().get(path)
    if entry and entry[0] == size and entry[1] == stamp:
        return entry[2]
    return None


def md5_memo_put(path: str, size: int, stamp: str, md5: str) -> None:
    memo = _load_memo()
    memo[path] = [size, stamp, md5]
    f = cache_dir() / "md5.json"
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=f.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            json.dump(memo, out)
        os.replace(tmp, f)
    except OSError:
        pass


def key_of(*parts) -> str:
    """A short content key from strings (file MD5s, signatures, options)."""
    h = hashlib.sha1(FORMAT_VERSION.encode())
    for p in parts:
        h.update(b"\0" + str(p).encode())
    return h.hexdigest()[:20]


def arrays(tag: str, key: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Return the arrays cached under ``<cache>/arrays/<tag>-<key>/``, building and storing them if absent."""
    folder = cache_dir() / "arrays" / f"{tag}-{key}"
    done = folder / "DONE"
    if done.is_file():
        try:
            names = json.loads(done.read_text())
            return {n: np.load(folder / f"{n}.npy", allow_pickle=False) for n in names}
        except (OSError, ValueError):
            pass  # damaged entry: rebuild below
    out = {n: a if a.flags.writeable else a.copy() for n, a in build().items()}
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{tag}-"))
        for n, a in out.items():
            np.save(tmp / f"{n}.npy", np.ascontiguousarray(a), allow_pickle=False)
        (tmp / "DONE").write_text(json.dumps(list(out)))
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        warnings.warn(f"afl: could not write the data cache in {folder.parent} ({e}); set AFL_CACHE to a "
                      "writable folder to make later loads fast", stacklevel=2)
    return out
