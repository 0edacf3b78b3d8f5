"""Locate a dataset's files under a data root, verify their MD5, download them when allowed.

Roots are searched in this order: an explicit ``root`` (then only it), ``$AFL_DATA``, the repository's
``data/`` folder (when afl runs from a checkout), and ``<cache>/data`` (``~/.cache/afl/data``).
Roots are only read; downloads go to the first writable root. MD5s are memoised in the cache by
(path, size, mtime) so a second load does not hash again.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from afl.errors import ChecksumError, DataMissingError, ParameterError
from afl.data import cache
from afl.data.registry import DATASET_NAMES, SOURCES, Source

_REPO = Path(__file__).resolve().parents[2]


def project_data_dir() -> Path | None:
    """The checkout's top-level ``data/`` folder, or None when afl is installed elsewhere."""
    if (_REPO / "pyproject.toml").is_file() and (_REPO / "afl").is_dir():
        return _REPO / "data"
    return None


def data_roots(root=None) -> list[tuple[Path, str]]:
    """Candidate roots with where each came from, in search order."""
    if root is not None:
        return [(Path(root).expanduser(), "root argument")]
    out = []
    if os.environ.get("AFL_DATA"):
        out.append((Path(os.environ["AFL_DATA"]).expanduser(), "$AFL_DATA"))
    proj = project_data_dir()
    if proj is not None:
        out.append((proj, "project data/ folder"))
    out.append((cache.cache_dir() / "data", "cache data folder"))
    seen, uniq = set(), []
    for p, why in out:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            uniq.append((p, why))
    return uniq


def download_allowed(download: bool | None) -> bool:
    """``download=None`` means: allowed unless ``AFL_DOWNLOAD`` is 0/false/no/off."""
    if download is not None:
        return bool(download)
    return os.environ.get("AFL_DOWNLOAD", "1").strip().lower() not in ("0", "false", "no", "off")


def md5sum(path: Path, chunk: int = 1 << 20, fresh: bool = False) -> str:
    """MD5 of a file, memoised in the cache by (absolute path, size, mtime_ns, ctime_ns) to make loading fast: a
    write changes the inode's ctime, which no user can set back (an mtime can be restored, ``os.utime``);
    ``fresh=True`` always reads the file (``afl data verify``)."""
    path = Path(path)
    st = path.stat()
    key = os.path.abspath(path)
    stamp = f"{st.st_mtime_ns}:{st.st_ctime_ns}"
    hit = None if fresh else cache.md5_memo_get(key, st.st_size, stamp)
    if hit is not None:
        return hit
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    digest = h.hexdigest()
    cache.md5_memo_put(key, st.st_size, stamp, digest)
    return digest


def check_md5(path: Path, expected: str, dataset: str, fresh: bool = False) -> str:
    """Return the file's MD5; raise :class:`ChecksumError` naming file, expected and actual if it differs."""
    actual = md5sum(path, fresh=fresh)
    if actual != expected:
        raise ChecksumError(
            f"dataset {dataset!r}: file {path} has md5 {actual}, expected {expected}. The file is corrupt "
            f"or from another release: replace it (delete it, then `afl data download {dataset}`), or, if you "
            f"trust it, pass checksums={{'<relative path>': '<md5>'}} or verify=False to load_dataset.")
    return actual


@dataclass
class Located:
    """A dataset found on disk: its root, and the MD5 of every checked file (relative path -> md5)."""
    name: str
    root: Path
    md5: dict[str, str]

    def path(self, rel: str) -> Path:
        return self.root / rel


def _present(root: Path, rel: str) -> bool:
    p = root / rel
    return p.is_dir() if rel.endswith("/") else p.is_file()


def _holding(roots, expected) -> Path | None:
    """The first of ``roots`` (``(path, why)`` pairs) that holds every expected file, else None."""
    return next((r for r, _ in roots if all(_present(r, rel) for rel in expected)), None)


def _expected(source: Source, checksums: dict | None) -> dict[str, str | None]:
    exp = dict(source.files)
    for rel, m in (checksums or {}).items():
        if rel not in exp:
            raise ParameterError("checksums", rel, "relative paths of this dataset: " + ", ".join(exp))
        exp[rel] = m
    return exp


