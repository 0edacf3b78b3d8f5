"""Datasets packed for a machine without internet (``afl data pack`` / ``afl data unpack``).

``pack`` writes each file of a dataset, verified where afl finds it, as ``<to>/<relative path>.xz`` beside a
``.md5`` stamp holding the registry's MD5 of its content (the CIFAR-10 JPEG copy: 56 MB as it is, 18 MB packed).
``unpack`` decompresses every ``*.xz`` of such a folder into a data root and checks each file's MD5 against its
stamp; a missing stamp, a damaged ``.xz`` or a wrong MD5 is an error naming the file, and the file is not left in
place. Both write only into the folders they are given, never through a symbolic link: every folder below the
destination, and the file itself, must not be one (a file is written beside its place, then renamed onto it).
"""
from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tempfile
from pathlib import Path

from afl.errors import ChecksumError, DataMissingError, ParameterError
from afl.data.files import locate


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _place(dest: Path, rel: Path, option: str) -> Path:
    """``dest / rel``, its folders made, after checking that neither ``dest``'s folders below it nor the file are
    symbolic links and that it stays inside ``dest``."""
    if rel.is_absolute() or ".." in rel.parts:
        raise ParameterError(option, str(rel), "a path inside the destination folder")
    target = dest
    for part in rel.parts:
        target = target / part
        if target.is_symlink():
            raise ParameterError(option, str(dest), f"a folder with no symbolic link on the way ({target} is one, "
                                 "and afl writes nothing through a link)")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _write(target: Path, fill) -> None:
    """Create a new file beside ``target`` (never following a link), ``fill(file)`` it, rename it onto ``target``."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def pack(names, to: Path, root=None) -> list[Path]:
    """Each file of the datasets ``names`` (found under ``root`` or afl's search path, MD5s verified) as
    ``to/<relative path>.xz`` with its ``.md5`` stamp; a file packed before from the same content is kept."""
    to = Path(to)
    out = []
    for name in dict.fromkeys(names):
        found = locate(name, root=root, download=False)
        for rel, md5 in found.md5.items():
            target = _place(to, Path(f"{rel}.xz"), "--to")
            stamp = _place(to, Path(f"{rel}.xz.md5"), "--to")
            if not (target.is_file() and stamp.is_file() and stamp.read_text().strip() == md5):
                with open(found.path(rel), "rb") as src:
                    _write(target, lambda f: _compress(src, f))
                _write(stamp, lambda f: f.write(f"{md5}\n".encode()))
            out.append(target)
    return out


def _compress(src, f) -> None:
    with lzma.open(f, "wb", preset=9) as xz:
        shutil.copyfileobj(src, xz, 1 << 20)


def unpack(src: Path, to: Path) -> Path:
    """Every ``*.xz`` under ``src`` (written by :func:`pack`) decompressed to the same relative path under ``to``, its
    MD5 checked against its stamp; a file already there with that MD5 is kept. Returns ``to``, a data root
    (``AFL_DATA`` or ``--root``)."""
    src, to = Path(src), Path(to)
    if not src.is_dir():
        raise DataMissingError(f"src={str(src)!r}: a folder written by 'afl data pack' (no such folder)")
    files = sorted(src.rglob("*.xz"))
    if not files:
        raise DataMissingError(f"src={str(src)!r}: a folder written by 'afl data pack' (it holds no *.xz file)")
    for xz in files:
        stamp = xz.with_name(xz.name + ".md5")
        try:
            want = stamp.read_text().strip()
        except OSError:
            raise DataMissingError(f"{stamp}: the MD5 stamp of {xz.name} is missing (pack it again with "
                                   "'afl data pack')") from None
        if len(want) != 32 or any(c not in "0123456789abcdef" for c in want):
            raise ChecksumError(f"{stamp}: an MD5 (32 hex digits), not {want[:40]!r} (pack it again)")
        target = _place(to, xz.relative_to(src).with_suffix(""), "--to")
        if target.is_file() and _md5(target) == want:
            continue
        try:
            with lzma.open(xz, "rb") as f:
                _write(target, lambda out: _checked_copy(f, out, want, xz))
        except (lzma.LZMAError, EOFError) as error:
            raise ChecksumError(f"{xz}: a damaged xz file ({error}); pack it again") from None
    return to


def _checked_copy(f, out, want: str, xz: Path) -> None:
    h = hashlib.md5()
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
        out.write(block)
    if h.hexdigest() != want:
        raise ChecksumError(f"{xz}: unpacks to MD5 {h.hexdigest()}, its stamp says {want} (the pack is corrupt; "
                            "pack it again)")


__all__ = ["pack", "unpack"]
