"""FAVAS's claims bound to afl's results: every cell of Table 2 (a level each, at the paper's 10 seeds) and the
orderings Sec. 5 states (paired by seed)."""
from ..claims import Claim, Effect, Level, Mean, Minus, Probe, Run, Runs
from ..papers import favas as paper
from ..repro import favas as repro

T2 = "favas/table2/favas-table2"
RUN = Run("favas-table2", seeds=10)
#: Table 2's rows and columns, by afl's method and split names
ROWS = {row: method for method, row in repro.PAPER_ROWS.items()}
SPLITS = {column: split for split, column in repro.PAPER_COLUMNS.items()}
#: the variant whose number explains a difference: (method, why)
PROBES = {
    "favas": ("favas-normalized", "Algorithm 1 as written divides each upload by α, a client's expected number of "
              "local steps; with ᾱ/α (the server step × ᾱ: favas-normalized, the same runs otherwise) FAVAS reaches "
              "the paper's number, so the written 1/α, not asynchrony, costs the accuracy"),
    "fedbuff": ("fedbuff-quafl-code", "FedBuff as the QuAFL code's train_FedBuff runs it (every client in flight, lr "
                "Z/n; FAVAS built its simulator on that code), where afl's row is Nguyen et al.'s FedBuff as the paper "
                "describes it"),
    "quafl": ("quafl-lattice14", "QuAFL with the QuAFL code's 14-bit lattice exchange (quafl-lattice14), where "
              "afl's row exchanges full-precision models"),
}


def accuracy(method: str, split: str) -> Mean:
    """The mean final test accuracy (%) over seeds of ``method`` on ``split``."""
    return Mean(Runs((("method", method), ("split", split)), ("final_accuracy",), scale=100.0))


def gain(a: str, b: str, split_a: str, split_b: str | None = None) -> Mean:
    """``a``'s accuracy minus ``b``'s, seed by seed (points)."""
    return Mean(Minus(accuracy(a, split_a).series, accuracy(b, split_b or split_a).series))


def _level(row: str, column: str) -> Claim:
    method, split = ROWS[row], SPLITS[column]
    probe = None
    if method in PROBES:
        variant, why = PROBES[method]
        probe = Probe(T2, accuracy(variant, split), Level(paper.TABLE2[row, column]), why)
    return Claim(f"favas-t2-{method}-{split}", "FAVAS", paper.TABLE2[row, column].where,
                 f"{row} reaches the paper's accuracy, {column}", Level(paper.TABLE2[row, column]),
                 accuracy(method, split), T2, RUN, probe=probe, data=("mnist",), unit="%")


def _effect(id_: str, statement, text: str, a: str, b: str, col_a: str, col_b: str | None = None) -> Claim:
    """``a`` beats ``b`` (Table 2's rows, on ``col_a`` and ``col_b``) by the table's difference, seed by seed; its
    probe, where either method has one, is the same comparison with each such method read as its cells' probe
    variant (:data:`PROBES`)."""
    col_b = col_b or col_a
    diff = paper.TABLE2[a, col_a].value - paper.TABLE2[b, col_b].value
    shown = f"{diff:+.1f} points ({paper.TABLE2[a, col_a].printed} against {paper.TABLE2[b, col_b].printed} %)"
    rule, (ma, mb), (sa, sb) = Effect(diff, shown), (ROWS[a], ROWS[b]), (SPLITS[col_a], SPLITS[col_b])
    probed = [m for m in dict.fromkeys((ma, mb)) if m in PROBES]
    probe = Probe(T2, gain(PROBES.get(ma, (ma,))[0], PROBES.get(mb, (mb,))[0], sa, sb), rule,
                  "; ".join(PROBES[m][1] for m in probed)) if probed else None
    return Claim.stated(id_, statement, text, rule, gain(ma, mb, sa, sb), T2, RUN, probe=probe, data=("mnist",),
                        unit="points")


def _figure3(id_: str, experiment: str, text: str, a: str, b: str, data: str, statement) -> Claim:
    split = "noniid_2of3_fast" if experiment == "favas-fig3a" else "iid"
    return Claim.stated(id_, statement, text, Effect(None, "above (a curve, no number)"), gain(a, b, split),
                        f"favas/{experiment.removeprefix('favas-')}/{experiment}", Run(experiment, seeds=3),
                        data=(data,), unit="points", seeds=0)


A, P = paper.ASYNC_ADVANTAGE, paper
CLAIMS = (
    *[_level(row, column) for row in ROWS for column in SPLITS],
    *[_effect(f"favas-beats-fedavg-{SPLITS[c]}", A, f"FAVAS beats FedAvg, {c}", "FAVAS", "FedAvg", c) for c in SPLITS],
    _effect("fedbuff-beats-fedavg-noniid_2of3_fast", A, f"FedBuff beats FedAvg, {P.TWO_THIRDS}", "FedBuff", "FedAvg",
            P.TWO_THIRDS),
    *[_effect(f"favas-beats-quafl-{SPLITS[c]}", P.QUAFL_NONIID, f"FAVAS beats QuAFL, {c}", "FAVAS", "QuAFL", c)
      for c in (P.TWO_THIRDS, P.ONE_NINTH)],
    _effect("fedbuff-slow-majority", P.FEDBUFF_SLOW, "FedBuff loses accuracy when most clients are slow (2/3 fast "
            "against 1/9 fast)", "FedBuff", "FedBuff", P.TWO_THIRDS, P.ONE_NINTH),
    _effect("favas-beats-fedbuff-noniid_1of9_fast", P.FEDBUFF_SLOW, f"FAVAS beats FedBuff, {P.ONE_NINTH}", "FAVAS",
            "FedBuff", P.ONE_NINTH),
    *[_figure3(f"fig3a-{a}-beats-{b}", "favas-fig3a", f"{a} beats {b} on non-IID CIFAR-10 with ResNet-20 (Fig. 3a)",
               ROWS.get(a, a), ROWS.get(b, b), "cifar10", P.CIFAR10)
      for a, b in (("FAVAS", "FedAvg"), ("FAVAS", "QuAFL"), ("FedBuff", "FedAvg"), ("FedBuff", "QuAFL"))],
    *[_figure3(f"fig3b-favas-beats-{b}", "favas-fig3b", f"FAVAS beats {b} on TinyImageNet with ResNet-18 (Fig. 3b)",
               "favas", ROWS[b], "tinyimagenet", P.TINYIMAGENET) for b in ("FedAvg", "QuAFL", "FedBuff")],
)

#: the paper's headline claims (its abstract's: FAVAS ahead of FedAvg on non-IID clients, on MNIST and on the deep nets
#: of Fig. 3), first in the plan of paper-scale runs (:mod:`afl.plan`)
HEADLINE = ("favas-beats-fedavg-noniid_2of3_fast", "favas-beats-fedavg-noniid_1of9_fast", "fig3a-FAVAS-beats-FedAvg",
            "fig3b-favas-beats-FedAvg")

__all__ = ["CLAIMS", "HEADLINE", "ROWS", "SPLITS", "accuracy", "gain"]
