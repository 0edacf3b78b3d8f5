"""Every field of every experiment's setting, given bad values on the command line: an error that names the field
(exit 2, no traceback, no output folder created), or a value the setting accepts -- never a traceback. What each
setting accepts is stopped where the output folder would be created, after every check (the work estimate too:
a huge value is refused by name unless --allow-large)."""
import dataclasses
import re

import pytest

import afl.repro.runner as runner
from afl.cli import main
from afl.repro import fedast, favas, ghbm, qafel


class WouldRun(Exception):
    """Raised where the experiment would start computing: the setting was accepted."""


SETTINGS = {"favas-table2": favas.FavasSetting, "ghbm-table2": ghbm.GhbmSetting,
            "ghbm-quadratic": ghbm.QuadraticSetting, "qafel-table1": qafel.QafelSetting,
            "fedast-fig7": fedast.FedastSetting}
#: values no numeric field takes, and the empty list no list of what to run takes
NEVER = ("nan", "inf", "x")
#: values a field may take but whose work afl refuses to start without --allow-large (where they set the work)
HUGE = ("1e300", "1000000000000")
#: lists that may be empty by design: GHBM's taus (empty: tau = 1/C), Fig. 1's probe taus, Table 7's retunes
MAY_BE_EMPTY = {"taus", "probe_taus", "retune"}


def default(cls, field):
    base = ghbm.QuadraticSetting() if cls is ghbm.QuadraticSetting else None
    if base is not None:
        return getattr(base, field.name)
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()


def cases():
    for experiment, cls in SETTINGS.items():
        for field in dataclasses.fields(cls):
            d = default(cls, field)
            values = ["0", "-1", "1.5"]
            if isinstance(d, (int, float)) and not isinstance(d, bool):
                values += list(NEVER) + list(HUGE)
            if isinstance(d, tuple) and field.name not in MAY_BE_EMPTY:
                values.append("()")
            for v in values:
                yield experiment, field.name, v


@pytest.fixture
def stopped(monkeypatch):
    def stop(*args, **kwargs):
        raise WouldRun
    monkeypatch.setenv("AFL_TRACEBACK", "1")                  # afl's one-line catch-all lets WouldRun through
    monkeypatch.setattr(runner, "output_dir", stop)
    monkeypatch.setattr(ghbm, "quadratic_run", stop)


@pytest.mark.slow
@pytest.mark.parametrize("experiment", SETTINGS)
def test_every_field_refuses_bad_values_by_name(experiment, stopped, tmp_path, capsys):
    walked = 0
    for exp, field, value in cases():
        if exp != experiment:
            continue
        walked += 1
        out = tmp_path / f"{field}-{value}"
        try:
            code = main(["repro", experiment, "--quick", "--set", f"{field}={value}", "--out", str(out)])
        except WouldRun:
            code = None
        err = capsys.readouterr().err
        assert "Traceback" not in err, (field, value)
        if code is None:
            assert value not in NEVER and value != "()", f"{experiment}: {field}={value} was accepted"
            continue
        assert code == 2, (field, value, err)
        named = f"afl: error: {field}=" in err or re.search(rf"\b{field}\b", err.partition(" is not allowed")[2])
        assert named, (field, value, err)           # the field, or another whose allowed range it sets (1/L)
        assert not out.exists(), (field, value)
    assert walked >= 3 * len(dataclasses.fields(SETTINGS[experiment]))


#: per experiment: the field that sets its client steps, and the one that sets its evaluations (afl.budget)
WORK_FIELDS = {"favas-table2": ("total_time", "eval_every"), "ghbm-table2": ("rounds", "eval_every"),
               "ghbm-quadratic": ("rounds", None), "qafel-table1": ("max_uploads", "eval_every"),
               "fedast-fig7": ("total_time", "eval_every")}


@pytest.mark.parametrize("experiment", SETTINGS)
def test_work_above_the_limits_is_refused_by_name_unless_allowed(experiment, stopped, tmp_path, capsys):
    steps, evals = WORK_FIELDS[experiment]
    cases = [(steps, [f"{steps}=1000000000000"])]
    if experiment in ("favas-table2", "fedast-fig7"):
        cases.append((evals, [f"{evals}=1e-9"]))
    if experiment == "qafel-table1":           # a validation every upload of a budget of 10 million
        cases.append(("eval_every", ["max_uploads=10000000", "eval_every=1"]))
    for field, sets in cases:
        args = ["repro", experiment, "--quick", "--out", str(tmp_path / "o")] + [a for s in sets for a in ("--set", s)]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"afl: error: {field}=" in err and "--allow-large" in err and "Traceback" not in err, err
        assert not (tmp_path / "o").exists()
        with pytest.raises(WouldRun):
            main(args + ["--allow-large"])
