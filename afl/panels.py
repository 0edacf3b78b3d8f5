"""The notebooks' live panels: knobs and the picture they set, computed once per change.

:func:`panel` shows a row (or rows) of ipywidgets and what ``draw(**values)`` draws: its figures and printed text go
into the cell's own output, so a notebook executed headless (nbval, the book) shows them, and a change of a knob
replaces them in place (IPython's display updates), never leaving a stale copy beside a live one. A panel that
trains (tens of seconds on two cores) waits for its **Run** button and says what it is doing and how long it took.
"""
from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable


@dataclass
class Panel:
    """A shown panel's parts: ``handles`` (one per picture or text), ``button`` (None without one), ``status`` and
    ``redraw``. Shown already, it displays nothing more as a cell's last value."""

    handles: list
    button: object
    status: object
    redraw: Callable

    def _ipython_display_(self) -> None:
        pass


def render(draw: Callable, values: dict) -> list:
    """What ``draw(**values)`` prints and the figures it makes, as IPython display objects (text first, then each
    figure as a PNG); its ``plt.show()`` calls show nothing, and its figures are closed."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, Pretty
    before = set(plt.get_fignums())
    printed = io.StringIO()
    show = plt.show
    plt.show = lambda *args, **kwargs: None
    try:
        with contextlib.redirect_stdout(printed):
            draw(**values)
    finally:
        plt.show = show
    items = [Pretty(printed.getvalue().rstrip("\n"))] if printed.getvalue() else []
    for number in [n for n in plt.get_fignums() if n not in before]:
        fig = plt.figure(number)
        png = io.BytesIO()
        fig.savefig(png, format="png", bbox_inches="tight", dpi=fig.dpi)
        plt.close(fig)
        items.append(Image(data=png.getvalue(), format="png"))
    return items


def panel(draw: Callable, knobs: dict, rows: list[list[str]] | None = None, run_button: bool = False,
          seconds: str = "") -> Panel:
    """Show ``knobs`` (ipywidgets, by ``draw``'s keyword) in ``rows`` of knob names (default: one row), then what
    ``draw`` draws with their values, computed once now; it is redrawn in place when a knob changes, or with
    ``run_button`` when **Run** is pressed (``seconds``: how long a run takes, said beside the button). Returns its
    :class:`Panel`."""
    import ipywidgets as widgets
    from IPython.display import Pretty, display
    rows = rows or [list(knobs)]
    boxes = [widgets.HBox([knobs[name] for name in row]) for row in rows]
    status = widgets.Label()
    handles: list = []

    def redraw(*_):
        t0 = time.perf_counter()
        status.value = "running…" + (f" (about {seconds})" if seconds else "")
        items = render(draw, {name: w.value for name, w in knobs.items()})
        for i, item in enumerate(items):
            if i < len(handles):
                handles[i].update(item)
            else:                                      # outside IPython there is no handle: shown once
                handles.append(display(item, display_id=True) or SimpleNamespace(update=display))
        for handle in handles[len(items):]:            # fewer pictures than before: clear the rest
            handle.update(Pretty(""))
        status.value = (f"done in {time.perf_counter() - t0:.0f} s; change the knobs and press Run again"
                        if run_button else "")

    button = None
    if run_button:
        button = widgets.Button(description="Run", button_style="primary", icon="play")
        button.on_click(redraw)
        display(widgets.VBox(boxes + [widgets.HBox([button, status])]))
    else:
        for w in knobs.values():
            w.observe(redraw, names="value")
        display(widgets.VBox(boxes))
    redraw()
    return Panel(handles, button, status, redraw)


__all__ = ["Panel", "panel", "render"]
