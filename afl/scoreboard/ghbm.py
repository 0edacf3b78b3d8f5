"""GHBM's claims bound to afl's results: every cell of Tables 2, 3, 4, 8 and 9, and the orderings of Sec. 5.2-5.3,
Figs 1, 3 and 9 (App. C.9)."""
from ..claims import (Best, Claim, Constant, Effect, Elsewhere, Exact, GeoMean, Last, Level, Mean, Minus, Over, Plus,
                      Pooled, Probe, Range, Run, Runs, Statement)
from ..papers import ghbm as paper
from ..repro import ghbm as repro
from .verdict import slug

SHK, CIFAR_2000 = "ghbm/shakespeare/ghbm-table2", "ghbm/cifar10/2000-rounds/ghbm-table2"
#: Table 2's (and Table 8's, where MIME is "Mime") rows -> afl's method names
METHOD = {row: method for method, row in repro.PAPER_ROWS.items()} | {"Mime": "mime"}
NO_RESNET = ("afl's GHBM experiment has no ResNet-20 setting (Table 7's ResNet-20 rates are not in afl's HYPER), "
             "and no original CIFAR-10 copy is here (only the lossy JPEG one)")
NO_CIFAR100 = "afl's GHBM experiment has no CIFAR-100 task, and no CIFAR-100 copy is here"
LARGE_SCALE = ("afl has neither the data (GLDv2, iNaturalist, StackOverflow) nor the pretrained models "
               "(MobileNetV2, ViT-B/16) of the paper's large-scale settings")
_CODE_SCALE = "the authors' code scales the momentum by C where the text does not"
_FEDCM_TAU_1 = ("the paper labels its FedCM and FedADC rows 'GHBM tau = 1' and their Shakespeare numbers are equal to "
                "the decimal; GHBM with tau = 1 at the GHBM family's rates (eta = eta_l = 1, beta = 0.9: ours, Table 7 "
                "marks none) is that reading, where afl's FedCM at Table 7's eta = 0.1 stays near 26 % and at eta = 1 "
                "(fedcm-server-lr-1) reaches 45.8 %")
#: (method, dataset) -> (variant, why, folder): the variant whose number explains a difference (``"ghbm tau=1"``:
#: GHBM at that tau), with why; ``folder``: its Shakespeare probe's own (``results/ghbm/shakespeare/probes/
#: <folder>-<split>/``), or "" where it runs beside the method in the same result
PROBES = {
    ("fedcm", "cifar10"): ("fedcm-server-lr-1", "at Table 7's η = 0.1 FedCM's step is a convex mix of displacements "
                           "with no 1/(1 − β) gain, a tenth of FedAvg's; with η = 1 (fedcm-server-lr-1) it learns", ""),
    ("fedcm", "shakespeare"): ("ghbm tau=1", _FEDCM_TAU_1, "ghbm-tau-1"),
    ("fedadc", "shakespeare"): ("ghbm tau=1", _FEDCM_TAU_1, "ghbm-tau-1"),
    ("adabest", "shakespeare"): ("adabest-beta-0", "the paper states no server beta, and its AdaBest rows equal "
                                 "FedAvg's on every CNN and LSTM column; with beta = 0 (no server extrapolation) afl's "
                                 "AdaBest ends beside FedAvg, a little below it (100-round probe: "
                                 "results/ghbm/shakespeare/probes/adabest-noniid-100)", "adabest-beta-0"),
    ("fedavgm", "shakespeare"): ("fedavgm-server-lr-1", "at Table 7's eta = 0.1 FedAvgM trails FedAvg at every round; "
                                 "with eta = 1 (beta = 0.9) it leads FedAvg from round 10 on (100-round probe: "
                                 "results/ghbm/shakespeare/probes/fedavgm-server-lr-1-noniid-100), as the paper's row "
                                 "does", "fedavgm-server-lr-1"),
} | {(m, d): (f"{m}-code-scale", _CODE_SCALE, "") for m in ("localghbm", "fedhbm") for d in ("cifar10", "shakespeare")}
#: one-seed runs at the paper's Shakespeare protocol of methods the five-seed table :data:`SHK` does not hold, read
#: where no five-seed folder is committed (``results/ghbm/shakespeare/history/``)
SHAKESPEARE_HISTORY = {method: f"ghbm/shakespeare/history/250-rounds-{folder}/ghbm-table2" for method, folder in
                       (("mime", "mime"), ("mimemom", "mimemom"), ("mimelitemom", "cpu"),
                        ("fedcm-full", "fedcm-full"))}


