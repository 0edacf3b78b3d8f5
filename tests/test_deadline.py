"""A time limit is a bound: a command still computing GRACE_S past it stops at once (afl.deadline.Overrun)."""
import signal
import time

import pytest

import afl.repro
from afl import deadline
from afl.cli import main


@pytest.fixture
def short_grace(monkeypatch):
    monkeypatch.setattr(deadline, "GRACE_S", 0.3)
    yield
    deadline.clear()


def test_a_command_stuck_past_its_limit_stops_at_once_and_leaves_no_alarm(short_grace):
    before = signal.getsignal(signal.SIGALRM)
    deadline.start(0.2)
    start = time.monotonic()
    with pytest.raises(deadline.Overrun), deadline.stop_on_signals():
        while time.monotonic() - start < 10:         # a round that never ends
            time.sleep(0.01)
    assert 0.45 < time.monotonic() - start < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) is before


def test_a_command_that_stops_in_time_or_has_no_limit_is_never_cut(short_grace):
    for limit in (0.1, None):
        deadline.clear()
        if limit:
            deadline.start(limit)
        with deadline.stop_on_signals():
            while limit and not deadline.passed():   # stops at its next round once the limit has passed
                time.sleep(0.01)
            assert signal.getitimer(signal.ITIMER_REAL)[0] > 0 if limit else signal.getitimer(
                signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        time.sleep(0.5)                               # past limit and grace: nothing fires


def test_a_signal_starts_the_grace_too(short_grace):
    """A scheduler's SIGTERM ends the limit; a command still computing GRACE_S later stops at once."""
    start = time.monotonic()
    with pytest.raises(deadline.Overrun), deadline.stop_on_signals():
        signal.raise_signal(signal.SIGTERM)
        while time.monotonic() - start < 10:
            time.sleep(0.01)
    assert time.monotonic() - start < 5


def test_afl_repro_says_it_stopped_at_once_and_exits_as_at_its_limit(short_grace, monkeypatch, capsys, tmp_path):
    def stuck(*args, **kwargs):
        while True:
            time.sleep(0.01)
    monkeypatch.setattr(afl.repro, "run_experiment", stuck)
    assert main(["repro", "favas-table2", "--quick", "--out", str(tmp_path), "--time-limit", "0.2s"]) == 3
    err = capsys.readouterr().err
    assert "0.3 s past the time limit, so the command stopped at once" in err and "Run the same command again" in err
