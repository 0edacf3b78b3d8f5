"""QAFeL (Ortega & Jafarkhani 2023, Algorithms 1-3): FedBuff with quantized uploads and a quantized broadcast
of the server model's change into a hidden state that server and clients share.

A client starts from the hidden state ``x_hat`` (not the server model), trains, and uploads ``Q_c(Delta)``
(``Delta = y_0 - y_P``, decoded by the server). The server steps as FedBuff does (:mod:`afl.algorithms.fedbuff`:
staleness weights, mean or sum, server lr and momentum), then broadcasts

    q^t = Q_s(x^{t+1} - x_hat^t),        x_hat^{t+1} = x_hat^t + q^t        (eqs. (3)-(4))

which server and clients apply identically, so the hidden state follows the server model and the
quantization error of one broadcast is corrected by the next instead of accumulating.

``hidden_state=False`` is the ablation the paper argues against: the server broadcasts ``Q_s(x^{t+1})`` itself
and clients start from that decoded model, so every broadcast's error stays in the clients' start.

Costs: each upload is one ``Q_c`` message, each server step one ``Q_s`` broadcast (``bytes_down`` counts it
once, as the paper's "MB broadcasted"); ``broadcasts`` counts them. The client channel's relative errors are
summed into two counters: ``upload_error``, each upload's ``|Q_c(Delta) - Delta|^2 / |Delta|^2``, and
``buffer_error``, each buffer's ``|sum_j (Q_c(Delta_j) - Delta_j)|^2 / |sum_j Delta_j|^2`` (unweighted): what
the server's step receives wrong. Differences of a curve's counters give their means over a window
(:func:`afl.repro.qafel.channel_errors`). Quantizers are specs of
:func:`afl.compress.make_quantizer` (per-tensor ones get the model's shapes); client and server draw their
randomness from generators seeded from the run's seed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..compress import Quantizer, make_quantizer
from .fedbuff import FedBuff, FedBuffSettings
from .registry import buffered, register


@dataclass(frozen=True)
class QAFeLSettings(FedBuffSettings):
    """QAFeL: client and server quantizers (the paper's default: 4-bit qsgd both ways) and the hidden state."""

    client_quantizer: Quantizer | str = "qsgd:4"
    server_quantizer: Quantizer | str = "qsgd:4"
    hidden_state: bool = True

    def __post_init__(self):
        super().__post_init__()
        for spec in (self.client_quantizer, self.server_quantizer):
            make_quantizer(spec, shapes=[(1, 1)])      # a bad spec fails here; the model's shapes come later


class QAFeL(FedBuff):
    """QAFeL learner: clients start from the hidden state; quantized uploads; quantized broadcasts."""

    def __init__(self, fed, history, cfg: QAFeLSettings):
        super().__init__(fed, history, cfg)
        shapes = fed.engine.model.shapes
        self.q_client = make_quantizer(cfg.client_quantizer, seed=2 * fed.seed, shapes=shapes)
        self.q_server = make_quantizer(cfg.server_quantizer, seed=2 * fed.seed + 1, shapes=shapes)
        self.hidden_state = cfg.hidden_state
        self.hidden = self.w.clone()
        for name in ("broadcasts", "upload_error", "buffer_error"):
            history.counters.setdefault(name, 0)

    def message_bytes(self) -> int:
        return self.q_client.nbytes(self.w.numel())

    def start_model(self):
        return self.hidden

    def received(self, updates):
        decoded = self.q_client.roundtrip(updates).to(updates.dtype)
        error, c = decoded - updates, self.history.counters
        c["upload_error"] += float((error.square().sum(1) / updates.square().sum(1).clamp_min(1e-30)).sum())
        c["buffer_error"] += float(error.sum(0).square().sum() / updates.sum(0).square().sum().clamp_min(1e-30))
        return decoded

    def after_step(self) -> None:
        q, c = self.q_server, self.history.counters
        if self.hidden_state:
            self.hidden = self.hidden + q.roundtrip(self.w - self.hidden).to(self.w.dtype)
        else:
            self.hidden = q.roundtrip(self.w).to(self.w.dtype)
        c["broadcasts"] += 1
        c["bytes_down"] += q.nbytes(self.w.numel())


register("qafel", QAFeLSettings, QAFeL, buffered,
         "QAFeL (Ortega & Jafarkhani): FedBuff with quantized uploads and a quantized hidden-state broadcast")
