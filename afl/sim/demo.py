"""The straggler demo of ``notebooks/00_simulator``: compute three schedules on one client pool, then draw them.

``compute_straggler_demo(**knobs) -> dict`` and ``plot_straggler_demo(data) -> Figure`` follow the notebook rule
"compute_* returns data, plot_* draws it", so sliders can be wired with ``ipywidgets.interactive_output``.
"""
from __future__ import annotations

import os

from afl.errors import check_real
from afl.sim.counts import contact_steps_pmf
from afl.sim.plot import plot_class_shares, plot_steps_histogram, plot_timeline
from afl.sim.schedule import simulate_async_schedule, simulate_buffered_schedule, simulate_sync_schedule
from afl.sim.speeds import two_speed


def quick() -> bool:
    """True when ``AFL_QUICK=1`` is set (CI / nbval smoke runs)."""
    return os.environ.get("AFL_QUICK", "0") == "1"


def compute_straggler_demo(n: int = 20, slow_fraction: float = 1 / 3, s: int = 4, K: int = 5,
                           server_interval: float = 2.0, Z: int = 4, concurrency: int | None = None,
                           t_show: float = 80.0, t_end: float = 2000.0, seed: int = 0) -> dict:
    """FAVAS-like clients (exponential steps, mean 2 fast / 8 slow) under three servers, ``t_end`` long.

    Returns ``{"profile", "async", "buffered", "sync", "theory", "t_show"}``: the schedules
    (:class:`~afl.sim.ScheduleResult`; FedBuff with at most ``concurrency`` clients in flight, None: all), the
    exact pmf of E_i ^ K per class for the async server (:func:`~afl.sim.contact_steps_pmf`), and how much of the
    time axis the Gantt charts show.
    """
    profile = two_speed(n, slow_fraction=slow_fraction, seed=seed)
    return {
        "profile": profile,
        "async": simulate_async_schedule(profile, K, s, server_interval, t_end, seed=seed),
        "buffered": simulate_buffered_schedule(profile, K, Z, t_end, seed=seed, concurrency=concurrency),
        "sync": simulate_sync_schedule(profile, K, s, t_end, seed=seed),
        "theory": {name: contact_steps_pmf(profile.step_times[c], K, n, s, server_interval)
                   for c, name in enumerate(profile.names)},
        "t_show": check_real("t_show", t_show, 0, strict_low=True),
    }


def plot_straggler_demo(data: dict):
    """2 x 2 figure: async and buffered Gantt charts on top; E_i histogram and class shares below."""
    import matplotlib.pyplot as plt

    a, b = data["async"], data["buffered"]
    n = a.profile.n
    fig = plt.figure(figsize=(15, 3.0 + 0.42 * n), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[0.28 * n + 1.0, 3.2])
    p = a.params
    plot_timeline(a.timeline, ax=fig.add_subplot(grid[0, 0]), t_max=data["t_show"],
                  title=f"FAVAS/QuAFL: every {p['server_interval']:g} time units the server interrupts s = {p['s']} clients")
    c = b.params.get("concurrency")
    plot_timeline(b.timeline, ax=fig.add_subplot(grid[0, 1]), t_max=data["t_show"],
                  title=f"FedBuff: the server steps when Z = {b.params['Z']} clients have delivered K = {b.K} steps"
                        + (f";\nat most {c} clients in flight (blank: not selected)" if c is not None else ""))
    plot_steps_histogram(a, ax=fig.add_subplot(grid[1, 0]), theory=data["theory"],
                         title=f"FAVAS/QuAFL: steps finished when contacted (K = {a.K})")
    plot_class_shares(b, ax=fig.add_subplot(grid[1, 1]), title="FedBuff: who fills the buffer")
    return fig
