"""The book: the executed notebooks, the per-paper result pages and the scoreboard as a static site, offline.

    python tools/build_book.py [--site site]           # make book
    python tools/build_book.py --check-only site       # only check the links of a built site

Built with MkDocs (Material theme) and mkdocs-jupyter: a notebook page is its committed ``.ipynb`` rendered with
its outputs, never executed again, so the book shows what ``make notebook-outputs`` computed and builds in seconds
without data or a GPU; Material gives navigation and an offline search index in one static folder that opens from
disk. (Jupyter Book would also serve, but its Sphinx build is heavier and its current version needs Node.)

The pages are staged in ``build/book/`` with the repository's own layout, so every relative link of the markdown
works unchanged: the README as the front page, ``docs/``, ``results/`` (reports, figures, JSON), the course map,
the walkthroughs and the *exercise* notebooks (never the solutions). After the build every internal link and image
of every page is checked: a link to a missing page or figure fails the build, naming the page and the target.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

REPO = Path(__file__).resolve().parent.parent
STAGE = REPO / "build" / "book"
PAPERS = (("FAVAS", "favas"), ("GHBM", "ghbm"), ("QAFeL", "qafel"), ("FedAST", "fedast"))


def course_order(stem: str) -> tuple:
    """Where notebook ``stem`` stands in the course map's order table (one not in it: after, by name)."""
    order = re.findall(r"^\| \d+ \| `([\w/]+)` \|", (REPO / "notebooks" / "README.md").read_text(), re.M)
    return (order.index(stem), stem) if stem in order else (len(order), stem)


def stage() -> list:
    """Copy the pages into :data:`STAGE` and return the navigation."""
    shutil.rmtree(STAGE, ignore_errors=True)
    (STAGE / "docs").mkdir(parents=True)
    src = STAGE / "docs"
    shutil.copy(REPO / "README.md", src / "readme.md")           # beside the front page: its links hold as they are
    (src / "index.md").write_text(front_page((REPO / "docs" / "learn.md").read_text()))
    for folder, pattern in (("docs", "*.md"), ("docs/teaching", "*.md"), ("data", "README.md"),
                            ("notebooks", "README.md"), ("notebooks", "0*.ipynb"),
                            ("notebooks/exercises", "*_ex.ipynb")):
        for f in sorted((REPO / folder).glob(pattern)):
            if f == REPO / "docs" / "learn.md":                       # it is the front page
                continue
            (src / folder).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, src / folder / f.name)
    for notebook in (src / "notebooks" / "exercises").glob("*_ex.ipynb"):
        _with_figures(notebook, REPO / "notebooks" / "exercises" / notebook.name.replace("_ex.", "_sol."))
    for notebook in src.rglob("*.ipynb"):
        _static_widgets(notebook)
    (src / "stylesheets").mkdir()
    (src / "stylesheets" / "afl.css").write_text(CSS)
    shutil.copytree(REPO / "results", src / "results",
                    ignore=shutil.ignore_patterns("*.partial.jsonl", "*.checkpoints", "demo"))
    for page in WIDE:
        (src / page).write_text("---\nhide:\n  - navigation\n  - toc\n---\n\n" + (src / page).read_text())
    walkthroughs = [{_title(f): f"notebooks/{f.name}"}
                    for f in sorted((src / "notebooks").glob("0*.ipynb"), key=lambda f: course_order(f.stem))]
    exercises = [{_title(f): f"notebooks/exercises/{f.name}"}
                 for f in sorted((src / "notebooks/exercises").glob("*_ex.ipynb"))]
    teaching = [{"Teacher notes": "docs/teaching/README.md"},
                *[{p.stem.replace("-", " ").capitalize(): f"docs/teaching/{p.name}"}
                  for p in sorted((src / "docs" / "teaching").glob("week-*.md"))],
                {"The week-6 project": "docs/teaching/project.md"}]
    return [{"Start here": "index.md"},
            {"Course": [{"Course map": "notebooks/README.md"}, *walkthroughs, {"Exercises": exercises}]},
            {"Teachers": teaching},
            {"Results": [{"Scoreboard": "results/README.md"},
                         *[{name: f"results/{key}/README.md"} for name, key in PAPERS]]},
            {"Engine and runs": [{"The project's README": "readme.md"}, {"Speed": "docs/speed.md"},
                                 {"Running experiments": "docs/running.md"}, {"Data": "data/README.md"}]}]


#: the book's own style: code wraps instead of being clipped, wide tables keep readable columns
CSS = """.md-typeset pre > code, .jp-RenderedText pre, .highlight pre, .highlight-ipynb pre, .jp-OutputArea pre
  { white-space: pre-wrap !important; word-break: break-word; }
.md-typeset table:not([class]) { font-size: .68rem; }
.md-typeset table:not([class]) td { min-width: 5em; }
.md-typeset table:not([class]) td:first-child { min-width: 14em; }
.md-grid { max-width: 1440px; }
"""
#: pages whose wide tables need the whole width: the book hides their navigation and table of contents
WIDE = ("results/README.md",)


