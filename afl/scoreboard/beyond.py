"""The asynchronous baselines beyond the four papers, bound to ``afl repro async-family``: what each abstract
claims (:mod:`afl.papers.beyond`) read as an ordering on FAVAS's non-IID MNIST stragglers (5 seeds, paired), with
the rules of every other claim. The setting is afl's, not the papers' (their data are CIFAR-10 and others): a
status here says whether the claim carries over to it."""
from ..claims import Claim, Effect, Run
from ..papers import beyond as paper
from ..repro.favas import SPLIT_NAMES
from .favas import gain

RESULT = "async-family/async-family"
RUN = Run("async-family", seeds=5)
SPLITS = ("noniid_2of3_fast", "noniid_1of9_fast")
#: (statement, the method, what it is read against, the reading)
ORDERINGS = (
    (paper.FEDASYNC, "fedasync", "fedavg", "FedAsync ends above synchronous FedAvg on the same clock"),
    (paper.CA2FL, "ca2fl", "fedbuff", "CA2FL ends above FedBuff, the buffered method it calibrates"),
    (paper.FADAS, "fadas", "fedbuff", "FADAS ends above FedBuff, the buffered method it adapts"),
)


def _claim(statement, a: str, b: str, text: str, split: str) -> Claim:
    return Claim.stated(f"beyond-{a}-beats-{b}-{split}", statement, f"{text}, {SPLIT_NAMES[split]}",
                        Effect(None, "above (the abstract gives no number)"), gain(a, b, split), RESULT, RUN,
                        data=paper.DATA[statement.paper], unit="points", seeds=0)


CLAIMS = tuple(_claim(*o, split) for o in ORDERINGS for split in SPLITS)
HEADLINE = ()

__all__ = ["CLAIMS", "HEADLINE"]
