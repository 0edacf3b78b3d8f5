"""Every field of every experiment's setting, given bad values on the command line: an error that names the field
(exit 2, no traceback, no output folder created), or a value the setting accepts -- never a traceback. What each
setting accepts is stopped before anything would be computed."""
import dataclasses
import math

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
                values += list(NEVER)
            if isinstance(d, tuple) and field.name not in MAY_BE_EMPTY:
                values.append("()")
            for v in values:
                yield experiment, field.name, v


@pytest.fixture
def stopped(monkeypatch):
    def stop(*args, **kwargs):
        raise WouldRun
    for module in (runner, favas, ghbm, qafel, fedast):
        monkeypatch.setattr(module, "execute", stop, raising=False)
    monkeypatch.setattr(ghbm, "write_result", stop)


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
        assert f"afl: error: {field}=" in err or f"{field}'s" in err, (field, value, err)
        assert not out.exists(), (field, value)
    assert walked >= 3 * len(dataclasses.fields(SETTINGS[experiment]))