def front_page(learn: str) -> str:
    """``docs/learn.md`` as the book's front page: its links from ``docs/`` rewritten from the site's root."""
    learn = learn.replace("](../README.md)", "](readme.md)").replace("](teaching/", "](docs/teaching/")
    return learn.replace("](../", "](")


def _with_figures(notebook: Path, solution: Path) -> None:
    """The exercise page with the outputs its solution notebook computed for the cells both share (the figures
    its text discusses); the cells that hold a solution or check one keep none."""
    import json
    nb, sol = json.loads(notebook.read_text()), json.loads(solution.read_text())
    outputs = {"".join(c["source"]): c.get("outputs", []) for c in sol["cells"] if c["cell_type"] == "code"
               and "BEGIN SOLUTION" not in "".join(c["source"])
               and not re.fullmatch(r"check_\w+\(\w+\)\s*", "".join(c["source"]))}     # a verdict would mislead
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and not cell.get("outputs"):
            cell["outputs"] = outputs.get("".join(cell["source"]), [])
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False))


#: what a page shows where the notebook displayed knobs (ipywidgets need a running kernel)
KNOBS = "[knobs: open this notebook in Jupyter to turn them; the picture below is drawn with their first values]"


def _static_widgets(notebook: Path) -> None:
    """A widget's output, whose text stand-in is its Python repr (``VBox(children=...``), says what it is instead."""
    import json
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if "application/vnd.jupyter.widget-view+json" in out.get("data", {}):
                out["data"] = {"text/plain": KNOBS}
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False))


def _title(notebook: Path) -> str:
    """A notebook's first heading, without its leading number's markdown."""
    import json
    cells = json.loads(notebook.read_text())["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else notebook.stem
    return re.sub(r"^#+\s*", "", first).strip() or notebook.stem


def config(nav: list) -> str:
    import json
    return "\n".join([
        "site_name: afl",
        "site_description: see and reproduce asynchronous and heterogeneous federated learning",
        "docs_dir: docs", "site_dir: ../../site", "use_directory_urls: false",
        "theme:", "  name: material", "  features: [navigation.sections, navigation.top, search.highlight]",
        "plugins:", "  - search", "  - offline",
        "  - mkdocs-jupyter:", "      execute: false", "      include_source: true",
        "markdown_extensions: [tables, admonition, attr_list, md_in_html]",
        "extra_css: [stylesheets/afl.css]",
        "validation:", "  links: {not_found: info, absolute_links: info, unrecognized_links: info}",
        "  omitted_files: info",
        f"nav: {json.dumps(nav, ensure_ascii=False)}", ""])


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for attr in ("href", "src"):
            if a.get(attr) and tag in ("a", "img"):
                self.links.append((tag, a[attr]))


def dead_links(site: Path) -> list[str]:
    """Every internal ``<a href>`` and ``<img src>`` of every page that does not resolve to a file of the site."""
    dead = []
    for page in sorted(site.rglob("*.html")):
        if page.name == "404.html":                   # served at any depth: its links are from the site's root
            continue
        parser = _Links()
        parser.feed(page.read_text(errors="replace"))
        for tag, target in parser.links:
            url = urlparse(target)
            if url.scheme or url.netloc or target.startswith(("#", "mailto:", "data:")) or not url.path:
                continue
            path = (page.parent / unquote(url.path)).resolve()
            if path.is_dir():
                path = path / "index.html"
            if not path.exists():
                dead.append(f"{page.relative_to(site)}: <{tag}> {target}")
    return dead


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--site", default=str(REPO / "site"), help="where the site goes (default: site/)")
    p.add_argument("--check-only", metavar="SITE", help="only check a built site's links")
    args = p.parse_args(argv)
    site = Path(args.check_only or args.site).resolve()
    if not args.check_only:
        nav = stage()
        text = config(nav).replace("site_dir: ../../site", f"site_dir: {site}")
        (STAGE / "mkdocs.yml").write_text(text)
        done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--clean", "-f",
                               str(STAGE / "mkdocs.yml")], cwd=STAGE, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        if done.returncode:
            return done.returncode
    pages = list(site.rglob("*.html"))
    dead = dead_links(site) + [f"{p.relative_to(site)}: shows a solution" for p in pages
                               if "_sol" in p.name or "exercises" in p.parts
                               and "BEGIN SOLUTION" in p.read_text(errors="replace")]
    for line in dead[:50]:
        print(f"book: {line}", file=sys.stderr)
    print(f"book: {len(pages)} pages in {site}; {len(dead)} problems (dead links, solutions shown)")
    return 1 if dead or not pages else 0


if __name__ == "__main__":
    sys.exit(main())
