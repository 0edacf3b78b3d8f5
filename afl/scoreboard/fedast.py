"""FedAST's claims bound to afl's results: the abstract's gain, the orderings of Figs 2-5, Fig. 7's finish times and
gain, App. C.5's buffers (Figs 8, 9) and App. D.4-D.6, seed by seed (a seed that never reached a target counts at
the run's horizon, ``total_time``)."""
from ..claims import (Best, Claim, Effect, Elsewhere, GeoMean, Largest, Level, Mean, Minus, Over, Probe, Range, Run,
                      Runs, Same, Saved, Tuned)
from ..papers import fedast as paper

FIG2, FIG3, FIG5, FIG7, D6 = ("fedast/fig2/fedast-fig2", "fedast/fig3/fedast-fig3", "fedast/fig5/fedast-fig5",
                              "fedast/fig7/fedast-fig7", "fedast/d6/fedast-d6")
FOUR = ("mnist", "fashion-mnist", "cifar10", "shakespeare")
#: Fig. 5's datasets (afl's task names) and their names in the paper
DATASETS = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST", "cifar10-jpeg": "CIFAR-10",
            "shakespeare": "Shakespeare"}
#: "similar performance", "no gain": afl's margin, 10 % of the baseline's time (the smallest gain the paper reports
#: as one, App. D.6's 11.9 %, lies outside it)
SAME_GAIN = 10.0
#: "comparable performance": afl's margin, 1.5 points of final accuracy (the level rule's floor)
SAME_POINTS = 1.5
NO_RESNET18 = "afl's FedAST experiments have no CIFAR-100 task with ResNet-18, and no CIFAR-100 copy is here"


def _with(method: str, taskset: str | None = None, cap: int | None = None) -> tuple:
    where = (("method", method),)
    if taskset is not None:
        where += (("taskset", taskset),)
    return where + ((("cap", cap),) if cap is not None else ())


def finish(method: str, taskset: str | None = None, task: str | None = None) -> Runs:
    """The time until every task (or ``task``) reached its target, the horizon where it never did."""
    field = ("time_to_all_targets",) if task is None else ("tasks", f"name={task}", "reached")
    return Runs(_with(method, taskset), field, budget=("config", "total_time"))


def sync(taskset: str | None = None) -> Tuned:
    """Sync-ST at its best allocation (the paper reports the best of 30 schemes)."""
    return Tuned(finish("sync-st", taskset), "sync-st")


def accuracy(method: str, taskset: str | None = None, cap: int | None = None) -> Runs:
    """The mean final accuracy (%) over the run's tasks."""
    return Runs(_with(method, taskset, cap), ("tasks", "*", "final_accuracy"), scale=100.0)


def _claim(id_: str, statement, text: str, rule, measure, result: str, run: Run | None, data: tuple,
           unit: str = "% sooner", unsupported: str = "", digits: int = 1, probe: Probe | None = None,
           **fields) -> Claim:
    return Claim.stated(id_, statement, text, rule, measure, result, run, unsupported=unsupported, data=data,
                        unit=unit, digits=digits, probe=probe, **fields)


_ABOVE = Effect(None, "FedAST sooner (no number)")
_SEEDS = paper.SEEDS
_FIG5_SETS = tuple(f"{d}*{k}" for d in DATASETS for k in (2, 4, 6))


def _fig5(taskset: str) -> str:
    """The result of :func:`_fig5_run` (the quick result, :data:`FIG5`, holds several task sets)."""
    return f"fedast/fig5/{taskset}/fedast-fig5"


def _fig5_run(taskset: str) -> Run:
    return Run("fedast-fig5", (("tasksets", (taskset,)),), seeds=_SEEDS,
               out=f"results/{_fig5(taskset).rpartition('/')[0]}")


def _gain5(taskset: str) -> Saved:
    return Saved(finish("fedast-static", taskset), sync(taskset))


def _growth(d: str, two: str | None = None) -> Mean:
    """FedAST's gain with six ``d`` tasks less its gain with two, the two read from result ``two`` where given."""
    gain2 = _gain5(f"{d}*2")
    return Mean(Minus(_gain5(f"{d}*6"), Elsewhere(two, gain2) if two else gain2))


#: Fig. 5 with the first requests sent as the authors' code sends them (every task's first wave at once, regardless
#: of the cap: ``cap_first=False``), the same runs otherwise: the quick figure; each task set at the paper's targets
#: in :func:`_code`. Fig. 5's tasks share 384 requests (Sec. 4's budget), more than the cap of 300 busy clients, so
#: afl's default starts the last tasks short whatever the number of tasks.
CODE_DISPATCH = "fedast/fig5/code-dispatch/fedast-fig5"
_DISPATCH = ("the authors' code sends every task's first requests at once, regardless of the cap (cap_first=False); "
             "afl's default caps them, so the last tasks start short")
