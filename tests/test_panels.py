"""The notebooks' live panels (afl.panels): computed once, redrawn in place, training panels behind Run."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

widgets = pytest.importorskip("ipywidgets")
pytestmark = pytest.mark.filterwarnings("ignore:Attempting to work in a virtualenv")   # IPython's, in a test's shell
from afl.panels import panel, render  # noqa: E402


@pytest.fixture(autouse=True)
def shell():
    """An IPython shell, as in a notebook's kernel: display() returns handles that update in place."""
    from IPython.core.interactiveshell import InteractiveShell
    yield InteractiveShell.instance()
    InteractiveShell.clear_instance()


def _draw(calls):
    def draw(k=1):
        calls.append(k)
        print(f"k = {k}")
        fig, ax = plt.subplots()
        ax.plot([0, k])
        plt.show()
    return draw


def test_render_captures_text_and_figures_and_closes_them():
    calls = []
    items = render(_draw(calls), {"k": 3})
    assert calls == [3] and plt.get_fignums() == []
    assert items[0].data == "k = 3" and items[1].data[:4] == b"\x89PNG"


def test_a_panel_computes_once_and_redraws_in_place(monkeypatch):
    updates = []
    monkeypatch.setattr("IPython.display.DisplayHandle.update", lambda self, obj, **kw: updates.append(obj))
    calls = []
    knob = widgets.IntSlider(value=1, min=1, max=5)
    p = panel(_draw(calls), {"k": knob})
    assert calls == [1] and len(p.handles) == 2 and p.button is None      # once, not twice
    assert p._ipython_display_() is None                                  # nothing more as a cell's value
    knob.value = 4
    assert calls == [1, 4] and len(updates) == 2 and updates[0].data == "k = 4"


def test_a_training_panel_waits_for_run(monkeypatch):
    monkeypatch.setattr("IPython.display.DisplayHandle.update", lambda self, obj, **kw: None)
    calls = []
    knob = widgets.IntSlider(value=1, min=1, max=5)
    p = panel(_draw(calls), {"k": knob}, run_button=True, seconds="a minute")
    knob.value = 2
    assert calls == [1]                                                   # a knob alone trains nothing
    p.button.click()
    assert calls == [1, 2] and p.status.value.startswith("done in")
