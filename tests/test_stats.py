"""Every ± of afl is the sample standard deviation (ddof = 1), from afl.stats; one value has no spread."""
import math

import numpy as np
import pytest

from afl.stats import error_bars, mean_std, paired_difference, paired_ratio, pm, series_mean_std, t_quantile


def test_the_spread_over_seeds_is_the_sample_standard_deviation():
    mean, std = mean_std([1.0, 2.0, 4.0])
    assert mean == pytest.approx(7 / 3) and std == pytest.approx(math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2
                                                                             + (4 - 7 / 3) ** 2) / 2))
    assert mean_std([5.0]) == (5.0, None) and mean_std([]) == (None, None)
    m, s = series_mean_std([[0.0, 1.0], [2.0, 5.0]])
    assert m.tolist() == [1.0, 3.0] and s == pytest.approx([math.sqrt(2), math.sqrt(8)])
    assert np.isnan(series_mean_std([[1.0, 2.0]])[1]).all()


def test_a_table_shows_no_spread_for_one_seed():
    assert pm(71.234, 1.25) == "71.2 ± 1.2" and pm(71.234, None) == "71.2" and pm(None, None) == "–"
    assert pm(12.0, float("nan"), 0) == "12" and error_bars([1.0, None])[0] == 1.0 and np.isnan(error_bars([None])[0])


def test_t_quantiles_and_a_paired_ratio_with_its_interval():
    for df, table in ((1, 12.7062), (2, 4.3027), (9, 2.2622), (30, 2.0423)):          # two-sided 95 % tables
        assert t_quantile(0.975, df) == pytest.approx(table, abs=1e-4)
    r = paired_ratio([2.0, 4.4, None, 7.2, 3.0], [1.0, 2.0, 3.0, 4.0, None])           # seeds 2 and 4 unpaired
    logs = np.log([2.0, 2.2, 1.8])
    half = 4.302653 * logs.std(ddof=1) / math.sqrt(3)
    assert r["n"] == 3 and r["ratio"] == pytest.approx(math.exp(logs.mean()))
    assert (r["low"], r["high"]) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert paired_ratio([2.0], [1.0]) == {"ratio": 2.0, "low": None, "high": None, "n": 1}


def test_a_paired_difference_with_its_interval():
    d = paired_difference([52.0, 60.5, 47.0, 58.0], [50.0, 55.5, 48.0, 52.0])       # per seed: +2, +5, -1, +6
    diffs = np.array([2.0, 5.0, -1.0, 6.0])
    half = 3.182446 * diffs.std(ddof=1) / 2                                          # t(0.975, 3), 4 pairs
    assert d["n"] == 4 and d["mean"] == pytest.approx(3.0)
    assert (d["low"], d["high"]) == pytest.approx((3.0 - half, 3.0 + half), abs=1e-5)
    assert paired_difference([1.0], [0.5]) == {"mean": 0.5, "low": None, "high": None, "n": 1}
    with pytest.raises(ValueError, match="one value per seed"):
        paired_difference([1.0, None], [0.5, 0.4])
    with pytest.raises(ValueError, match="one value per seed"):
        paired_difference([1.0, 2.0], [0.5])
