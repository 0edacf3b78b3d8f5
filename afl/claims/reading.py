"""Reading a committed result so that bad data cannot fool a verdict: every value typed and finite, every error
naming the file and the key.

:func:`load` refuses what is not a regular JSON file inside the repository (a symlink loop, a link out of it, a
truncated file, NaN or Infinity); :class:`Result` reads values by key path and raises :class:`BadResult` (a
ValueError: ``afl: error: <file>: <key>: <what>``) for a value of the wrong kind, and :class:`NotCovered` (a
LookupError) where a mapping lacks the key asked for -- a row that was not run, which is not an error.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path


class BadResult(ValueError):
    """A result file holds something afl cannot read as a result: the file, the key and what was expected."""

    def __init__(self, file, key: str, what: str):
        self.file, self.key, self.what = str(file), key, what
        super().__init__(f"{file}: {key + ': ' if key else ''}{what}")

    def __reduce__(self):
        return type(self), (self.file, self.key, self.what)


class NotCovered(LookupError):
    """A result lacks the row or cell a claim reads (it was not run): the file and the key path (or, where the
    whole file is missing, a sentence saying so)."""

    def __init__(self, file, key: str, sentence: str = ""):
        self.file, self.key = str(file), key
        super().__init__(sentence or f"{file} has no {key}")


def key_text(path) -> str:
    """A key path as the errors and the board print it: ``rows›fedavg›iid``."""
    return "›".join(str(k) for k in path)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every link followed, lies inside ``root``."""
    try:
        Path(path).resolve(strict=False).relative_to(Path(root).resolve())
        return True
    except (ValueError, RuntimeError, OSError):
        return False


def exists(path: Path) -> bool:
    """Whether anything stands at ``path`` (a broken or looping link too: it must be reported, not skipped)."""
    return os.path.lexists(path)


def load(path: Path, root: Path) -> dict:
    """The JSON mapping at ``path``, which must be a regular file inside ``root`` (links followed), valid JSON
    without NaN or Infinity; a :class:`BadResult` naming the file otherwise."""
    path = Path(path)
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise BadResult(shown, "", f"cannot be followed ({type(error).__name__}: a broken link or a link loop)") \
            from None
    if not inside(target, root):
        raise BadResult(shown, "", f"links outside the repository (to {target}): a result must live in it")
    if not target.is_file():
        raise BadResult(shown, "", "is not a regular file")
    try:
        data = json.loads(target.read_bytes().decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise BadResult(shown, "", "is not UTF-8 text") from None
    except OSError as error:
        raise BadResult(shown, "", f"cannot be read ({error.strerror or error})") from None
    except ValueError as error:
        raise BadResult(shown, "", f"is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise BadResult(shown, "", f"holds a {type(data).__name__}, not a mapping of a result")
    return data


class Result:
    """A loaded result (:func:`load`) read by key paths, each value checked for its kind; ``others`` loads another
    committed result by its name (a claim comparing two results reads the second through :meth:`other`)."""

    def __init__(self, data: dict, file, others=None):
        self.data, self.file, self.others = data, str(file), others

    def other(self, name: str) -> "Result":
        """The committed result ``results/<name>.json``; :class:`NotCovered` where there is none."""
        if self.others is None:
            raise NotCovered(self.file, f"a second result, results/{name}.json")
        return self.others(name)

    def at(self, path) -> object:
        """The node at ``path`` (a ``"field=value"`` key picks the one item of a list whose ``field`` is ``value``);
        :class:`NotCovered` where a mapping lacks a key, :class:`BadResult` where a node on the way is not a
        mapping."""
        node, walked = self.data, []
        for key in path:
            if isinstance(node, list) and isinstance(key, str) and "=" in key:     # the item whose field is a value
                field, _, value = key.partition("=")
                walked.append(key)
                hits = [item for item in node if isinstance(item, dict) and str(item.get(field)) == value]
                if not hits:
                    raise NotCovered(self.file, key_text(walked))
                if len(hits) > 1:
                    raise BadResult(self.file, key_text(walked), f"one item with {key}, not {len(hits)}")
                node = hits[0]
                continue
            if not isinstance(node, dict):
                raise BadResult(self.file, key_text(walked), f"a mapping (to read {key!r} in it), not a "
                                f"{type(node).__name__}")
            walked.append(key)
            if key not in node:
                raise NotCovered(self.file, key_text(walked))
            node = node[key]
        return node

    def mapping(self, path) -> dict:
        node = self.at(path)
        if not isinstance(node, dict):
            raise BadResult(self.file, key_text(path), f"a mapping, not {_kind(node)}")
        return node

    def number(self, path, *, positive: bool = False) -> float:
        """A finite number (not a bool, not a string), > 0 where ``positive``."""
        return self.check_number(self.at(path), key_text(path), positive)

    def numbers(self, path, *, none: bool = False, positive: bool = False) -> list:
        """A non-empty list of finite numbers; None entries allowed where ``none`` (a seed that never reached)."""
        node = self.at(path)
        key = key_text(path)
        if not isinstance(node, list) or not node:
            raise BadResult(self.file, key, f"a non-empty list of numbers, not {_kind(node)}")
        return [None if v is None and none else self.check_number(v, f"{key}[{i}]", positive)
                for i, v in enumerate(node)]

    def text(self, path) -> str:
        node = self.at(path)
        if not isinstance(node, str):
            raise BadResult(self.file, key_text(path), f"a string, not {_kind(node)}")
        return node

    def check_number(self, value, key: str, positive: bool = False) -> float:
        """``value`` (found at ``key``) as a finite float, > 0 where ``positive``; a :class:`BadResult` otherwise."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadResult(self.file, key, f"a number, not {_kind(value)}")
        if not math.isfinite(value):
            raise BadResult(self.file, key, f"a finite number, not {value}")
        if positive and value <= 0:
            raise BadResult(self.file, key, f"a number > 0 (it divides), not {value}")
        return float(value)


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return f"a {type(value).__name__}" if isinstance(value, (dict, list, bool)) else repr(value)


__all__ = ["BadResult", "NotCovered", "Result", "load", "inside", "exists", "key_text"]
