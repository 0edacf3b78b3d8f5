"""Shared figures: metric-vs-simulated-time curves (mean ± std over seeds) and method-by-setting bar charts."""
from __future__ import annotations

import numpy as np


def mean_std(runs: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) standard deviation over seeds of equally long series."""
    arr = np.asarray(runs, dtype=float)
    return arr.mean(axis=0), arr.std(axis=0)


def plot_curves(curves: dict, ax=None, ylabel: str = "test accuracy", title: str | None = None,
                xlabel: str = "simulated time", logy: bool = False, scale: float = 1.0):
    """``curves[label] = {"time": [...], "runs": [[...] per seed]}``: one line per label, a band of ±1 std."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for label, c in curves.items():
        mean, std = mean_std(c["runs"])
        t = np.asarray(c["time"])
        line, = ax.plot(t, mean * scale, label=label)
        if len(c["runs"]) > 1:
            ax.fill_between(t, (mean - std) * scale, (mean + std) * scale, color=line.get_color(), alpha=0.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_bars(values: dict, errors: dict | None = None, ax=None, ylabel: str = "final test accuracy (%)",
              title: str | None = None, reference: dict | None = None):
    """Grouped bars ``values[method][setting]`` (± ``errors``); optional hollow ``reference`` bars beside them."""
    import matplotlib.pyplot as plt
    methods = list(values)
    settings = list(next(iter(values.values())))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(methods)
    x = np.arange(len(settings))
    for k, m in enumerate(methods):
        pos = x - 0.4 + width * (k + 0.5)
        vals = [values[m][s] for s in settings]
        errs = [errors[m][s] for s in settings] if errors else None
        ax.bar(pos, vals, width, yerr=errs, capsize=3, label=m)
        if reference and m in reference:
            ref = [reference[m].get(s, np.nan) for s in settings]
            ax.scatter(pos, ref, marker="_", s=200, color="black", zorder=3,
                       label="paper (reference)" if k == 0 else None)
    ax.set_xticks(x, settings)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