#: Fig. 7 as the authors' code sends its first requests: the four tasks' 4 x 96 meet the cap of 300, so afl's default
#: starts the last tasks short (a run of its own beside Fig. 7's, taking its Sync-ST runs: ``--reuse``)
_FIG7_DISPATCH = Run("fedast-fig7", (("cap_first", False),), seeds=_SEEDS, out="results/fedast/fig7/code-dispatch")


#: Fig. 2 with both of the authors' code's readings of FedAST's first requests: sent regardless of the cap and
#: trained from the model live when its event loop pops them (``cap_first=False``, ``first_wave="code"``); afl's
#: defaults are the paper's text, x^(0) and the cap. The quick figure's run until the paper's is committed there.
_FIG2_CODE = Run("fedast-fig2", (("first_wave", "code"), ("cap_first", False)), seeds=_SEEDS,
                 out="results/fedast/fig2/code")
#: FedAST's gain over the best Sync-ST in Fig. 2, the claim's measure and its probe's
_FIG2_GAIN = Mean(Saved(finish("fedast-static"), sync()))
_FIG2_WHY = ("the authors' code sends FedAST's first requests at once, regardless of the cap, and trains each from "
             "the model live when its event loop pops it (cap_first=False, first_wave=code); afl's default follows "
             "the paper: capped, from x^(0)")


def _fig7_probe(measure, rule) -> Probe:
    """Fig. 7 at the paper's setting with the code's dispatch of the first requests (:data:`_FIG7_DISPATCH`)."""
    return Probe(_FIG7_DISPATCH.result, measure, rule, _DISPATCH, run=_FIG7_DISPATCH)


def _code(taskset: str, measure, rule, quick_measure=None) -> Probe:
    """``taskset`` at the paper's targets with the code's dispatch of the first requests, where committed, else the
    quick figure's (:data:`CODE_DISPATCH`); its run beside the task set's (the plan lists it while the probe of an
    open claim is not run)."""
    run = Run("fedast-fig5", (("tasksets", (taskset,)), ("cap_first", False)), seeds=_SEEDS,
              out=f"results/fedast/fig5/{taskset}/code-dispatch")
    return Probe(run.result, measure, rule, _DISPATCH, earlier=((CODE_DISPATCH, quick_measure or measure),), run=run)


def _d6(level: str, number) -> Claim:
    offset = paper.TARGET_OFFSETS[level]
    result = D6 if offset == 0 else f"fedast/d6/{level.split()[0]}/fedast-d6"
    run = Run("fedast-d6", (("target_offset", offset),) if offset else (), seeds=_SEEDS,
              out="results/fedast/d6" + ("" if offset == 0 else f"/{level.split()[0]}"))
    statement = paper.D6
    rule = Effect(number.value, f"up to +{number.printed} % (the largest of the three levels)") if number else Effect(
        None, "dynamic sooner (no number)")
    return _claim(f"fedast-d6-{level.split()[0]}", statement, f"Dynamic allocation (Realloc) finishes all four tasks "
                  f"sooner than static, {level} (App. D.6)", rule, Mean(Saved(finish("fedast"),
                                                                              finish("fedast-static"))),
                  result, run, FOUR)


def _d5(level: str, number) -> Claim:
    offset = paper.TARGET_OFFSETS[level]
    name = level.split()[0]
    return _claim(f"fedast-d5-{name}", paper.D5, f"FedAST finishes all four tasks {number.printed} % sooner than the "
                  f"best-tuned Sync-ST, {level} (App. D.5)", Effect(number.value, f"+{number.printed} %"),
                  Mean(Saved(finish("fedast"), sync())), f"fedast/d5/{name}/fedast-fig7",
                  Run("fedast-fig7", (("target_offset", offset), ("methods", ("fedast", "sync-st"))), seeds=_SEEDS,
                      out=f"results/fedast/d5/{name}"), FOUR)


def _buffers(id_: str, statement, text: str, best: int, buffers: tuple, experiment: str, data: tuple) -> Claim:
    result = f"fedast/{experiment.removeprefix('fedast-')}/{experiment}"
    candidates = tuple((b, Runs((("method", "fedast-static"), ("buffer", b)), ("time_to_all_targets",),
                                budget=("config", "total_time"))) for b in buffers)
    return _claim(id_, statement, text, Range(best, best, f"buffer {best}"), Best(candidates, lowest=True), result,
                  Run(experiment, seeds=_SEEDS), data, unit="", digits=0)