def accuracy(method: str, split: str, tau: int | None = None) -> Mean:
    """The mean over seeds of the final accuracy (% over the last rounds, App. C.4) of ``method`` on ``split``."""
    where = (("method", method), ("split", split)) + ((("tau", tau),) if tau is not None else ())
    return Mean(Runs(where, ("final",), scale=100.0))


def gain(a: str, b: str, split: str, tau_a: int | None = None, tau_b: int | None = None) -> Mean:
    """``a``'s accuracy minus ``b``'s, seed by seed (points)."""
    return Mean(Minus(accuracy(a, split, tau_a).series, accuracy(b, split, tau_b).series))


def _shakespeare_run(method: str, split: str) -> Run:
    return Run("ghbm-table2", (("dataset", "shakespeare"), ("eval_every", 10), ("splits", (split,)),
                               ("methods", (method,))), seeds=paper.SEEDS, out=_shakespeare_out(method, split))


def _shakespeare_out(method: str, split: str) -> str:
    """The folder of ``method``'s paper-scale Shakespeare runs on ``split`` (5 seeds): a claim reads it where it is
    committed, else the earlier one-seed table :data:`SHK`."""
    return f"results/ghbm/shakespeare/runs/{method}-{split}"


def _shakespeare_result(method: str, split: str) -> str:
    return _shakespeare_out(method, split).removeprefix("results/") + "/ghbm-table2"


def _cifar_cnn(method: str, split: str) -> tuple[str, Run]:
    run = Run("ghbm-table2", (("splits", (split,)), ("methods", (method,)), ("eval_every", 20)), seeds=paper.SEEDS,
              out=f"results/ghbm/cifar10/paper/{method}-{split}")
    return run.result, run


def _cell(table, row: str, column: str, split: str | None, result: str = "", run: Run | None = None,
          unsupported: str = "", data: tuple = (), earlier: tuple[str, ...] = ()) -> Claim:
    """A table's cell; ``earlier``: reduced results read, in order, where ``result`` does not cover it (the first
    holds the method's :data:`PROBES` that run beside it)."""
    number = table[row, column]
    method = METHOD.get(row, "")
    id_ = f"ghbm-t{table.source.split()[-1]}-{method or slug(row)}-{slug(column)}"
    if not number.legible:
        unsupported = unsupported or "the paper's text copy lost this cell's number"
    head = (id_, "GHBM", number.where, f"{row} reaches the paper's accuracy, {column}", Level(number))
    if unsupported:
        return Claim(*head, None, result, unsupported=unsupported, data=data, unit="%")
    return Claim(*head, accuracy(method, split), result, run, data=data, unit="%",
                 probe=_probe(method, split, number, data, earlier[0] if earlier else result),
                 earlier=tuple((e, accuracy(method, split)) for e in earlier))


def _probe(method: str, split: str | None, number, data: tuple, beside: str) -> Probe | None:
    """``method``'s probe (:data:`PROBES`) on ``split`` of ``data``: read from its own folder, or from ``beside``."""
    key = (method, data[0] if data else "")
    if key not in PROBES or not beside:
        return None
    variant, why, folder = PROBES[key]
    name, _, tau = variant.partition(" tau=")
    where = f"ghbm/shakespeare/probes/{folder}-{split}/ghbm-table2" if folder else beside
    return Probe(where, accuracy(name, split, int(tau) if tau else None), Level(number), why)


def _table2(row: str, column: str) -> Claim:
    if column.startswith("Shakespeare"):
        split, method = "noniid" if "non-IID" in column else "iid", METHOD[row]
        earlier = (SHK, SHAKESPEARE_HISTORY[method]) if method in SHAKESPEARE_HISTORY else (SHK,)
        return _cell(paper.TABLE2, row, column, split, _shakespeare_result(method, split),
                     _shakespeare_run(method, split), data=("shakespeare",), earlier=earlier)
    return _cell(paper.TABLE2, row, column, None, unsupported=NO_RESNET if "ResNet" in column else NO_CIFAR100,
                 data=("cifar10",) if "ResNet" in column else ("cifar100",))


def _table8(row: str, column: str) -> Claim:
    if "ResNet" in column:
        return _cell(paper.TABLE8, row, column, None, unsupported=NO_RESNET, data=("cifar10",))
    split = "noniid" if "non-IID" in column else "iid"
    result, run = _cifar_cnn(METHOD[row], split)
    return _cell(paper.TABLE8, row, column, split, result, run, data=("cifar10",))


