"""Summaries over seeds, the one place every ± of afl comes from: the mean and the sample standard deviation
(ddof = 1), as the papers report theirs. With one value there is no spread: its std is None (NaN in arrays), and a
table shows the value alone, never "± 0"."""
from __future__ import annotations

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


__all__ = ["mean_std", "series_mean_std", "error_bars", "pm"]