_FIG7_MNIST, _FIG7_ALL, _FIG7_GAIN = paper.FIG7.numbers
CLAIMS = (
    _claim("fedast-abstract-gain", paper.ABSTRACT, "FedAST's largest gain over Sync-ST is 46.0 % (the twelve task "
           "sets of Fig. 5)", Effect(46.0, "up to +46.0 %"),
           Largest(tuple(Mean(_gain5(t)) for t in _FIG5_SETS), _FIG5_SETS), FIG5, Run("fedast-fig5", seeds=_SEEDS),
           ("mnist", "fashion-mnist", "cifar10", "shakespeare")),
    _claim("fedast-fig2-faster", paper.FIG2_FASTER, "FedAST (static) finishes the six identical CIFAR-10 tasks sooner "
           "than Sync-ST", _ABOVE, _FIG2_GAIN, FIG2, Run("fedast-fig2", seeds=_SEEDS), ("cifar10",),
           probe=Probe(_FIG2_CODE.result, _FIG2_GAIN, _ABOVE, _FIG2_WHY, run=_FIG2_CODE)),
    _claim("fedast-fig2-nomit-slowest", paper.FIG2_NOMIT, "Sync-ST without straggler mitigation takes longer than "
           "Sync-ST (first k)", Effect(None, "longer (no number)", null=1.0), GeoMean(Over(finish("sync-st-nomit"),
                                                                                          finish("sync-st"))),
           FIG2, Run("fedast-fig2", seeds=_SEEDS), ("cifar10",), unit="× Sync-ST's time", digits=2),
    _claim("fedast-fig2-bayes-similar", paper.FIG2_BAYES, "Sync-Bayes-ST finishes when Sync-ST does",
           Same(SAME_GAIN, "similar (no number)", why="within 10 % of Sync-ST's time: afl's margin"),
           Mean(Saved(finish("sync-bayes"), finish("sync-st"))), FIG2, Run("fedast-fig2", seeds=_SEEDS), ("cifar10",)),
    _claim("fedast-fig2-ucb-no-gain", paper.FIG2_UCB, "Sync-UCB-ST gains nothing over Sync-ST",
           Same(SAME_GAIN, "no gain (no number)", one_sided=True, why="a gain of at most 10 %: afl's margin"),
           Mean(Saved(finish("sync-ucb"), finish("sync-st"))), FIG2, Run("fedast-fig2", seeds=_SEEDS), ("cifar10",)),
    *[_claim(f"fedast-fig3-{d}-cap30", paper.FIG3_SMALL, f"With 30 active clients FedAST and FedAST-NoBuffer reach "
             f"the same final accuracy, three {DATASETS[d]} tasks", Same(SAME_POINTS, "comparable (no number)",
                                                                         why="within 1.5 points: afl's margin"),
             Mean(Minus(accuracy("fedast-static", f"{d}*3", 30), accuracy("fedast-nobuffer", f"{d}*3", 30))), FIG3,
             Run("fedast-fig3", seeds=_SEEDS), (d.removesuffix("-jpeg"),), unit="points")
      for d in ("cifar10-jpeg", "fashion-mnist")],
    *[_claim(f"fedast-fig3-{d}-cap1000", paper.FIG3_LARGE, f"With 1,000 active clients FedAST ends more accurate than "
             f"FedAST-NoBuffer, three {DATASETS[d]} tasks", Effect(None, "worse without a buffer (no number)"),
             Mean(Minus(accuracy("fedast-static", f"{d}*3", 1000), accuracy("fedast-nobuffer", f"{d}*3", 1000))),
             FIG3, Run("fedast-fig3", seeds=_SEEDS), (d.removesuffix("-jpeg"),), unit="points")
      for d in ("cifar10-jpeg", "fashion-mnist")],
    _claim("fedast-fig4-buffer", paper.FIG4, "One CIFAR-10 and one Fashion-MNIST task: FedAST ends more accurate than "
           "FedAST-NoBuffer", Effect(None, "higher (no number)"),
           Mean(Minus(accuracy("fedast-static"), accuracy("fedast-nobuffer"))), "fedast/fig4/fedast-fig3",
           Run("fedast-fig3", (("tasksets", ("cifar10-jpeg,fashion-mnist",)), ("caps", (300,))), seeds=_SEEDS,
               out="results/fedast/fig4"), ("cifar10", "fashion-mnist"), unit="points"),
    *[_claim(f"fedast-fig5-{t}", paper.FIG5, f"FedAST finishes {t.split('*')[1]} identical {DATASETS[t.split('*')[0]]} "
             "tasks sooner than Sync-ST (Fig. 5)", _ABOVE, Mean(_gain5(t)), _fig5(t), _fig5_run(t),
             (t.split("*")[0].removesuffix("-jpeg"),), probe=_code(t, Mean(_gain5(t)), _ABOVE),
             earlier=((FIG5, Mean(_gain5(t))),)) for t in _FIG5_SETS],
    *[_claim(f"fedast-fig5-grows-{d}", paper.FIG5_GROWS, f"FedAST's gain is larger with 6 identical {DATASETS[d]} "
             "tasks than with 2", Effect(None, "larger (no number)"), _growth(d, _fig5(f"{d}*2")), _fig5(f"{d}*6"),
             _fig5_run(f"{d}*6"), (d.removesuffix("-jpeg"),), unit="points of gain",
             # the probe: six tasks with the code's dispatch against two tasks' run (their dispatch is afl's)
             probe=_code(f"{d}*6", _growth(d, _fig5(f"{d}*2")), Effect(None, "larger"), _growth(d)),
             needs=(_fig5_run(f"{d}*2"),), earlier=((FIG5, _growth(d)),))
      for d in DATASETS],
    _claim("fedast-fig7-mnist", paper.FIG7, "FedAST's MNIST task reaches its target at 99 (Fig. 7)",
           Level(_FIG7_MNIST), Mean(finish("fedast", task="mnist")), FIG7, Run("fedast-fig7", seeds=_SEEDS), FOUR,
           unit="time units", digits=0, probe=_fig7_probe(Mean(finish("fedast", task="mnist")), Level(_FIG7_MNIST))),
    _claim("fedast-fig7-all", paper.FIG7, "FedAST's last task (CIFAR-10) reaches its target at 619 (Fig. 7)",
           Level(_FIG7_ALL), Mean(finish("fedast")), FIG7, Run("fedast-fig7", seeds=_SEEDS), FOUR, unit="time units",
           digits=0, probe=_fig7_probe(Mean(finish("fedast")), Level(_FIG7_ALL))),
    _claim("fedast-fig7-gain", paper.FIG7, "FedAST finishes all four tasks 40.1 % sooner than the best-tuned Sync-ST "
           "(Fig. 7)", Effect(_FIG7_GAIN.value, "+40.1 %"), Mean(Saved(finish("fedast"), sync())), FIG7,
           Run("fedast-fig7", seeds=_SEEDS), FOUR,
           probe=_fig7_probe(Mean(Saved(finish("fedast"), sync())), Effect(_FIG7_GAIN.value, "+40.1 %"))),
    *[_claim(f"fedast-d4-{k}-tasks", paper.D4, f"FedAST finishes {k} identical CIFAR-100 tasks (ResNet-18) "
             f"{n.printed} % sooner than Sync-ST (App. D.4)", Effect(n.value, f"+{n.printed} %"), None, "", None,
             ("cifar100",), unsupported=NO_RESNET18) for k, n in zip((2, 4, 6), paper.D4.numbers)],
    *[_d5(level, n) for level, n in zip(("higher targets", "lower targets"), paper.D5.numbers)],
    _claim("fedast-d5-difficulty", paper.D5_DIFFICULTY, "FedAST's gain over Sync-ST is larger with the higher targets "
           "than with the lower (App. D.5)", Effect(55.9 - 16.3, "+39.6 points (55.9 against 16.3 %)"),
           Mean(Minus(Saved(finish("fedast"), sync()), Elsewhere("fedast/d5/lower/fedast-fig7",
                                                                  Saved(finish("fedast"), sync())))),
           "fedast/d5/higher/fedast-fig7", Run("fedast-fig7", (("target_offset", 0.03), ("methods", ("fedast",
                                                                                                     "sync-st"))),
                                               seeds=_SEEDS, out="results/fedast/d5/higher"), FOUR,
           unit="points of gain"),
    *[_d6(level, paper.D6.numbers[0] if level == "higher targets" else None) for level in paper.TARGET_OFFSETS],
    _buffers("fedast-fig8-buffer", paper.FIG8, "With 175 requests a task, a buffer of 5 reaches both targets "
             "(Fashion-MNIST, CIFAR-10) soonest, seed by seed (afl reads “strikes a balance” so)", 5,
             (1, 3, 5, 10, 20), "fedast-fig8", ("fashion-mnist", "cifar10")),
    _buffers("fedast-fig9-buffer", paper.FIG9, "With 105 requests a task, a buffer of 3 reaches both targets (MNIST, "
             "CIFAR-10) soonest, seed by seed", 3, (1, 2, 3, 5, 10), "fedast-fig9", ("mnist", "cifar10")),
)

#: the paper's headline claims (the abstract's gain over synchronous training, Fig. 7's four tasks), first in the plan
#: of paper-scale runs (:mod:`afl.plan`)
HEADLINE = ("fedast-abstract-gain", "fedast-fig7-gain")

__all__ = ["CLAIMS", "HEADLINE", "finish", "sync", "accuracy"]
