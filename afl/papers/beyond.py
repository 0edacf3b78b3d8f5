"""The asynchronous baselines beyond the four papers (FedAsync, CA2FL, FADAS): the claims their abstracts state,
quoted as published. Their full texts are not among afl's stored papers, so these quotes are checked against the
abstracts recorded here (:data:`ABSTRACTS`, copied from the papers' public pages), and none gives a number: each is
an ordering, tested by :mod:`afl.scoreboard.beyond` on afl's own setting (FAVAS's non-IID MNIST stragglers)."""
from ..claims import Statement

#: each paper's abstract sentence that states its empirical claim, as published, and where
ABSTRACTS = {
    "FedAsync": ("Xie, Koyejo & Gupta 2019, Asynchronous Federated Optimization, arXiv 1903.03934, abstract",
                 "Empirical results show that the proposed algorithm converges quickly and tolerates staleness in "
                 "various applications."),
    "CA2FL": ("Wang, Cao, Wu, Chen & Chen, ICLR 2024, Tackling the Data Heterogeneity in Asynchronous Federated "
              "Learning with Cached Update Calibration, abstract",
              "Extensive experiments on several vision and language tasks demonstrate our superior performances "
              "compared to other asynchronous federated learning baselines."),
    "FADAS": ("Wang, Wang, Lu & Chen, ICML 2024, FADAS: Towards Federated Adaptive Asynchronous Optimization, "
              "arXiv 2407.18365, abstract",
              "empirical results demonstrate the superior performance of FADAS over other asynchronous FL baselines."),
}

FEDASYNC = Statement("FedAsync", ABSTRACTS["FedAsync"][0], "converges quickly and tolerates staleness")
CA2FL = Statement("CA2FL", ABSTRACTS["CA2FL"][0],
                  "superior performances compared to other asynchronous federated learning baselines")
FADAS = Statement("FADAS", ABSTRACTS["FADAS"][0], "superior performance of FADAS over other asynchronous FL baselines")
#: the datasets of each paper's experiments (FedAsync: CIFAR-10 and WikiText-2; CA2FL and FADAS: CIFAR-10 and
#: others): a result on MNIST is on other data, so never more than consistent at reduced scale
DATA = {"FedAsync": ("cifar10",), "CA2FL": ("cifar10",), "FADAS": ("cifar10",)}

__all__ = ["ABSTRACTS", "FEDASYNC", "CA2FL", "FADAS", "DATA"]
