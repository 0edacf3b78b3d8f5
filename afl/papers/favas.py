"""FAVAS (Leconte et al., ``shared/papers/001_*``): Table 2 and the orderings Sec. 5 states."""
from ..claims.paper import Statement, Table

FILE = "001_2034d7f5f9d511f3.txt"
#: "Table 2 gives the average performance of 10 random experiments" (its figures' runs are not stated)
SEEDS = 10
IID, TWO_THIRDS, ONE_NINTH = "IID split", "non-IID split (2/3 fast clients)", "non-IID split (1/9 fast clients)"

#: Table 2: final test accuracy (%), mean ± std over 10 runs, MNIST, n = 100, s = 20
TABLE2 = Table("FAVAS", "Table 2", (IID, TWO_THIRDS, ONE_NINTH), {
    "FedAvg": "93.4 ± 0.3 | 38.7 ± 7.7 | 44.8 ± 6.9",
    "QuAFL": "92.3 ± 0.9 | 40.7 ± 6.7 | 45.5 ± 4.0",
    "FedBuff": "96.0 ± 0.1 | 85.1 ± 3.2 | 67.3 ± 5.5",
    "FAVAS": "95.1 ± 0.1 | 88.9 ± 0.9 | 87.3 ± 2.3",
}, seeds=10, unit="%")

ASYNC_ADVANTAGE = Statement("FAVAS", "Sec. 5 (Fig. 1, Table 2)", "FAVAS and other asynchronous methods can offer a "
                            "significant advantage over FedAvg when time is taken into account")
QUAFL_NONIID = Statement("FAVAS", "Sec. 5 (Fig. 1, Table 2)", "QuAFL does not appear to be adapted to the non-IID "
                         "environment")
FEDBUFF_SLOW = Statement("FAVAS", "Sec. 5 (Fig. 2, Table 2)", "FedBuff is sensitive to the fraction of slow clients "
                         "and may get stuck if the majority of clients are classified as slow")
CIFAR10 = Statement("FAVAS", "Sec. 5 (Fig. 3a)", "FedBuff and FAVAS both perform better than other approaches")
TINYIMAGENET = Statement("FAVAS", "Sec. 5 (Fig. 3b)", "FAVAS scales much better on large image classification tasks "
                         "than any of the methods we considered")

__all__ = ["FILE", "SEEDS", "TABLE2", "IID", "TWO_THIRDS", "ONE_NINTH", "ASYNC_ADVANTAGE", "QUAFL_NONIID",
           "FEDBUFF_SLOW", "CIFAR10", "TINYIMAGENET"]
