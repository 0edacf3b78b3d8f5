"""The claim vocabulary (afl.claims): the papers' numbers as transcribed, the measures read from a result, the rules
and the statuses, each on hand-made cases."""
import math
import os
from pathlib import Path

import pytest

from afl import claims as c
from afl.claims.paper import parse_cell
from afl.papers import PAPERS

ROOT = Path(__file__).resolve().parents[1]


def _papers_dir() -> Path | None:
    for d in ([Path(os.environ["AFL_DATA"]).parent / "papers"] if os.environ.get("AFL_DATA") else []) + [
            ROOT.parent / "shared" / "papers"]:
        if d.is_dir():
            return d
    return None


def _transcribed(module):
    for value in vars(module).values():
        if isinstance(value, c.Table):
            yield from value
        elif isinstance(value, c.Statement):
            yield value
            yield from value.numbers


@pytest.mark.skipif(_papers_dir() is None, reason="the papers' text (shared/papers) is not beside this checkout")
@pytest.mark.parametrize("name", list(PAPERS))
def test_every_transcribed_number_and_quote_occurs_in_the_papers_text(name):
    module = PAPERS[name]
    text = (_papers_dir() / module.FILE).read_text()
    items = list(_transcribed(module))
    assert len(items) >= 10
    missing = [i.where if isinstance(i, c.Number) else i.quote for i in items
               if not (c.occurs(i, text) if isinstance(i, c.Number) else c.quoted(i, text))]
    assert missing == []
    wrong = c.Number(name, "Table 9", "a row", "a column", 12.34, 5.67, 3, "%", "12.34 ± 5.67")
    assert not c.occurs(wrong, text)
    assert not c.quoted(c.Statement(name, "Sec. 9", "a sentence no paper of afl's prints"), text)


def test_a_table_is_transcribed_cell_by_cell_as_printed():
    t = PAPERS["GHBM"].TABLE2
    assert len(t.cells) == 15 * 6 and len(PAPERS["GHBM"].TABLE3.cells) == 6 * 8
    cell = t["FedHBM (ours)", "Shakespeare non-IID"]
    assert (cell.value, cell.pm, cell.seeds, cell.unit) == (51.3, 0.1, 5, "%")
    assert t["FedDyn", "CIFAR-100 (CNN) non-IID"].diverged
    assert PAPERS["GHBM"].TABLE8["FedHBM (ours)", "CIFAR-10 (CNN) non-IID"].pm is None       # illegible in the copy
    assert PAPERS["QAFeL"].TABLE1["client 4-bit qsgd, server 4-bit qsgd", "Uploads (in thousands)"].value == 27.8
    assert parse_cell("02:05") == (125.0, None, "") and parse_cell("1.417 TB") == (1.417, None, "TB")
    assert parse_cell("94.8 ± 16.7*") == (94.8, 16.7, "") and parse_cell("×") == (None, None, "")
    with pytest.raises(ValueError, match="cell 'n/a'"):
        parse_cell("n/a")
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        c.Table("X", "Table 1", ("a", "b", "c"), {"row": "1 | 2"}, seeds=3, unit="%")


def _result(runs, **extra):
    return c.Result({"runs": runs, "config": {"max_uploads": 3000}} | extra, "results/x/x.json")


def _runs(method, values, field="v"):
    return [{"method": method, "seed": s, field: v} for s, v in enumerate(values)]


def test_a_seed_that_never_reached_counts_at_the_budget_and_is_said():
    r = _result(_runs("a", [1000, None, 2000]))
    m = c.Mean(c.Runs((("method", "a"),), ("v",), scale=1e-3, budget=("config", "max_uploads"))).of(r)
    assert m.values == (1.0, 3.0, 2.0) and m.censored == 1 and m.n == 3 and "counted at the budget" in m.note
    with pytest.raises(c.BadResult, match="a number, not null"):           # no budget: a null is an error
        c.Mean(c.Runs((("method", "a"),), ("v",))).of(r)


def test_pairs_are_made_by_seed_and_a_missing_seed_is_named():
    r = _result(_runs("a", [3.0, 5.0, 7.0]) + [{"method": "b", "seed": s, "v": 1.0} for s in (0, 2)])
    m = c.Mean(c.Minus(c.Runs((("method", "a"),), ("v",)), c.Runs((("method", "b"),), ("v",)))).of(r)
    assert m.values == (2.0, 6.0) and m.n == 2 and "paired on the 2 seeds both sides hold (3 and 2)" in m.note
    ratio = c.GeoMean(c.Over(c.Runs((("method", "a"),), ("v",)), c.Runs((("method", "b"),), ("v",)))).of(r)
    assert ratio.value == pytest.approx(math.sqrt(3 * 7)) and ratio.low < ratio.value < ratio.high
    gain = c.Mean(c.Saved(c.Runs((("method", "b"),), ("v",)), c.Runs((("method", "a"),), ("v",)))).of(r)
    assert gain.values == pytest.approx((100 * 2 / 3, 100 * 6 / 7))
    with pytest.raises(c.NotCovered):
        c.Mean(c.Runs((("method", "z"),), ("v",))).of(r)


def test_a_tuned_baseline_is_its_best_variant_and_best_picks_per_seed():
    r = _result(_runs("sync", [10.0, 12.0]) + _runs("sync:1/2", [8.0, 9.0]) + _runs("other", [1.0, 1.0]))
    s = c.Tuned(c.Runs((("method", "sync"),), ("v",)), "sync").series(r)
    assert s.values == (8.0, 9.0) and "sync:1/2" in s.note
    runs = [{"method": "g", "tau": t, "seed": s, "v": v} for t, vs in ((1, (1, 5)), (10, (3, 4))) for s, v in
            enumerate(vs)]
    best = c.Best(tuple((t, c.Runs((("method", "g"), ("tau", t)), ("v",))) for t in (1, 10))).of(_result(runs))
    assert best.values == (10.0, 1.0)