def _unsupported(table, row: str, column: str, why: str) -> Claim:
    return _cell(table, row, column, None, unsupported=why)


def _effect(id_: str, source, text: str, rule, measure, result: str, run: Run | None, data: tuple,
            unit: str = "points", **more) -> Claim:
    """An ordering or effect: ``source`` a sentence of the paper (:class:`afl.claims.Statement`) or a table's
    cells (a string); ``more``: the claim's other fields (probe, unsupported, seeds)."""
    fields = dict(data=data, unit=unit) | more
    if isinstance(source, Statement):
        return Claim.stated(id_, source, text, rule, measure, result, run, **fields)
    return Claim(id_, "GHBM", source, text, rule, measure, result, run, **fields)


def _difference(table, a: str, b: str, column: str) -> Effect:
    diff = table[a, column].value - table[b, column].value
    return Effect(diff, f"{diff:+.1f} points ({table[a, column].printed} against {table[b, column].printed} %)")


# -- Table 4's communication overhead: bytes a round moves per participating client, against FedAvg's 2 models
def _per_upload(method: str, tau: int | None = None) -> Over:
    where = (("method", method), ("split", "noniid")) + ((("tau", tau),) if tau else ())
    return Over(Plus(Runs(where, ("bytes_up",)), Runs(where, ("bytes_down",))), Runs(where, ("uploads",)))


_TWO_MODELS = Over(Plus(Runs((("method", "fedavg"), ("split", "noniid")), ("bytes_up",)),
                        Runs((("method", "fedavg"), ("split", "noniid")), ("bytes_up",))),
                   Runs((("method", "fedavg"), ("split", "noniid")), ("uploads",)))
OVERHEAD_ROWS = {"FedAvg": ("fedavg", None), "SCAFFOLD": ("scaffold", None), "FedAvgM": ("fedavgm", None),
                 "MimeMom": ("mimemom", None), "GHBM (ours)": ("ghbm", 10), "FedHBM (ours)": ("fedhbm", None)}


def _overhead(row: str) -> Claim:
    """Read from the method's five-seed folder against FedAvg's (seed by seed), else from the one-seed table, else
    from its one-seed run under history/ against FedAvg's five-seed folder."""
    method, tau = OVERHEAD_ROWS[row]
    number = paper.TABLE4[row, "communication overhead"]
    against_folder = Constant(Over(_per_upload(method, tau),
                                   Elsewhere(_shakespeare_result("fedavg", "noniid"), _TWO_MODELS)))
    earlier = ((SHK, Constant(Over(_per_upload(method, tau), _TWO_MODELS))),)
    if method in SHAKESPEARE_HISTORY:
        earlier += ((SHAKESPEARE_HISTORY[method], against_folder),)
    return Claim(f"ghbm-table4-{method}-overhead", "GHBM", number.where, f"{row} moves {number.printed} FedAvg's "
                 "bytes a round (a download and an upload of the model per client)", Exact(number, 1),
                 against_folder, _shakespeare_result(method, "noniid"), _shakespeare_run(method, "noniid"),
                 data=("shakespeare",), unit="×", earlier=earlier)


# -- App. C.9's quadratic (Fig. 9): final training loss per local-step count J, one deterministic run
QUADRATIC = "ghbm/quadratic/ghbm-quadratic"
STEPS = ("1", "5", "10", "20")


def _loss_ratio(a: str, b: str, steps=STEPS) -> Pooled:
    return Pooled(tuple(Over(Last(("curves", j, a)), Last(("curves", j, b))) for j in steps),
                  tuple(f"J = {j}" for j in steps))


_EQ4 = ("GHBM as the paper's proofs analyse it (eq. (4), ghbm-eq4) holds it: on a cyclic schedule of period τ, "
        "θ^{t−1} = θ^{t−τ−1}, so Algorithm 2's eq. (7) momentum vanishes and GHBM as run ends on FedAvg's limit cycle")
_TAU = (1, 2, 5, 10, 20, 40)
#: Fig. 2's τ claims are read from the sweep at 300 rounds of the CPU task, where the seeds' spread is as large as
#: τ's effect; their probe is the same sweep on the same task for 1,000 rounds (App. C.10: short budgets mislead).
TAU_LONG = "ghbm/tau/1000-rounds/ghbm-tau"
_TAU_LONG_RUN = Run("ghbm-tau", (("dataset", "fashion-mnist"), ("model", "mlp200"), ("rounds", 1000),
                                 ("eval_every", 20), ("last", 100), ("taus", _TAU)), seeds=paper.SEEDS,
                    out=f"results/{TAU_LONG.rpartition('/')[0]}")
