"""Long runs: where an experiment's runs are saved, so that nothing computed is lost, and their progress bar.

:func:`output_dir` checks and creates the output folder before anything runs. :class:`PartialRuns` is the
``<experiment>.partial.jsonl`` file beside the results: every finished run is appended as one JSON line, an
interrupted experiment is resumed from it by default, and it is deleted only once the results are written or
when the user asks (``fresh``). Each line carries the key of the setting it was computed under
(:func:`setting_key`), so runs of another setting are never mixed in: they make resuming an error that says
what to do.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from pathlib import Path

from .errors import ParameterError


def output_dir(path) -> Path:
    """``path`` as a created, writable directory; a :class:`ParameterError` naming ``out`` otherwise."""
    path = Path(path).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ParameterError("out", str(path), f"a directory afl can create ({e.strerror or e})") from None
    if not os.access(path, os.W_OK):
        raise ParameterError("out", str(path), "a directory afl can write to (permission denied)")
    return path


def setting_key(setting, ignore=("seeds",)) -> str:
    """A short key of a setting (a dataclass or dict) without the fields in ``ignore``: runs computed under
    equal keys are interchangeable."""
    data = asdict(setting) if is_dataclass(setting) else dict(setting)
    data = {k: v for k, v in data.items() if k not in ignore}
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def rescue_dir() -> Path:
    """Where this process saves what its output folder would not take: ``<temporary folder>/afl-rescue-<pid>``."""
    return Path(tempfile.gettempdir()) / f"afl-rescue-{os.getpid()}"


class PartialRuns:
    """The JSON-lines file of an experiment's finished runs, each tagged with its setting's key."""

    def __init__(self, path, key: str):
        self.path, self.key = Path(path), key
        self.rescue: Path | None = None       # where runs go once ``path`` cannot be written (:meth:`append`)

    def load(self) -> list[dict]:
        """The saved runs of this setting. A damaged line (cut off by an interrupted write, or JSON that is not a
        run) is skipped with a warning that names it, and that run is computed again; runs of another setting raise
        a :class:`ParameterError` (discard them with ``fresh``)."""
        runs = []
        for i, run in self._lines():
            if run is None:
                warnings.warn(f"afl: {self.path}, line {i + 1}: not a saved run (an interrupted write, or an edit); "
                              "skipped, that run is computed again", stacklevel=2)
                continue
            if run["setting_key"] != self.key:
                raise ParameterError("partial file", str(self.path),
                                     "runs of the setting being run, but it holds runs of another setting; rerun "
                                     "with --fresh to discard them, or write elsewhere with --out")
            runs.append(run)
        return runs

    def append(self, run: dict) -> None:
        """Add a finished run as one line, on a line of its own even after a cut-off one, flushed to the disk.
        Where the file cannot be written (a folder that became read-only, a full disk) the run goes to a file in the
        temporary folder instead, said once (:attr:`rescue`): the command goes on, its runs in memory too."""
        line = (json.dumps(run | {"setting_key": self.key}) + "\n").encode()
        if self.rescue is None:
            try:
                self._append(self.path, line)
                return
            except OSError as error:
                self.rescue = rescue_dir() / self.path.name
                warnings.warn(f"afl: cannot write {self.path} ({error.strerror or error}); finished runs are kept in "
                              f"memory and saved to {self.rescue} (the same command with --out {self.rescue.parent} "
                              "resumes from them)", stacklevel=2)
        try:
            self.rescue.parent.mkdir(parents=True, exist_ok=True)
            self._append(self.rescue, line)
        except OSError:
            pass                                  # in memory only: the result is written when the grid ends

    @staticmethod
    def _append(path: Path, line: bytes) -> None:
        with open(path, "a+b") as f:
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    line = b"\n" + line
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)

    def _lines(self):
        """``(index, run)`` for each non-blank line; ``run`` is None where the line is not a saved run."""
        if not self.path.is_file():
            return
        for i, line in enumerate(self.path.read_text().splitlines()):
            if line.strip():
                try:
                    run = json.loads(line)
                except ValueError:
                    run = None
                yield i, run if isinstance(run, dict) and "setting_key" in run else None

    def saved(self) -> list[dict]:
        """The runs saved so far, of any setting (readable lines; a line cut off by an interruption is not one)."""
        return [run for _, run in self._lines() if run is not None]

    def count(self) -> int:
        """Runs saved so far (readable lines, of any setting)."""
        return len(self.saved())


def progress_bar(total: int, enabled: bool = True, **kwargs):
    """A tqdm bar on stderr (never in checked notebook outputs: pass ``enabled=False`` there)."""
    from tqdm.auto import tqdm
    return tqdm(total=total, disable=not enabled, leave=False, **kwargs)


_running = threading.local()        # .key: the run this thread simulates (set by simulating())
_watching: RunProgress | None = None


class RunProgress:
    """The bar of a grid's runs. It moves as each run's simulated time advances (:func:`report_progress`), not
    only as runs end, so that a run of an hour shows its own progress: ``3.42/16 runs``. ``at_most``: runs may stop
    before their end (at a target), so the time left is a bound: ``[12:00, at most 2:30:00 left]``."""

    def __init__(self, total: int, enabled: bool = True, done: int = 0, description: str = "", at_most: bool = False,
                 **bar_options):
        left = "{elapsed}, at most {remaining} left" if at_most else "{elapsed}<{remaining}"
        self.bar = progress_bar(total, enabled, desc=description,
                                bar_format="{l_bar}{bar}| {n:.2f}/{total} runs [" + left + "]", **bar_options)
        self.done = done
        self.live: dict = {}
        self._show(counted=False)

    def advance(self, key, fraction: float, resumed: bool = False) -> None:
        """Run ``key`` has done ``fraction`` of its simulated time (``resumed``: it goes on from a checkpoint there,
        a head start that the bar's speed and time left do not count)."""
        self.live[key] = fraction
        self._show(counted=not resumed)

    def finished(self, key) -> None:
        self.live.pop(key, None)
        self.done += 1
        self._show()

    def _show(self, counted: bool = True) -> None:
        """Move the bar to the runs done plus the live runs' fractions, computed afresh (summing the steps would
        drift past the total by float rounding). A move not ``counted`` (runs done earlier, a resumed run's head
        start) is added to where tqdm measures speed from (its ``initial`` and ``last_print_n``), as tqdm does for
        its own ``initial``."""
        step = self.done + sum(self.live.values()) - self.bar.n
        if counted or self.bar.disable:
            self.bar.update(step)
            return
        self.bar.n += step
        self.bar.initial += step
        self.bar.last_print_n += step
        self.bar.refresh()

    def __enter__(self) -> RunProgress:
        global _watching
        self._outer, _watching = _watching, self
        return self

    def __exit__(self, *exc) -> None:
        global _watching
        _watching = self._outer
        self.bar.close()


@contextmanager
def simulating(key):
    """Within: this thread simulates run ``key``, whose :func:`report_progress` calls move the bar."""
    outer = getattr(_running, "key", None)
    _running.key = key
    try:
        yield
    finally:
        _running.key = outer


def report_progress(fraction: float, resumed: bool = False) -> None:
    """Called as a run's simulated time advances (``fraction`` of it done; ``resumed``: the run goes on from a
    checkpoint there); moves the bar of the grid it belongs to, if any (a fleet runs one thread at a time, so this
    never races)."""
    key = getattr(_running, "key", None)
    if key is not None:
        advance(key, min(max(fraction, 0.0), 1.0), resumed)


def advance(key, fraction: float, resumed: bool = False) -> None:
    """Move the watching bar, if any, to ``fraction`` of run ``key`` (reports forwarded from another process)."""
    if _watching is not None:
        _watching.advance(key, fraction, resumed)


def watch(watcher) -> None:
    """Send this process's progress reports to ``watcher.advance(key, fraction, resumed)`` (a process of a grid spread
    over processes forwards them to the one that shows the bar: :func:`afl.fleet.run_in_processes`)."""
    global _watching
    _watching = watcher


__all__ = ["output_dir", "setting_key", "PartialRuns", "progress_bar", "RunProgress", "simulating",
           "report_progress", "advance", "watch"]
