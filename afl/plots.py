"""One picture language for the whole package: a method keeps its colour, line style and label everywhere.

:data:`METHOD_STYLES` fixes them by method name (a variant shares its algorithm's colour with another line
style); :func:`style` gives the style of any name (a stable fallback for names not listed, never the order
in which methods are passed). :func:`plot_curves` draws metric-vs-simulated-time curves, the mean over seeds
with a band of ± one standard deviation that the legend names; :func:`plot_bars` draws method-by-setting
bars with the paper's numbers as black reference marks.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

from .stats import series_mean_std

#: name -> (colour, line style, label). Colours: tab10; a method's variants share its colour (QAFeL's
#: ablation, quantizing the model itself instead of a hidden state, is a scheme of its own: purple).
METHOD_STYLES: dict[str, tuple[str, str, str]] = {
    "fedavg": ("#7f7f7f", "-", "FedAvg"),
    "quafl": ("#ff7f0e", "-", "QuAFL (full precision)"),
    "quafl-lattice14": ("#ff7f0e", "--", "QuAFL (14-bit lattice)"),
    "fedbuff": ("#2ca02c", "-", "FedBuff (concurrency s, 1/√(1+τ))"),
    "fedbuff-quafl-code": ("#2ca02c", "--", "FedBuff (every client, lr Z/n)"),
    "favas": ("#1f77b4", "-", "FAVAS (1/α)"),
    "favas-normalized": ("#1f77b4", "--", "FAVAS (ᾱ/α)"),
    "favas-noreweight": ("#1f77b4", ":", "FAVAS without reweighting (ablation)"),
    "favas-mixing": ("#1f77b4", "-.", "FAVAS with QuAFL's client mixing (ablation)"),
    "fedasync": ("#8c564b", "-", "FedAsync (α = 0.6, polynomial staleness)"),
    "ca2fl": ("#e7ba52", "-", "CA2FL (cached-update calibration)"),
    "fadas": ("#7b4173", "-", "FADAS (AMSGrad server, delay-adaptive)"),
    "fadas-code": ("#7b4173", "--", "FADAS as the authors' code runs it"),
    "qafel": ("#d62728", "-", "QAFeL (4-bit both ways, FLSim's channel)"),
    "favas (deterministic)": ("#1f77b4", "-", "FAVAS, deterministic α (Table 1)"),
    "favas (stochastic)": ("#1f77b4", "--", "FAVAS, stochastic α (Table 1)"),
    "qafel scalar 4/4": ("#d62728", "-", "QAFeL, FLSim 4-bit both ways"),
    "qafel scalar 2/2": ("#d62728", "--", "QAFeL, FLSim 2-bit both ways"),
    "qafel qsgd 4/4": ("#d62728", ":", "QAFeL, L2 QSGD 4-bit both ways"),
    "qafel qsgd 8/2": ("#d62728", "-.", "QAFeL, L2 QSGD 8-bit up, 2-bit down"),
    "qafel qsgd(max, bucket 64) 4/4": ("#d62728", (0, (4, 1.5, 1, 1.5, 1, 1.5)), "QAFeL, max-QSGD (bucket 64) 4-bit"),
    "no hidden state, scalar 2/2": ("#9467bd", "--", "no hidden state (QAFeL's ablation), FLSim 2-bit"),
    # the GHBM paper's methods (synchronous rounds); server-momentum and variants share their family's colour
    "fedavgm": ("#7f7f7f", "--", "FedAvgM"),
    "fedavgm-server-lr-1": ("#7f7f7f", ":", "FedAvgM, η = 1"),
    "fedprox": ("#bcbd22", "-", "FedProx"),
    "scaffold": ("#637939", "-", "SCAFFOLD"),
    "scaffold-m": ("#637939", "--", "SCAFFOLD-M"),
    "scaffold-code": ("#637939", "-.", "SCAFFOLD as the authors' code runs it"),
    "feddyn": ("#e377c2", "-", "FedDyn"),
    "adabest": ("#e377c2", "--", "AdaBest"),
    "adabest-code": ("#e377c2", "-.", "AdaBest as the authors' code runs it"),
    "adabest-beta-0": ("#e377c2", ":", "AdaBest, server β = 0"),
    "mime": ("#17becf", "-", "MIME"),
    "mimemom": ("#17becf", "--", "MimeMom"),
    "mimelitemom": ("#17becf", ":", "MimeLiteMom"),
    "mimemom-dampened": ("#17becf", (0, (6, 2, 1, 2)), "MimeMom (dampened momentum)"),
    "mimelitemom-dampened": ("#17becf", "-.", "MimeLiteMom (dampened momentum)"),
    "fedcm": ("#8c6d31", "-", "FedCM (GHBM τ=1)"),
    "fedadc": ("#8c6d31", "--", "FedADC (GHBM τ=1)"),
    "fedcm-full": ("#8c6d31", ":", "FedCM, full participation"),
    "fedcm-code": ("#8c6d31", "-.", "FedCM as the authors' code runs it"),
    "fedcm-server-lr-1": ("#8c6d31", (0, (6, 2, 1, 2)), "FedCM, η = 1"),
    "ghbm": ("#393b79", "-", "GHBM"),
    "ghbm-eq4": ("#393b79", "--", "GHBM as analysed (eq. 4)"),
    "ghbm-server": ("#393b79", "-.", "GHBM at the server (C.8)"),
    "localghbm": ("#843c39", "--", "LocalGHBM"),
    "fedhbm": ("#843c39", "-", "FedHBM"),
    "localghbm-code-scale": ("#843c39", "-.", "LocalGHBM, momentum scale C (the code's)"),
    "fedhbm-code-scale": ("#843c39", ":", "FedHBM, momentum scale C (the code's)"),
}
_FALLBACK = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#d62728"]


#: QAFeL's experiment rows ``qafel_c<bits>_s<bits|topk>`` and ``nohidden_c<bits>_s<bits>``: QAFeL's red (the
#: ablation's purple), shaded by the client's bits, the line style telling the server's quantizer.
_QAFEL_ROW = re.compile(r"^(qafel|nohidden)_c(\d+)_s(\d+|topk)$")
_CLIENT_SHADES = {"qafel": {"8": "#8b1a1a", "4": "#d62728", "2": "#f08080"},
                  "nohidden": {"8": "#5e3c8f", "4": "#9467bd", "2": "#c5b0d5"}}
_SERVER_LINES = {"8": "-", "4": "--", "2": ":", "topk": "-."}


def _qafel_row_style(method: str) -> tuple | None:
    m = _QAFEL_ROW.match(method)
    if not m or m[2] not in _CLIENT_SHADES[m[1]] or m[3] not in _SERVER_LINES:
        return None
    server = "top-10 %" if m[3] == "topk" else f"{m[3]}-bit"
    label = f"QAFeL, client {m[2]}-bit, server {server}" if m[1] == "qafel" else \
        f"no hidden state (ablation), client {m[2]}-bit, server {server}"
    return _CLIENT_SHADES[m[1]][m[2]], _SERVER_LINES[m[3]], label


def style(method: str) -> dict:
    """``{"color", "linestyle", "label"}`` of ``method``: fixed for known names, a stable hash otherwise."""
    if method in METHOD_STYLES:
        color, ls, label = METHOD_STYLES[method]
    elif _qafel_row_style(method):
        color, ls, label = _qafel_row_style(method)
    else:
        color, ls, label = _FALLBACK[zlib.crc32(method.encode()) % len(_FALLBACK)], "-", method
    return {"color": color, "linestyle": ls, "label": label}


def mean_std(runs: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample standard deviation (ddof = 1; NaN with one seed) over seeds of equally long series
    (:func:`afl.stats.series_mean_std`)."""
    return series_mean_std(runs)