def locate(name: str, root=None, download: bool | None = None, checksums: dict | None = None,
           verify: bool = True, fresh: bool = False) -> Located:
    """Find (or download) every file of dataset ``name`` and verify the MD5s.

    ``checksums`` overrides the published MD5 of some files (e.g. files written by a test or another
    release); ``verify=False`` skips MD5 checks (the files are still required); ``fresh=True`` recomputes
    every MD5 instead of trusting the memo (``afl data verify``).
    """
    if name not in SOURCES:
        raise ParameterError("dataset", name, "one of " + ", ".join(DATASET_NAMES))
    source = SOURCES[name]
    expected = _expected(source, checksums)
    roots = data_roots(root)
    found = _holding(roots, expected)
    if found is None:
        reason = "downloading is disabled (download=False or AFL_DOWNLOAD=0)"
        if download_allowed(download) and (source.archive or source.urls):
            try:
                found = _download(source, roots)
                reason = f"the download into {found} finished without providing every file"
            except DataMissingError:
                raise
            except Exception as e:  # network, disk, archive errors: report, do not hide
                reason = f"the download failed: {type(e).__name__}: {e}"
        elif download_allowed(download):
            reason = "no automatic download exists for this dataset"
        if found is None or not all(_present(found, rel) for rel in expected):
            raise DataMissingError(_missing_message(source, expected, roots, reason))
    md5 = {}
    for rel, m in expected.items():
        if m is not None and verify:
            md5[rel] = check_md5(found / rel, m, name, fresh=fresh)
    return Located(name, found, md5)


def first_present(names, root=None) -> str:
    """The first of ``names`` whose files are all on this machine (found, never downloaded; MD5s checked when
    loaded), else the first name (which a load then downloads, if it can): a notebook prefers a local mirror's
    copy and falls back on a dataset ``afl data download`` fetches."""
    if not names:
        raise ParameterError("names", names, "at least one dataset name")
    for name in names:
        if name not in SOURCES:
            raise ParameterError("dataset", name, "one of " + ", ".join(DATASET_NAMES))
        if _holding(data_roots(root), _expected(SOURCES[name], None)) is not None:
            return name
    return names[0]


def _missing_message(source: Source, expected, roots, reason) -> str:
    best = max(roots, key=lambda rw: sum(_present(rw[0], rel) for rel in expected))[0]
    missing = [rel for rel in expected if not _present(best, rel)]
    lines = [f"dataset {source.name!r}: missing file {missing[0]}"
             + (f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if len(missing) > 1 else ""),
             "Directories searched:"]
    lines += [f"  {p}  ({why})" for p, why in roots]
    lines.append(f"Not downloaded: {reason}.")
    lines.append(f"To supply it: {source.how}; then set AFL_DATA=<root> or pass load_dataset("
                 f"{source.name!r}, root=<root>).")
    urls = [source.archive.url] if source.archive else sorted({u for us in source.urls.values() for u in us})
    if urls:
        lines.append("Download URL(s): " + ", ".join(urls) + f". Or let afl fetch it: `afl data download "
                     f"{source.name}` (in Python: load_dataset({source.name!r}, download=True)).")
    return "\n".join(lines)


def _writable(p: Path) -> bool:
    q = Path(os.path.abspath(p))
    while not q.exists():
        q = q.parent
    return os.access(q, os.W_OK)


def _download(source: Source, roots) -> Path:
    """Download into the first writable root; return that root. Partial files are removed on failure."""
    from torchvision.datasets.utils import download_and_extract_archive, download_url

    candidates = [r for r, _ in roots if _writable(r)]
    if not candidates:
        raise DataMissingError(_missing_message(source, source.files, roots, "no searched directory is writable"))
    dest = candidates[0]
    dest.mkdir(parents=True, exist_ok=True)
    if source.archive is not None:
        a = source.archive
        try:
            download_and_extract_archive(a.url, download_root=str(dest), filename=a.filename, md5=a.md5,
                                         remove_finished=True)
        finally:
            (dest / a.filename).unlink(missing_ok=True)
        return dest
    for rel, urls in source.urls.items():
        target = dest / rel
        if target.is_file():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        errors = []
        for url in urls:
            part = target.with_name(target.name + ".part")
            try:
                if source.name == "shakespeare":
                    _fetch_gutenberg_text(url, part)
                else:
                    download_url(url, str(target.parent), part.name, md5=source.files.get(rel))
                os.replace(part, target)
                break
            except Exception as e:
                errors.append(f"{url}: {type(e).__name__}: {e}")
            finally:
                part.unlink(missing_ok=True)
        else:
            raise OSError("; ".join(errors))
    return dest


def _fetch_gutenberg_text(url: str, target: Path) -> None:
    """LEAF's get_data.sh: fetch 1994-01-100.zip, keep 100.txt as raw_data.txt (line endings made LF)."""
    from torchvision.datasets.utils import download_url

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        download_url(url, tmp, "gutenberg.zip", md5=None)
        with zipfile.ZipFile(Path(tmp) / "gutenberg.zip") as z:
            member = next(n for n in z.namelist() if n.lower().endswith("100.txt"))
            text = z.read(member)
        out = Path(tmp) / "raw_data.txt"
        out.write_bytes(text.replace(b"\r\n", b"\n"))
        shutil.move(str(out), target)
