"""Summaries over seeds, the one place every ± of afl comes from: the mean and the sample standard deviation
(ddof = 1), as the papers report theirs. With one value there is no spread: its std is None (NaN in arrays), and a
table shows the value alone, never "± 0"."""
from __future__ import annotations

from math import lgamma, log, pi

import numpy as np


def mean_std(values) -> tuple[float | None, float | None]:
    """The mean and sample standard deviation (ddof = 1) of ``values``; (None, None) without values, std None with
    one value."""
    v = np.asarray([x for x in values], dtype=float)
    if v.size == 0:
        return None, None
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else None


def series_mean_std(series) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample standard deviation (ddof = 1) over seeds of equally long series ``(seeds, T)``; the std is
    NaN throughout with one seed (no band to draw)."""
    arr = np.asarray(series, dtype=float)
    std = arr.std(axis=0, ddof=1) if len(arr) > 1 else np.full(arr.shape[1:], np.nan)
    return arr.mean(axis=0), std


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (p in (0.5, 1)): bisection on its CDF, the
    density integrated by Simpson's rule (no SciPy; 1e-6 close to the tables, e.g. 2.262 at 0.975 and df 9)."""
    c = lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * pi)

    def cdf(x: float) -> float:
        n = 4000                                          # even
        t = np.linspace(0.0, x, n + 1)
        f = np.exp(c - (df + 1) / 2 * np.log1p(t * t / df))
        return 0.5 + (x / n / 3) * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())
    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def t_interval(values, level: float = 0.95) -> dict:
    """The mean of ``values`` and its ``level`` confidence interval from the t distribution (ddof = 1); ``n``
    values. Interval None with fewer than two values; everything None without any."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = float(v.mean())
    if v.size < 2:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    half = t_quantile(0.5 + level / 2, v.size - 1) * float(v.std(ddof=1)) / np.sqrt(v.size)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": int(v.size)}


def paired_ratio(values, baseline, level: float = 0.95) -> dict:
    """The ratio of ``values`` to ``baseline`` paired by seed (None: that seed never reached; such pairs are left
    out): the geometric mean of the per-seed ratios and its ``level`` confidence interval from the t distribution
    of their logarithms (ddof = 1); ``n`` pairs. Interval None with fewer than two pairs."""
    logs = t_interval(np.log([v / b for v, b in zip(values, baseline)
                              if v is not None and b is not None and b > 0 and v > 0]), level)
    exp = {k: None if logs[k] is None else float(np.exp(logs[k])) for k in ("mean", "low", "high")}
    return {"ratio": exp["mean"], "low": exp["low"], "high": exp["high"], "n": logs["n"]}


def paired_difference(values, baseline, level: float = 0.95) -> dict:
    """The mean of ``values - baseline`` paired by seed (every pair: both lists hold one value per seed) and its
    ``level`` confidence interval from the t distribution (ddof = 1), as :func:`t_interval`."""
    values, baseline = list(values), list(baseline)
    if len(values) != len(baseline) or any(x is None for x in values + baseline):
        raise ValueError(f"paired_difference: one value per seed on both sides, got {values} and {baseline}")
    return t_interval([v - b for v, b in zip(values, baseline)], level)


def error_bars(stds) -> list[float]:
    """Stds for a plot's error bars: NaN (no bar) where there is no spread."""
    return [np.nan if s is None else float(s) for s in stds]


def pm(mean: float | None, std: float | None, digits: int = 1) -> str:
    """``"mean ± std"`` for a table; the mean alone where there is no spread (one seed); "–" where no value."""
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "–"
    if std is None or np.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


__all__ = ["mean_std", "series_mean_std", "t_quantile", "paired_ratio", "error_bars", "pm"]
