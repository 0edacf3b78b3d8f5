"""LEAF Shakespeare (Caldas et al. 2018, arXiv:1812.01097), rebuilt from the raw complete works.

Follows LEAF's data/shakespeare/preprocess: the text is cut into plays (a play starts at a line holding
"by William Shakespeare", its title is the first non-blank line 2-7 lines above); a speech starts with a
line ``"  NAME. text"`` (``"NAME. text"`` in The Comedy of Errors, whose indentation is off) and continues on
lines indented by four spaces; names are upper-cased. One client ("role") per (play, character) with
more than 2 speech lines; plays with at most one character are dropped. A role's text is its lines
joined by newlines, newlines turned to spaces and runs of spaces squeezed; every 80-character window
predicts the next character. LEAF's train/test split (utils/split_data.py, ``-t sample --tf 0.8``)
is by time: the first ``int(0.8 n)`` windows train, the windows from ``n_train + 79`` on test (no
character of a test target is inside a training window's span).
"""
from __future__ import annotations

import re

import numpy as np

# LEAF models/utils/language_utils.py ALL_LETTERS: the 80-symbol vocabulary.
VOCAB = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
SEQ_LEN = 80
# LEAF maps a character outside VOCAB with str.find -> -1, which its one-hot targets read as the last
# symbol; we map such characters (#, %, *, /, <, =, @, _, `, |, ~ in this text) to that symbol, "}".
UNKNOWN_ID = len(VOCAB) - 1
_LUT = np.full(256, UNKNOWN_ID, dtype=np.uint8)
for _i, _c in enumerate(VOCAB):
    _LUT[ord(_c)] = _i

_SPEECH = re.compile(r"^  ([a-zA-Z][a-zA-Z ]*)\. (.*)")
_CONT = re.compile(r"^    (.*)")
_COE_SPEECH = re.compile(r"^([a-zA-Z][a-zA-Z ]*)\. (.*)")
_COE_CONT = re.compile(r"^(.*)")
_LAST_PLAY_LINE = 124195  # LEAF: the plays end here (index into the lines after the first one)


def encode(text: str) -> np.ndarray:
    """Symbol ids (uint8) of ``text`` in LEAF's vocabulary."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)      # one code point per character
    return np.where(codes < 256, _LUT[np.minimum(codes, 255)], UNKNOWN_ID).astype(np.uint8)


def decode(ids) -> str:
    return "".join(VOCAB[int(i)] for i in ids)


def _title_above(lines: list[str], i: int) -> str:
    for k in range(2, 8):
        if k == 7 or lines[i - k].strip():
            return lines[i - k].strip()
    return ""


def split_into_roles(text: str, last_line: int | None = _LAST_PLAY_LINE) -> tuple[list[str], dict[str, list[str]]]:
    """Parse the complete works into ``(play titles, {role name: [speech lines]})`` as LEAF does.

    Role names are LEAF's user names, ``re.sub(r"\\W+", "_", (play + "_" + NAME).replace(" ", "_"))``.
    ``last_line`` is LEAF's end-of-plays line (``None`` reads to the end; used for small test texts).
    """
    lines = text.splitlines(True)[1:]
    hits = [i for i, line in enumerate(lines) if "by William Shakespeare" in line]
    start = hits[1] - 5 if len(hits) >= 2 else 0   # skip the contents and the sonnets
    lines = lines[start:]
    stop = len(lines) if last_line is None else min(len(lines), last_line - start + 1)
    plays: list[tuple[str, dict[str, list[str]]]] = []
    current, coe, chars = None, False, None
    for i in range(stop):
        line = lines[i]
        if "by William Shakespeare" in line:
            title = _title_above(lines, i)
            coe = title == "THE COMEDY OF ERRORS"
            chars, current = {}, None
            plays.append((title, chars))
            continue
        if chars is None:
            continue
        m = (_COE_SPEECH if coe else _SPEECH).match(line)
        if m:
            name = m.group(1).upper()
            if coe and name.startswith("ACT "):
                current = None
            else:
                chars.setdefault(name, []).append(m.group(2))
                current = name
            continue
        if current:
            m = (_COE_CONT if coe else _CONT).match(line)
            if m:
                if coe and m.group(1).startswith("<"):
                    current = None
                else:
                    chars[current].append(m.group(1))
    roles: dict[str, list[str]] = {}
    kept = [(t, c) for t, c in plays if len(c) > 1]
    for title, chars in kept:
        for name, speech in chars.items():
            if len(speech) <= 2:
                continue
            user = re.sub(r"\W+", "_", (title + "_" + name).replace(" ", "_"))
            roles.setdefault(user, []).extend(speech)
    return [t for t, _ in kept], roles


def role_text(speech: list[str]) -> str:
    """LEAF's per-role text: lines + newline each, newlines to spaces, 2+ spaces squeezed to one."""
    return re.sub(r"  +", " ", ("\n".join(speech) + "\n").replace("\n", " "))


def build(text: str, train_fraction: float = 0.8, leaf_split: bool = False,
          last_line: int | None = _LAST_PLAY_LINE) -> dict[str, np.ndarray]:
    """Parse ``text`` into a compact form: one id stream with every role's text back to back, and for
    each split the stream offsets where its 80-symbol windows start, their role ids.

    Roles with no window (text of at most 80 characters) are dropped, as LEAF's gen_all_data does.
    ``leaf_split=True`` also drops, as LEAF's split_data.py does, roles left without a test window
    (about 40 % of the roles, the short ones); by default every role is kept as a client.
    """
    titles, roles = split_into_roles(text, last_line)
    stream, names, n_windows = [], [], []
    train_s, train_g, test_s, test_g = [], [], [], []
    offset = 0
    for name, speech in roles.items():
        t = role_text(speech)
        n = len(t) - SEQ_LEN
        if n <= 0:
            continue
        n_train = n if train_fraction >= 1 else (1 if n == 2 else max(1, int(train_fraction * n)))
        test = offset + np.arange(n_train + SEQ_LEN - 1, n)
        if leaf_split and (n < 2 or len(test) == 0):
            continue
        g = len(names)
        names.append(name)
        n_windows.append(n)
        train_s.append(offset + np.arange(n_train))
        test_s.append(test)
        train_g.append(np.full(n_train, g))
        test_g.append(np.full(len(test_s[-1]), g))
        stream.append(t)
        offset += len(t)
    cat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)  # noqa: E731
    return {"stream": encode("".join(stream)), "train_starts": cat(train_s), "train_groups": cat(train_g),
            "test_starts": cat(test_s), "test_groups": cat(test_g), "role_names": np.array(names),
            "role_windows": np.array(n_windows, np.int64), "plays": np.array(titles)}


def windows(stream, starts):
    """Materialize ``x[i] = stream[starts[i] : starts[i] + 80]`` and ``y[i] = stream[starts[i] + 80]``
    (torch tensors in, torch tensors out; x keeps the stream's uint8 dtype, y is int64)."""
    view = stream.unfold(0, SEQ_LEN, 1)
    return view[starts], stream[starts + SEQ_LEN].long()
