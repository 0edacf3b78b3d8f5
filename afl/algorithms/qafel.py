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
the server's step receives wrong. The server channel's are summed over broadcasts: ``broadcast_error``,
``|q^t - v|^2 / |v|^2`` for what it quantizes (``v = x^{t+1} - x_hat^t``, or ``x^{t+1}`` in the ablation), and
``hidden_gap``, ``|x^{t+1} - x_hat^{t+1}|^2`` over the squared norm of the server's step ``s = x^{t+1} - x^t``: how
far from the server model the clients start, in server steps (squared); and ``hidden_lag``,
``(x^{t+1} - x_hat^{t+1}) . s / |s|^2``, the part of that gap along the last step, in steps (a last step that
never reached the clients puts 1 in it; a gap orthogonal to the step, 0). Differences of a curve's counters give
their means over a window (:func:`afl.repro.qafel.channel_errors`). Quantizers are specs of
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
        for name in ("broadcasts", "upload_error", "buffer_error", "broadcast_error", "hidden_gap", "hidden_lag"):
            history.counters.setdefault(name, 0)

    def message_bytes(self) -> int:
        return self.q_client.nbytes(self.w.numel())

    def start_model(self):
        return self.hidden

    def received(self, updates):
        decoded = self.q_client.roundtrip(updates).to(updates.dtype)
        error, c = decoded - updates, self.history.counters
        c["upload_error"] += float((error.square().sum(1) / updates.square().sum(1).clamp_min(1e-30)).sum())
        c["buffer_error"] += _relative(error.sum(0), updates.sum(0))
        return decoded

    def after_step(self) -> None:
        q, c = self.q_server, self.history.counters
        sent = self.w - self.hidden if self.hidden_state else self.w
        decoded = q.roundtrip(sent).to(self.w.dtype)
        self.hidden = self.hidden + decoded if self.hidden_state else decoded
        c["broadcasts"] += 1
        c["bytes_down"] += q.nbytes(self.w.numel())
        c["broadcast_error"] += _relative(decoded - sent, sent)
        gap, step = self.w - self.hidden, -self.server_lr * self.velocity         # x - x_hat; x^{t+1} - x^t
        norm = step.square().sum().clamp_min(1e-30)
        c["hidden_gap"] += float(gap.square().sum() / norm)
        c["hidden_lag"] += float((gap * step).sum() / norm)


def _relative(error, of) -> float:
    """``|error|^2 / |of|^2`` (0 where ``of`` is 0)."""
    return float(error.square().sum() / of.square().sum().clamp_min(1e-30))


register("qafel", QAFeLSettings, QAFeL, buffered,
         "QAFeL (Ortega & Jafarkhani): FedBuff with quantized uploads and a quantized hidden-state broadcast")