_TAU_LONG_WHY = ("the same measure and rule on the same CPU task (Fashion-MNIST, the MLP, 5 seeds) run 1,000 rounds "
                 "instead of 300: where it holds, 300 rounds are too few for the seeds to tell the windows apart")


def _tau_claim(id_: str, source, text: str, rule, measure, **more) -> Claim:
    """A claim of Fig. 2's τ sweep, read from the committed CPU sweep and probed by its 1,000-round run."""
    return _effect(id_, source, text, rule, measure, "ghbm/tau/ghbm-tau", Run("ghbm-tau", seeds=paper.SEEDS),
                   ("cifar10",), probe=Probe(TAU_LONG, measure, rule, _TAU_LONG_WHY, run=_TAU_LONG_RUN), **more)

_RUN_CIFAR = Run("ghbm-table2", (("splits", ("noniid",)), ("methods", ("fedavg", "fedcm", "ghbm", "localghbm",
                                                                    "fedhbm")), ("eval_every", 20)),
                 seeds=paper.SEEDS, out="results/ghbm/cifar10/paper/headline")
#: the headline run's result; the 2,000-round table (:data:`CIFAR_2000`, reduced) until it is committed
_CIFAR_HEADLINE = "ghbm/cifar10/paper/headline/ghbm-table2"

