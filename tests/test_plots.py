"""One picture language: a method's colour, line style and label do not depend on the order of the methods."""
import matplotlib

matplotlib.use("Agg")          # tests only: the library itself never picks a backend

from matplotlib.figure import Figure  # noqa: E402

from afl.plots import METHOD_STYLES, band_label, plot_bars, plot_curves, style  # noqa: E402


def curves(methods, seeds=3):
    return {m: {"time": [0, 1, 2], "runs": [[0.1 * k, 0.2, 0.3 + 0.01 * k] for k in range(seeds)]} for m in methods}


def line_styles(ax):
    return {line.get_label(): (line.get_color(), line.get_linestyle()) for line in ax.get_lines()}


def test_colours_are_fixed_by_method_not_by_order():
    a = plot_curves(curves(["favas", "quafl", "fedbuff"]), ax=Figure().subplots())
    b = plot_curves(curves(["fedbuff", "favas-normalized", "favas", "quafl"]), ax=Figure().subplots())
    sa, sb = line_styles(a), line_styles(b)
    for m in ("favas", "quafl", "fedbuff"):
        assert sa[style(m)["label"]] == sb[style(m)["label"]]
    assert sb[style("favas-normalized")["label"]][0] == sb[style("favas")["label"]][0]   # a variant: same colour
    assert sb[style("favas-normalized")["label"]][1] != sb[style("favas")["label"]][1]   # another line style
    families = {"fedavg", "quafl", "fedbuff", "favas", "qafel", "no hidden state",       # QAFeL's ablation: its own
                "fedprox", "scaffold", "feddyn", "mime", "fedcm", "ghbm", "fedhbm",      # GHBM's families
                "fedasync", "ca2fl", "fadas"}                                           # beyond the papers
    assert len({c for c, _, _ in METHOD_STYLES.values()}) == len(families)              # one colour per algorithm
    assert style("some-new-method") == style("some-new-method")                          # stable fallback


def test_bands_say_what_they_are():
    ax = plot_curves(curves(["favas"], seeds=4), ax=Figure().subplots())
    assert band_label(4) in [t.get_text() for t in ax.get_legend().get_texts()]
    one = plot_curves(curves(["favas"], seeds=1), ax=Figure().subplots())
    assert not any("std" in t.get_text() for t in one.get_legend().get_texts())


def test_log_axis_leaves_out_zeros():
    data = {"favas": {"time": [0, 1, 2], "runs": [[0.0, 5.0, 7.0]]}}
    ax = plot_curves(data, ax=Figure().subplots(), logy=True)
    y = ax.get_lines()[0].get_ydata()
    assert y[0] != y[0] and list(y[1:]) == [5.0, 7.0]                                   # NaN at t = 0


def test_bars_use_the_method_colours_and_mark_the_paper():
    ax = plot_bars({"quafl": {"iid": 90.0}, "favas": {"iid": 95.0}}, {"quafl": {"iid": 1.0}, "favas": {"iid": 0.5}},
                   ax=Figure().subplots(), reference={"favas": {"iid": 95.1}}, seeds=10)
    colours = [p.get_facecolor()[:3] for p in ax.patches]
    to_rgb = matplotlib.colors.to_rgb
    assert colours == [to_rgb(style("quafl")["color"]), to_rgb(style("favas")["color"])]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "paper (reference)" in labels and "error bars: std over 10 seeds" in labels
