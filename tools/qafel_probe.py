"""What QAFeL's probe tools (``tools/qafel_*.py``) share: their command line, the command a result records, the
setting they run (Table 1's, at the paper's load unless quick) and the committed runs they compare with.

Not a tool itself; the tools import it from their own folder.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.repro import qafel as qr  # noqa: E402
from afl.scoreboard.qafel import LOAD_RUN  # noqa: E402

#: options a recorded command names last, in this order (what the tests read back from committed commands)
LAST = ("against", "out")
#: the 2-bit client's rows (2/2, 2/4, 2/8): the rows §3's 2/2 question compares
TWO_BIT_CLIENT = ("qafel_c2_s2", "qafel_c2_s4", "qafel_c2_s8")


def parser(doc: str, *, uploads: int | None = None, seeds: list[int] | None = None, seed: int | None = None,
           window: int | None = None, against: str | None = None, methods: tuple | None = None,
           results: str | None = None) -> argparse.ArgumentParser:
    """A probe's command line: ``--out`` and, where given a default or a help text, ``--quick`` with ``--uploads``
    (a tool that runs :func:`setting`), ``--seeds`` (several) or ``--seed`` (one), ``--window`` (a window's width,
    in uploads), ``--against`` (committed results to compare with), ``--methods`` (the QAFeL rows) and positional
    ``results`` (committed results the tool reads); the tool adds its own options."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if results is not None:
        p.add_argument("results", nargs="+", help=results)
    p.add_argument("--out", required=True)
    if uploads is not None:
        p.add_argument("--quick", action="store_true", help="the quick setting (300 users, 70 %% target)")
        p.add_argument("--uploads", type=int, default=uploads)
    if seeds is not None:
        p.add_argument("--seeds", type=int, nargs="+", default=seeds)
    if seed is not None:
        p.add_argument("--seed", type=int, default=seed)
    if window is not None:
        p.add_argument("--window", type=int, default=window, help="a window's width, in uploads")
    if against is not None:
        p.add_argument("--against", nargs="+", default=[], help=against)
    if methods is not None:
        p.add_argument("--methods", type=commas, default=methods,
                       help=f"QAFeL rows, comma-separated (default: {','.join(methods)})")
    return p


def commas(text: str) -> tuple:
    """A comma-separated option's value (``--methods``' rows, a tool's list of its own) as a tuple; the tool checks
    each name (the setting checks the rows)."""
    return tuple(text.split(","))


def command(tool: str, p: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command that computes what ``args`` asks: ``python tools/<tool>``, every option set (flags that are
    on, none of those left unset; values as :func:`rendered`) in the parser's order with :data:`LAST` last, then
    the positional arguments."""
    actions = [a for a in p._actions if a.option_strings and a.dest != "help"]
    actions.sort(key=lambda a: LAST.index(a.dest) + 1 if a.dest in LAST else 0)
    words = [f"python tools/{tool}"]
    for a in actions:
        value = getattr(args, a.dest)
        if isinstance(a, argparse._StoreTrueAction):
            words += [a.option_strings[0]] * bool(value)
        elif value is not None and value != []:
            words += [a.option_strings[0], rendered(value)]
    words += [rendered(getattr(args, a.dest)) for a in p._actions if not a.option_strings]
    return " ".join(words)


def rendered(value) -> str:
    """An option's value as a command writes it: a list (``nargs``) by spaces, a tuple (:func:`commas`) by commas."""
    if isinstance(value, list):
        return " ".join(map(str, value))
    return ",".join(value) if isinstance(value, tuple) else str(value)


def recorded(p: argparse.ArgumentParser, line: str) -> argparse.Namespace:
    """The arguments a recorded ``python tools/<tool> ...`` command (:func:`command`) asks of ``p``."""
    return p.parse_args(shlex.split(line)[2:])


def setting(args: argparse.Namespace, methods: tuple, **overrides) -> qr.QafelSetting:
    """Table 1's setting for ``methods`` with ``args.uploads`` uploads a run at most: the quick one, or the paper
    protocol at the paper's load (the target of ``LOAD_RUN``, chosen by ``tools/qafel_target_probe.py``)."""
    target = {} if args.quick else {"target": dict(LOAD_RUN.overrides)["target"]}
    return qr.setting("qafel-table1", quick=args.quick, methods=methods, max_uploads=args.uploads,
                      **(target | overrides))


def described(args: argparse.Namespace, cfg: qr.QafelSetting) -> str:
    """The words for the setting :func:`setting` made: the protocol and the substitute's users, rate, dropout, Z."""
    protocol = "the quick setting" if args.quick else f"the paper protocol at the {100 * cfg.target:.0f} % target"
    return (f"Table 1 ({protocol}) on the offline substitute ({cfg.users:,} users, lr {cfg.lr:g}, dropout "
            f"{cfg.dropout:g}, Z = {cfg.Z})")


def committed_runs(paths, seeds=None) -> dict:
    """The runs without a concurrency sweep in committed results (qafel-table1's ``runs`` or a probe's ``rows``)
    by ``(method, seed)``; only ``seeds``' where given."""
    runs = {}
    for path in paths:
        saved = json.loads(Path(path).read_text())
        runs |= {(r["method"], r["seed"]): r for r in saved.get("runs", saved.get("rows", []))
                 if "method" in r and r.get("concurrency") is None and (seeds is None or r["seed"] in seeds)}
    return runs
