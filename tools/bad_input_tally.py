"""Walk afl's command line with bad input, as a careful attacker and a clumsy user would, and tally what each case
gave: a clean error (``afl: error: ...``, exit 2, no traceback, nothing created), a clean error given only after
the output folder was created, a traceback, or a value accepted.

Every case runs in this process (``afl.cli.main``) and stops where an experiment would start computing (the
output folder's creation, as in ``tests/test_settings_walk.py``), so the walk takes seconds, not hours:

    AFL_DATA=../shared/data python tools/bad_input_tally.py [--list]

Cases: every field of every experiment's setting with empty, zero, negative, fractional, NaN, infinite, huge and
wrong-typed values; and the options of ``afl repro``, ``afl bench``, ``afl data`` and ``afl plan`` with bad values.
A value the walk lists as accepted is one the setting allows (e.g. ``lr=1.5``), not a defect by itself: ``--list``
prints each case with its outcome for reading.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import afl.repro.runner as runner  # noqa: E402
from afl.cli import main  # noqa: E402
from afl.repro import fedast, favas, ghbm, qafel  # noqa: E402

SETTINGS = {"favas-table2": favas.FavasSetting, "ghbm-table2": ghbm.GhbmSetting,
            "ghbm-quadratic": ghbm.QuadraticSetting, "qafel-table1": qafel.QafelSetting,
            "fedast-fig7": fedast.FedastSetting}
NUMBERS = ("0", "-1", "1.5", "nan", "inf", "-inf", "1e300", "1000000000000", "x", "True", "None", "()")


class WouldRun(Exception):
    """Raised where the command would start computing: the input was accepted."""


def field_cases():
    for experiment, cls in SETTINGS.items():
        for field in dataclasses.fields(cls):
            for value in NUMBERS:
                yield ["repro", experiment, "--quick", "--set", f"{field.name}={value}"]


def option_cases(tmp: Path):
    quick = ["repro", "favas-table2", "--quick"]
    junk = tmp / "junk.json"
    junk.write_text('{"not": "a result"}')
    for flags in (["--seeds", "0"], ["--seeds", "-3"], ["--seeds", "1000000000"], ["--processes", "0"],
                  ["--fleet-size", "0"], ["--root", str(tmp / "absent")], ["--out", ""], ["--out", " "],
                  ["--reuse", "/etc/passwd"], ["--reuse", str(tmp / "absent.json")], ["--reuse", str(junk)],
                  ["--replot"], ["--device", "cuda:7"], ["--device", "tpu"], ["--ray", "127.0.0.1:1"],
                  ["--ray", "nonsense"], ["--fresh", "--resume"], ["--set", "=1"], ["--set", "nofield=1"],
                  ["--set", "n"], ["--set", "n=10", "--set", "n=20"], ["--set", "seeds=2", "--seeds", "3"],
                  ["--processes", "2", "--ray", "127.0.0.1:1"]):
        yield quick + flags
    yield ["repro", "no-such-experiment", "--quick"]
    for flags in (["--clients", "0"], ["--clients", "100000000"], ["--steps", "0"], ["--models", "nosuch"],
                  ["--device", "tpu"], ["--precision", "fp8"], ["--strategy", "nosuch"]):
        yield ["bench", "local-sgd", "--no-reference"] + flags
    for flags in (["--grid", "nosuch"], ["--seeds", "0"], ["--fleet-size", "0"], ["--set", "n=0"]):
        yield ["bench", "fleet"] + flags
    yield ["data", "verify", "nosuch"]
    yield ["data", "verify", "mnist", "--root", str(tmp / "absent")]
    yield ["data", "unpack", str(tmp / "absent"), "--to", str(tmp / "root")]
    yield ["data", "pack", "mnist"]
    yield ["plan", "run", "nosuch-job", "--out", str(tmp / "plan"), "--time-limit", "1m"]
    yield ["plan", "run", "--out", str(tmp / "plan"), "--time-limit", "-1"]
    yield ["plan", "run", "--out", str(tmp / "plan"), "--time-limit", "1m", "--resume-from", str(junk)]
    yield ["plan", "--cpu-hours", "0"]
    yield ["plan", "archive", "--out", str(tmp), "--to", str(tmp / "kept"), "--max-files", "0"]


def outcome(argv: list[str], out: Path) -> str:
    if argv[0] == "repro" and "--out" not in argv:
        argv = argv + ["--out", str(out)]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
    except WouldRun:
        return "accepted"
    except SystemExit as exit_:              # argparse's own refusals: usage and exit 2
        code = exit_.code
    except BaseException as error:           # noqa: BLE001 -- the tally counts it
        return f"traceback ({type(error).__name__})"
    text = err.getvalue()
    if "Traceback" in text:
        return "traceback"
    if code == 0:
        return "accepted"
    if code == 2 and ("afl: error:" in text or "usage:" in text):
        return "clean error, after creating the output" if out.exists() else "clean error"
    return f"exit {code}"


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every case with its outcome")
    args = parser.parse_args()

    def stop(*a, **k):
        raise WouldRun
    runner.output_dir = stop                         # where an experiment would create its folder and compute
    ghbm.quadratic_run = stop
    import afl.bench
    afl.bench.engine_steps_per_s = stop              # after the benchmarks' checks and their data
    afl.bench.engine_work = stop
    import afl.plan
    afl.plan.run = stop                              # after the plan's checks
    tally: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = list(field_cases()) + list(option_cases(tmp))
        for i, argv in enumerate(cases):
            got = outcome(list(argv), tmp / f"out{i}")
            tally[got] += 1
            if args.list:
                print(f"{got:<40} afl {' '.join(argv)}")
    print(f"{len(cases)} cases: " + ", ".join(f"{n} {kind}" for kind, n in tally.most_common()))
    return 0 if not any(k.startswith(("traceback", "exit", "clean error, after")) for k in tally) else 1


if __name__ == "__main__":
    sys.exit(main_())