CLAIMS = (
    *[_table2(row, column) for row in paper.TABLE2.rows for column in paper.TABLE2.columns],
    *[_table8(row, column) for row in paper.TABLE8.rows for column in paper.TABLE8.columns],
    *[_unsupported(paper.TABLE3, row, column, LARGE_SCALE) for row in paper.TABLE3.rows
      for column in paper.TABLE3.columns],
    *[_overhead(row) for row in paper.TABLE4.rows],
    *[_unsupported(paper.TABLE4, row, column, NO_CIFAR100 if "CIFAR-100" in column else LARGE_SCALE)
      for row in paper.TABLE4.rows for column in paper.TABLE4.columns[1:]],
    *[_unsupported(paper.TABLE9, row, column, NO_CIFAR100 + "; nor ResNet-20's rates")
      for row in paper.TABLE9.rows for column in paper.TABLE9.columns],
    *[_effect(f"ghbm-shakespeare-fedhbm-beats-fedavg-{split}", f"Table 2 · FedHBM against FedAvg · {column}",
              f"FedHBM beats FedAvg, {column}", _difference(paper.TABLE2, "FedHBM (ours)", "FedAvg", column),
              Mean(Minus(accuracy("fedhbm", split).series,
                         Elsewhere(_shakespeare_result("fedavg", split), accuracy("fedavg", split).series))),
              _shakespeare_result("fedhbm", split), _shakespeare_run("fedhbm", split), ("shakespeare",),
              earlier=((SHK, gain("fedhbm", "fedavg", split)),))
      for split, column in (("noniid", "Shakespeare non-IID"), ("iid", "Shakespeare IID"))],
    *[_effect(f"ghbm-outperform-{model}", paper.OUTPERFORM, f"FedHBM beats FedAvg by {margin} points, "
              f"{column}", Effect(margin, f"+{margin} points (Sec. 5.3)"), None, "", None, (),
              unsupported=NO_RESNET if model == "resnet20" else NO_CIFAR100) for model, margin, column
      in (("resnet20", 20.6, "CIFAR-10 (ResNet-20) non-IID"), ("cnn", 14.4, "CIFAR-100 (CNN) non-IID"))],
    _effect("ghbm-cifar10-cnn-fedhbm-beats-fedavg", "Table 8 · FedHBM against FedAvg · CIFAR-10 (CNN) non-IID",
            "FedHBM beats FedAvg, CIFAR-10 (CNN) non-IID",
            _difference(paper.TABLE8, "FedHBM (ours)", "FedAvg", "CIFAR-10 (CNN) non-IID"),
            gain("fedhbm", "fedavg", "noniid"), _CIFAR_HEADLINE, _RUN_CIFAR, ("cifar10",),
            earlier=((CIFAR_2000, gain("fedhbm", "fedavg", "noniid")),)),
    _effect("ghbm-cifar10-cnn-ghbm-beats-fedcm", paper.TAU_CRUCIAL, "GHBM (τ = 10) beats FedCM (GHBM τ = "
            "1), CIFAR-10 (CNN) non-IID (Fig. 2)", Effect(None, "above (a curve, no number)"),
            gain("ghbm", "fedcm", "noniid", tau_a=10), _CIFAR_HEADLINE, _RUN_CIFAR, ("cifar10",),
            earlier=((CIFAR_2000, gain("ghbm", "fedcm", "noniid", tau_a=10)),)),
    _tau_claim("ghbm-tau-crucial", paper.TAU_CRUCIAL, "GHBM with τ = 10 beats τ = 1, non-IID (Fig. 2)",
               Effect(None, "above (a curve, no number)"), gain("ghbm", "ghbm", "noniid", tau_a=10, tau_b=1)),
    _tau_claim("ghbm-best-tau", paper.BEST_TAU, "GHBM's best window τ is 1/C = 10 rounds, "
               "seed by seed (within the sweep's neighbours 5 and 20)", Range(5, 20, "τ ≈ 1/C = 10"),
               Best(tuple((t, accuracy("ghbm", "noniid", t).series) for t in _TAU)), unit="rounds"),
    *[_effect(f"ghbm-alpha-{split}", paper.LESS_SEVERE, f"FedHBM beats FedAvg at {split} (Fig. 3)",
              Effect(None, "above (a curve, no number)"), gain("fedhbm", "fedavg", split), "ghbm/alpha/ghbm-alpha",
              Run("ghbm-alpha", seeds=paper.SEEDS), ("cifar10",)) for split in ("alpha=0", "alpha=0.1", "iid")],
    *[_effect(f"ghbm-fig1-{split}", paper.OLD_GRADIENTS, f"The mean of the last τ = 10 pseudo-gradients "
              f"deviates less from all clients' than the last one alone, {split} (Fig. 1)",
              Effect(None, "below 1 (a curve, no number)", null=1.0, side=-1),
              GeoMean(Over(*(Runs((("method", "fedavg"), ("split", split)), ("deviation", "tau", t, "*"))
                             for t in ("10", "1")))), "ghbm/fig1/ghbm-fig1", Run("ghbm-fig1", seeds=paper.SEEDS),
              ("cifar100",), unit="×")
      for split in ("noniid", "iid")],
    _effect("ghbm-fig9-fedcm-stalls", paper.FEDCM_CYCLIC, "With cyclic participation FedCM ends above GHBM "
            "(τ = 1/C = 5) in training loss, for every J (App. C.9's quadratic)",
            Range(1.0, None, "FedCM's final loss above GHBM's, every J"), _loss_ratio("fedcm", "ghbm"), QUADRATIC,
            Run("ghbm-quadratic"), (), unit="×", seeds=0,
            probe=Probe(QUADRATIC, _loss_ratio("fedcm", "ghbm-eq4"), Range(1.0, None, "every J"), _EQ4)),
    _effect("ghbm-fig9-ghbm-full", paper.GHBM_FULL, "With cyclic participation GHBM ends within 1.25× of "
            "FedCM with every client in training loss, J = 5, 10, 20 (J = 1: FedCM with every client reaches float "
            "precision)", Range(0.8, 1.25, "nearly the same"), _loss_ratio("ghbm", "fedcm-full", STEPS[1:]),
            QUADRATIC, Run("ghbm-quadratic"), (), unit="×", seeds=0,
            probe=Probe(QUADRATIC, _loss_ratio("ghbm-eq4", "fedcm-full", STEPS[1:]), Range(0.8, 1.25, "J ≥ 5"),
                        _EQ4)),
    _effect("ghbm-table4-saving", paper.SAVING, "GHBM and FedHBM save 67.5 % of the bytes and 62.5 % of "
            "the time FedAvg takes to its final quality, on average over Table 4's settings",
            Effect(67.5, "−67.5 % bytes, −62.5 % time"), None, "", None, (), unsupported=NO_CIFAR100 + "; " +
            LARGE_SCALE),
)

#: the paper's headline claims (FedHBM ahead of FedAvg, GHBM ahead of FedCM, at the paper's scale), first in the plan
#: of paper-scale runs (:mod:`afl.plan`)
HEADLINE = ("ghbm-cifar10-cnn-fedhbm-beats-fedavg", "ghbm-cifar10-cnn-ghbm-beats-fedcm",
            "ghbm-shakespeare-fedhbm-beats-fedavg-noniid", "ghbm-shakespeare-fedhbm-beats-fedavg-iid")

__all__ = ["CLAIMS", "HEADLINE", "METHOD", "TAU_LONG", "accuracy", "gain"]
