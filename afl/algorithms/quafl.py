"""QuAFL (Zakerinia et al. 2022) as FAVAS describes it (paper 001, Sec. 3) and its public code runs it.

Every server step the server contacts s uniform clients. Each sends its current local model w^i (all the
progress since its last contact, at most K steps); the server averages
``w_t = (w_{t-1} + sum_{i in S_t} w^i) / (s + 1)`` and each contacted client mixes in the server model it
received, ``w^i <- w_{t-1} / (s + 1) + s / (s + 1) w^i``, and keeps training from there (it is not reset to
the server model: FAVAS identifies this as the source of client drift). As in the public code
(ShayanTalaei/QuAFL, ``trainer.py``) local steps use the learning rate ``lr (s + 1) / s``.
"""
from __future__ import annotations

from .clocked import ClockedLearner


class QuAFL(ClockedLearner):
    """QuAFL learner: full local models up, client-side mixing with the pre-update server model."""

    def __init__(self, fed, history, K, lr, s, track_variance=False):
        super().__init__(fed, history, K, lr * (s + 1) / s, s, track_variance)

    def upload(self, clients, local, start, steps):
        return local

    def restart(self, clients, local, w_old, w_new):
        return (w_old + self.s * local) / (self.s + 1)
