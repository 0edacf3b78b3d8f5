"""The book's checks (tools/build_book.py): every internal link and figure resolves, no page shows a solution.
The book itself is built and checked by `make test` (make test-book)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import build_book  # noqa: E402


def test_dead_links_and_figures_are_named_and_solutions_refused(tmp_path, capsys):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "index.html").write_text('<a href="notebooks/a.html#top">a</a> <img src="fig.png"> '
                                         '<a href="https://example.org">x</a> <a href="#here">h</a>')
    (tmp_path / "notebooks/a.html").write_text('<a href="../index.html">home</a> <a href="../missing.html">m</a>')
    (tmp_path / "404.html").write_text('<a href="/index.html">served from the root</a>')
    assert build_book.dead_links(tmp_path) == ["index.html: <img> fig.png", "notebooks/a.html: <a> ../missing.html"]
    assert build_book.main(["--check-only", str(tmp_path)]) == 1
    (tmp_path / "fig.png").write_bytes(b"png")
    (tmp_path / "missing.html").write_text("ok")
    assert build_book.main(["--check-only", str(tmp_path)]) == 0
    (tmp_path / "notebooks/b.html").write_text("<p>teachers: code between # BEGIN SOLUTION and ...</p>")
    assert build_book.main(["--check-only", str(tmp_path)]) == 0          # the course map may name the marker
    (tmp_path / "notebooks/exercises").mkdir()
    (tmp_path / "notebooks/exercises/01_ex.html").write_text("<pre># BEGIN SOLUTION</pre>")
    assert build_book.main(["--check-only", str(tmp_path)]) == 1
    assert "notebooks/exercises/01_ex.html: shows a solution" in capsys.readouterr().err
    (tmp_path / "notebooks/exercises/01_ex.html").unlink()
    (tmp_path / "notebooks/exercises/01_sol.html").write_text("<p>an answer</p>")
    assert build_book.main(["--check-only", str(tmp_path)]) == 1


def test_the_book_stages_exercises_never_solutions():
    nav = build_book.stage()
    staged = {p.name for p in (build_book.STAGE / "docs" / "notebooks" / "exercises").iterdir()}
    assert staged and all(name.endswith("_ex.ipynb") for name in staged)
    assert (build_book.STAGE / "docs" / "index.md").read_text().startswith("# Learn asynchronous federated")
    assert (build_book.STAGE / "docs" / "readme.md").read_text().startswith("# afl")
    assert [next(iter(item)) for item in nav] == ["Start here", "Course", "Teachers", "Results", "Engine and runs"]
    exercise = json.loads((build_book.STAGE / "docs/notebooks/exercises/01_favas_ex.ipynb").read_text())
    shown = [c for c in exercise["cells"] if c["cell_type"] == "code" and c.get("outputs")]
    assert any("image/png" in o.get("data", {}) for c in shown for o in c["outputs"])       # 01's ablation figure
    assert not any("BEGIN SOLUTION" in "".join(c["source"]) or "raise NotImplementedError" in "".join(c["source"])
                   or "".join(c["source"]).startswith("check_") for c in shown)         # no answer's, no verdict


def test_a_widget_shows_what_it_is_not_its_repr(tmp_path):
    import json
    nb = {"cells": [{"cell_type": "code", "source": "panel(...)", "metadata": {}, "execution_count": 1, "outputs": [
        {"output_type": "display_data", "metadata": {},
         "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "x"}, "text/plain": "VBox(children=(...))"}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR", "text/plain": "<Image>"}}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb))
    build_book._static_widgets(path)
    outputs = json.loads(path.read_text())["cells"][0]["outputs"]
    assert outputs[0]["data"] == {"text/plain": build_book.KNOBS} and outputs[1]["data"]["image/png"] == "iVBOR"
