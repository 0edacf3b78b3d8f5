"""The four papers' numbers, transcribed once from ``shared/papers`` (their tables cell by cell, and the sentences
that state orderings and effects), in the paper's own names. Nothing here knows afl's experiments: the papers'
modules in :mod:`afl.repro` bind these cells to committed results, and ``tests/test_claims.py`` checks that every
number and quote occurs in the paper's text."""
from . import fedast, favas, ghbm, qafel

#: paper -> its module, in the order of the papers
PAPERS = {"FAVAS": favas, "GHBM": ghbm, "QAFeL": qafel, "FedAST": fedast}

__all__ = ["PAPERS", "favas", "ghbm", "qafel", "fedast"]