def band_label(n: int) -> str:
    """What a shaded band means, for legends and captions."""
    return f"band: mean ± std over {n} seeds" if n > 1 else "one seed"


def plot_curves(curves: dict, ax=None, ylabel: str = "test accuracy", title: str | None = None,
                xlabel: str = "simulated time (time units)", logy: bool = False, scale: float = 1.0):
    """``curves[method] = {"time": [...], "runs": [[...] per seed]}``: one line per method in its
    :func:`style`, the mean over seeds, and a band of ± one standard deviation when there are several seeds
    (the legend says so). With ``logy``, non-positive values (e.g. a spread of zero at t = 0) are left out."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    seeds = set()
    for method, c in curves.items():
        mean, std = mean_std(c["runs"])
        t = np.asarray(c["time"], dtype=float)
        y, lo, hi = mean * scale, (mean - std) * scale, (mean + std) * scale
        if logy:
            y = np.where(y > 0, y, np.nan)
            lo = np.where(lo > 0, lo, np.nan)
        ax.plot(t, y, **style(method))
        seeds.add(len(c["runs"]))
        if len(c["runs"]) > 1:
            ax.fill_between(t, lo, hi, color=style(method)["color"], alpha=0.15, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if seeds and max(seeds) > 1:
        from matplotlib.patches import Patch
        handles.append(Patch(color="#bbbbbb", alpha=0.5))
        labels.append(band_label(max(seeds)))
    if len(handles) > 4:          # many methods: beside the axes, never over the curves
        ax.legend(handles, labels, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(handles, labels, fontsize=8, frameon=False)
    return ax


def plot_bars(values: dict, errors: dict | None = None, ax=None, ylabel: str = "final test accuracy (%)",
              title: str | None = None, reference: dict | None = None, seeds: int | None = None,
              names: dict | None = None):
    """Grouped bars ``values[method][setting]`` in each method's :func:`style` (± ``errors``, the std over
    ``seeds``), and black marks at ``reference[method][setting]`` (the paper's numbers); ``names``: how each
    setting is written under its group (default: as it is)."""
    import matplotlib.pyplot as plt
    methods = list(values)
    settings = list(next(iter(values.values())))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(methods)
    x = np.arange(len(settings))
    marked = False
    for k, m in enumerate(methods):
        pos = x - 0.4 + width * (k + 0.5)
        st = style(m)
        vals = [values[m][s] for s in settings]
        errs = [errors[m][s] for s in settings] if errors and (seeds or 2) > 1 else None
        ax.bar(pos, vals, width, yerr=errs, capsize=2, color=st["color"], label=st["label"],
               hatch="//" if st["linestyle"] != "-" else None, edgecolor="white", linewidth=0)
        if reference and m in reference:
            ref = [reference[m].get(s, np.nan) for s in settings]
            ax.scatter(pos, ref, marker="_", s=120, color="black", zorder=3,
                       label=None if marked else "paper (reference)")
            marked = True
    ax.set_xticks(x, [(names or {}).get(s, s) for s in settings])
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    extra = f"error bars: std over {seeds} seeds" if seeds and seeds > 1 else None
    handles, labels = ax.get_legend_handles_labels()
    if extra:
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], color="black", marker="|", linestyle="none"))
        labels.append(extra)
    ax.legend(handles, labels, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              handleheight=1.4)
    return ax


__all__ = ["METHOD_STYLES", "style", "mean_std", "band_label", "plot_curves", "plot_bars"]
