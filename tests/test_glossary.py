"""afl.glossary: the course's notation, the course map's table, and each notebook saying which meaning holds."""
import re
from pathlib import Path

from afl import glossary

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def test_the_course_map_holds_the_glossary_table():
    text = (NOTEBOOKS / "README.md").read_text()
    assert glossary.with_table(text) == text, "run `python -m afl.glossary notebooks/README.md`"


def test_every_notebook_it_names_exists_and_says_which_meaning_holds():
    names = {p.name.split("_")[0] for p in NOTEBOOKS.glob("0*.py")}
    for s in glossary.SYMBOLS:
        for where, meaning, code in s.meanings:
            for nb in (w.strip() for w in where.split(",")):
                assert nb in names | {"all", "data"}, (s.symbol, nb)
            assert meaning and code
    for path in NOTEBOOKS.glob("0*.py"):
        text = path.read_text()
        assert "**Notation in this notebook.**" in text or "**Which meaning holds here:**" in text, path.name


def test_a_symbol_with_several_meanings_is_told_apart_per_notebook():
    assert [m for s, m in glossary.meanings_in("02") if s == "τ"] == ["the rounds averaged into GHBM's momentum"]
    assert [m for s, m in glossary.meanings_in("04") if s == "τ"] == ["local steps per request (FedAST's `τ_m`)"]
    assert dict(glossary.meanings_in("03"))["Z"].startswith("FedBuff's buffer")
    assert re.search(r"\| `τ` \| staleness", glossary.markdown())
    alphas = [m for s, m in glossary.meanings_in("01") if s == "α"]       # 01's section 4b reads FedAsync's α
    assert len(alphas) == 2 and "FedAsync" in alphas[1] and "section 4b" in alphas[1]
    assert dict(glossary.meanings_in("01"))["τ"].startswith("staleness")
