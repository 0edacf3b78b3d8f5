"""Pictures of simulated schedules: a Gantt timeline, the E_i histogram, and who feeds the server.

matplotlib is imported inside the functions so that ``import afl.sim`` stays light.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from afl.errors import check, check_choice
from afl.sim.timeline import Timeline

#: Fixed colours for the usual speed classes; other groups cycle through the tab10 palette.
CLASS_COLORS = {"fast": "#1f77b4", "normal": "#2ca02c", "slow": "#d62728"}
_CYCLE = ["#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#1f77b4", "#2ca02c",
          "#d62728"]
IDLE_COLOR, UPLOAD_COLOR, OTHER_COLOR, SERVER_COLOR = "#d9d9d9", "#333333", "#999999", "#444444"


def group_colors(groups: Sequence) -> dict:
    """A colour per group: fixed ones for "fast"/"normal"/"slow", then the palette in order."""
    colors, k = {}, 0
    for g in groups:
        if g in CLASS_COLORS:
            colors[g] = CLASS_COLORS[g]
        else:
            colors[g] = _CYCLE[k % len(_CYCLE)]
            k += 1
    return colors


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _despine(ax) -> None:
    """Hide the top and right frame lines (the house style of every plot here)."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def plot_timeline(timeline: Timeline, ax=None, clients: Sequence[int] | None = None, t_max: float | None = None,
                  color_by: str = "class", title: str | None = None, annotate_steps: bool = True):
    """Gantt chart of a :class:`Timeline`: one row per client, server steps as dotted vertical lines, buffer
    flushes as triangles on a "server" row. Returns the matplotlib Axes.

    ``clients``: rows to show, top to bottom (default: every client, grouped by class); ``t_max``: right end of the
    time axis (default: the timeline's end); ``color_by``: "class" (speed class) or "task" (model/task id);
    ``annotate_steps``: write the number of finished steps in training bars wide enough to hold it.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    check(isinstance(timeline, Timeline), "timeline", timeline, "an afl.sim.Timeline")
    check_choice("color_by", color_by, ("class", "task"))
    t_max = timeline.t_end if t_max is None else float(t_max)
    check(t_max > 0, "t_max", t_max, "a time > 0 (the timeline is empty?)")
    order = {name: k for k, name in enumerate(timeline.class_order)}
    if clients is None:
        clients = sorted(timeline.clients(), key=lambda c: (order.get(timeline.class_of(c), len(order)), c))
    clients = [int(c) for c in clients]
    row = {c: r for r, c in enumerate(clients)}
    ax = _axes(ax, (11, 1.2 + 0.28 * len(clients)))

    def group(item):
        return timeline.class_of(item.client) if color_by == "class" else item.task

    groups = list(timeline.class_order) if color_by == "class" else []
    for item in timeline.intervals:
        if item.client in row and group(item) not in groups:
            groups.append(group(item))
    colors = group_colors(groups)

    bars: dict[tuple, list] = {}
    labels_seen = set()
    text_min = 0.025 * t_max
    for item in timeline.intervals:
        if item.client not in row:
            continue
        start, end = max(item.start, 0.0), min(item.end, t_max)
        if end <= start:
            continue
        key = (row[item.client], item.label, group(item))
        bars.setdefault(key, []).append((start, end - start))
        labels_seen.add(item.label)
        if annotate_steps and item.label == "train" and item.steps > 0 and end - start >= text_min:
            ax.text((start + end) / 2, row[item.client], str(item.steps), ha="center", va="center",
                    fontsize=7, color="white", fontweight="bold", zorder=4)
    for (r, label, g), xr in bars.items():
        color = colors.get(g, OTHER_COLOR)
        style = {"train": dict(facecolors=color, edgecolors="white", linewidth=0.6),
                 "interrupted": dict(facecolors="white", edgecolors=color, hatch="////", linewidth=0.0),
                 "idle": dict(facecolors=IDLE_COLOR, edgecolors="white", linewidth=0.6),
                 "upload": dict(facecolors=UPLOAD_COLOR),
                 "queued": dict(facecolors="white", edgecolors=OTHER_COLOR, linewidth=0.8)}.get(
                     label, dict(facecolors=OTHER_COLOR))
        ax.broken_barh(xr, (r - 0.4, 0.8), zorder=2, **style)

    steps = [t for t in timeline.server_steps if 0 <= t <= t_max]
    flushes = [f.time for f in timeline.flushes if 0 <= f.time <= t_max]
    if steps:
        ax.vlines(steps, -0.5, len(clients) - 0.5, colors=SERVER_COLOR, linestyles=(0, (1, 2)),
                  linewidth=0.9, alpha=0.8 if len(steps) <= 120 else 0.35, zorder=3)
    top = -0.5
    if flushes:
        top = -1.5
        ax.plot(flushes, [-1.0] * len(flushes), "v", color=SERVER_COLOR, markersize=6, zorder=4)

    ax.set_xlim(0, t_max)
    ax.set_ylim(len(clients) - 0.5, top)
    ticks = ([-1.0] if flushes else []) + list(range(len(clients)))
    tick_labels = (["server"] if flushes else []) + [str(c) for c in clients]
    every = max(1, int(np.ceil(len(clients) / 40)))
    keep = [k for k in range(len(ticks)) if ticks[k] < 0 or ticks[k] % every == 0]
    ax.set_yticks([ticks[k] for k in keep], [tick_labels[k] for k in keep], fontsize=8)
    if color_by == "class":
        for lab in ax.get_yticklabels():
            cls = timeline.class_of(int(lab.get_text())) if lab.get_text().isdigit() else None
            lab.set_color(colors.get(cls, "black"))
    ax.set_xlabel("simulated time")
    ax.set_ylabel("client")
    ax.set_title(title or f"Who trains when ({len(clients)} clients)")
    ax.grid(False)
    _despine(ax)

    name = "speed class" if color_by == "class" else "task"
    handles = [Patch(facecolor=colors[g], label=f"training ({g})" if g is not None else "training")
               for g in groups]
    if "interrupted" in labels_seen:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////", label="interrupted step (lost)"))
    if "idle" in labels_seen:
        handles.append(Patch(facecolor=IDLE_COLOR, label="idle (done, waiting)"))
    if "upload" in labels_seen:
        handles.append(Patch(facecolor=UPLOAD_COLOR, label="upload"))
    if "queued" in labels_seen:
        handles.append(Patch(facecolor="white", edgecolor=OTHER_COLOR, label="queued"))
    if steps:
        handles.append(Line2D([], [], color=SERVER_COLOR, linestyle=(0, (1, 2)), label="server step"))
    if flushes:
        handles.append(Line2D([], [], color=SERVER_COLOR, marker="v", linestyle="", label="buffer flush"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
              title=f"colour = {name}", title_fontsize=8)
    return ax


def plot_steps_histogram(result, ax=None, theory: dict | None = None, title: str | None = None):
    """Bars: fraction of contacts at which a client of each class had finished E_i ^ K = 0..K steps.

    ``theory``: optional ``{class: pmf}`` (e.g. from :func:`afl.sim.contact_steps_pmf`) drawn as black markers.
    """
    ax = _axes(ax, (6, 3.5))
    names = list(result.profile.names)
    colors = group_colors(names)
    k = np.arange(result.K + 1)
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        x = k - 0.4 + width * (j + 0.5)
        n_contacts = len(result.steps(name))
        ax.bar(x, result.steps_pmf(name), width=width, color=colors[name],
               label=f"{name} ({n_contacts} contacts)")
        if theory is not None and name in theory:
            ax.plot(x, theory[name], "_", color="black", markersize=10, markeredgewidth=2,
                    label="exact" if j == 0 else None)
    ax.set_xticks(k)
    ax.set_xlabel(r"local steps finished when contacted, $E_i \wedge K$")
    ax.set_ylabel("fraction of contacts")
    ax.set_title(title or f"Local steps per contact (K = {result.K})")
    ax.legend(frameon=False, fontsize=8)
    _despine(ax)
    return ax


def plot_class_shares(result, ax=None, title: str | None = None):
    """Bars: each class's share of the clients vs its share of the updates the server used."""
    ax = _axes(ax, (5, 3.5))
    names = list(result.profile.names)
    colors = group_colors(names)
    pop = result.profile.counts()
    pop_share = np.array([pop[c] for c in names]) / result.profile.n
    upd_share = np.array([result.class_shares()[c] for c in names])
    x = np.arange(len(names))
    ax.bar(x - 0.2, pop_share, width=0.4, color=[colors[c] for c in names], alpha=0.35, label="share of clients")
    ax.bar(x + 0.2, upd_share, width=0.4, color=[colors[c] for c in names], label="share of updates used")
    for xi, v in zip(x + 0.2, upd_share):
        ax.text(xi, v + 0.01, f"{v:.0%}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction")
    ax.set_title(title or "Who feeds the server")
    ax.legend(frameon=False, fontsize=8)
    _despine(ax)
    return ax


def plot_step_time_cdfs(dists: dict, t_max: float, ax=None, title: str | None = None):
    """``P(step time <= t)`` for each ``{label: StepTime}`` on ``[0, t_max]``, with each mean marked."""
    check(t_max > 0, "t_max", t_max, "a time > 0")
    ax = _axes(ax, (11, 3.5))
    t = np.linspace(0.0, float(t_max), 400)
    for k, (label, dist) in enumerate(dists.items()):
        color = _CYCLE[k % len(_CYCLE)] if label not in CLASS_COLORS else CLASS_COLORS[label]
        ax.plot(t, dist.cdf(t), color=color, label=f"{label}: {dist.describe()}, mean {dist.mean:.3g} (dot)")
        if dist.mean <= t_max:
            ax.plot([dist.mean], [dist.cdf(dist.mean)], "o", color=color, markersize=4)
    ax.set_xlim(0, t_max)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("simulated time")
    ax.set_ylabel("P(step time <= t)")
    ax.set_title(title or "Step-time distributions (dots: means)")
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _despine(ax)
    return ax
