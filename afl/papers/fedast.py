"""FedAST (Askin et al., ``shared/papers/004_*``): the numbers and orderings of the abstract, Sec. 5.3 (Figs 2-5
and 7), App. C.5 (Figs 8 and 9) and App. D.4-D.6. "In all experiments, we conduct three Monte Carlo runs with
different random seeds and report the average results" (Sec. 5.1). Times are simulated time units; a gain is
(T_baseline − T_FedAST) / T_baseline × 100 % (Sec. 5.3)."""
from ..claims.paper import Statement, stated

FILE = "004_f41f77557f95762b.txt"
SEEDS = 3


def _n(source: str, printed: str, unit: str = "%", row: str = "", column: str = ""):
    return stated("FedAST", source, printed, unit, SEEDS, row, column)


ABSTRACT = Statement("FedAST", "Abstract", "achieving up to 46.0% reduction in time to train multiple tasks to "
                     "completion", (_n("Abstract", "46.0"),))
FIG2_FASTER = Statement("FedAST", "Fig. 2", "FedAST trains faster than synchronous methods")
FIG2_NOMIT = Statement("FedAST", "Fig. 2", "The synchronous method without straggler mitigation is by far the slowest")
FIG2_BAYES = Statement("FedAST", "Sec. 5.3 (Fig. 2)", "Sync-Bayes-ST, has similar performance to Sync-ST")
FIG2_UCB = Statement("FedAST", "Sec. 5.3 (Fig. 2)", "we do not observe any performance gains from using Sync-UCB-ST "
                     "over Sync-ST")
FIG3_SMALL = Statement("FedAST", "Sec. 5.3 (Fig. 3)", "active client ratios, FedAST and FedAST-NoBuffer have "
                       "comparable performance")
FIG3_LARGE = Statement("FedAST", "Sec. 5.3 (Fig. 3)", "resulting in significantly worse performance of the fully "
                       "asynchronous FedAST-NoBuffer algorithm")
FIG4 = Statement("FedAST", "Fig. 4", "FedAST achieves higher and more stable accuracy levels")
FIG5 = Statement("FedAST", "Fig. 5", "FedAST requires consistently lower wall-clock time for training compared to "
                 "Sync-ST")
FIG5_GROWS = Statement("FedAST", "Sec. 5.3 (Fig. 5)", "the gain increases with the number of simultaneously trained "
                       "tasks")
FIG7 = Statement("FedAST", "Sec. 5.3 (Fig. 7)", "FedAST provides a 40.1% time gain over Sync-ST", (
    _n("Sec. 5.3 (Fig. 7)", "99", "time units", "FedAST", "MNIST"),
    _n("Sec. 5.3 (Fig. 7)", "619", "time units", "FedAST", "all four tasks"),
    _n("Sec. 5.3 (Fig. 7)", "40.1", "%", "gain over Sync-ST", "all four tasks")))
D4 = Statement("FedAST", "App. D.4 (Fig. 16)", "time gains of 22.0%, 40.7%, and 56.3% for 2, 4, and 6 "
               "simultaneously trained models", tuple(_n("App. D.4 (Fig. 16)", g, "%", "gain over Sync-ST",
                                                         f"{k} CIFAR-100 tasks") for g, k in (("22.0", 2),
                                                                                            ("40.7", 4),
                                                                                            ("56.3", 6))))
D5 = Statement("FedAST", "App. D.5", "reduces the overall training time by 55.9% and 16.3%, respectively for higher "
               "and lower target accuracy levels", (_n("App. D.5", "55.9", "%", "gain over Sync-ST", "higher targets"),
                                                    _n("App. D.5", "16.3", "%", "gain over Sync-ST", "lower targets")))
D5_DIFFICULTY = Statement("FedAST", "App. D.5", "the advantage of FedAST over Sync-ST increases with the difficulty")
D6 = Statement("FedAST", "Sec. 5.3 (App. D.6)", "Dynamic client allocation consistently has time gain up to 11.9% "
               "compared to the static version", (_n("Sec. 5.3 (App. D.6)", "11.9", "%", "gain over static"),))
FIG8 = Statement("FedAST", "App. C.5 (Fig. 8)", "buffer size of 5 strikes a balance between high final test accuracy "
                 "and fast training")
FIG9 = Statement("FedAST", "App. C.5 (Fig. 9)", "we observe that a buffer size of 3 performs the best for both tasks")
#: Table 3 (App. D.5): each task's target accuracy, lower / main text / higher (the quick settings shift them too)
TARGET_OFFSETS = {"lower targets": -0.10, "main targets": 0.0, "higher targets": 0.03}

__all__ = ["FILE", "SEEDS", "ABSTRACT", "FIG2_FASTER", "FIG2_NOMIT", "FIG2_BAYES", "FIG2_UCB", "FIG3_SMALL",
           "FIG3_LARGE", "FIG4", "FIG5", "FIG5_GROWS", "FIG7", "D4", "D5", "D5_DIFFICULTY", "D6", "FIG8", "FIG9",
           "TARGET_OFFSETS"]