def test_a_value_of_the_wrong_kind_is_an_error_naming_the_file_and_key():
    for bad, what in (("91.3", "the string '91.3'"), (math.inf, "a finite number"), (True, "a bool"),
                      ([1.0], "a list")):
        with pytest.raises(c.BadResult, match=f"results/x/x.json: runs\\[0\\]›v: .*{what}"):
            c.Mean(c.Runs((("method", "a"),), ("v",))).of(_result(_runs("a", [bad])))
    with pytest.raises(c.BadResult, match="a ratio of a number ≥ 0 to one > 0, not 1 / 0"):
        c.GeoMean(c.Over(c.Runs((("method", "a"),), ("v",)), c.Runs((("method", "b"),), ("v",)))).of(
            _result(_runs("a", [1.0]) + _runs("b", [0.0])))
    with pytest.raises(c.BadResult, match="runs: a list of runs"):
        c.Mean(c.Runs((("method", "a"),), ("v",))).of(c.Result({"runs": {"a": 1}}, "results/x/x.json"))
    with pytest.raises(c.BadResult, match="a second run of seed 0"):
        c.Mean(c.Runs((("method", "a"),), ("v",))).of(_result(_runs("a", [1.0]) + _runs("a", [2.0])))


def _m(value, low=None, high=None, n=3, values=()):
    return c.Measured(value, low, high, n, 0, values)


def test_the_level_rule_is_twice_the_papers_std_or_its_floor():
    n = c.stated("X", "Table 1", "47.3 ± 0.1", "%", 5)
    assert c.Level(n).band == 1.5 and c.Level(n).judge(_m(48.8)) == c.HOLDS and c.Level(n).judge(_m(48.9)) == c.FAILS
    wide = c.stated("X", "Table 1", "38.7 ± 7.7", "%", 10)
    assert c.Level(wide).band == pytest.approx(15.4)
    uploads = c.stated("X", "Table 1", "26.1 ± 0.5", "k uploads", 3)
    assert c.Level(uploads).band == pytest.approx(2.61)                         # 10 % of the value in any other unit


def test_an_effect_needs_an_interval_clear_of_zero_and_half_the_papers_size():
    e = c.Effect(50.2, "+50.2 points")
    assert e.judge(_m(28.5, 18.9, 38.1)) == c.HOLDS
    assert e.judge(_m(24.0, 18.9, 30.0)) == c.FAILS                              # less than half the paper's
    assert e.judge(_m(28.5, -1.0, 60.0)) == c.FAILS                              # a wide interval does not help
    assert e.judge(_m(28.5, n=1)) == c.POINT                                     # one seed: no interval
    ratio = c.Effect(3.5, "3.5×", null=1.0)
    assert ratio.judge(_m(2.3, 1.5, 3.0)) == c.HOLDS and ratio.judge(_m(2.0, 1.5, 3.0)) == c.FAILS
    below = c.Effect(None, "below 1", null=1.0, side=-1)
    assert below.judge(_m(0.5, 0.4, 0.6)) == c.HOLDS and below.judge(_m(0.5, 0.4, 1.1)) == c.FAILS


def test_no_difference_range_and_exact():
    same = c.Same(10.0, "similar")
    assert same.judge(_m(1.0, -9.0, 9.0)) == c.HOLDS and same.judge(_m(1.0, -12.0, 9.0)) == c.FAILS
    assert c.Same(10.0, "no gain", one_sided=True).judge(_m(-30.0, -60.0, 5.0)) == c.HOLDS
    assert c.Same(1.25, "same", null=1.0, ratio=True).judge(_m(1.1, 0.85, 1.2)) == c.HOLDS
    r = c.Range(5.2, 8, "5.2–8×")
    assert r.judge(_m(6.0, values=(5.3, 7.9))) == c.HOLDS and r.judge(_m(6.0, values=(5.3, 4.5, 7.0))) == c.FAILS
    exact = c.Exact(c.stated("X", "Table 1", "29.924", "kB"), 3)
    assert exact.judge(_m(29.924, values=(29.924, 29.9241))) == c.HOLDS
    assert exact.judge(_m(29.924, values=(29.924, 29.926))) == c.FAILS


def test_the_status_of_a_claim():
    assert c.status(c.HOLDS, reduced=False, seeds=10) == c.REPRODUCED
    assert c.status(c.HOLDS, reduced=False, seeds=2) == c.CONSISTENT             # at least three seeds
    assert c.status(c.HOLDS, reduced=True, seeds=10) == c.CONSISTENT             # a reduced field: never reproduced
    assert c.status(c.POINT, reduced=False, seeds=1) == c.CONSISTENT
    assert c.status(c.FAILS, reduced=False, seeds=10) == c.OPEN
    assert c.status(c.FAILS, reduced=False, seeds=10, probe=c.HOLDS) == c.EXPLAINED
    assert c.status(c.FAILS, reduced=False, seeds=10, probe=c.FAILS) == c.OPEN   # a probe that fails explains nothing
    assert c.status(c.HOLDS, reduced=True, seeds=1, exact=True) == c.EQUAL
    assert c.status(c.FAILS, reduced=False, seeds=3, exact=True) == c.UNEQUAL
