"""QuAFL (Zakerinia et al. 2022) as FAVAS (Leconte et al. 2023, Sec. 3) describes it and its code runs it.

Every server step the server contacts s uniform clients. Each sends its current local model w^i (all the
progress since its last contact, at most K steps); the server averages
``w_t = (w_{t-1} + sum_{i in S_t} w^i) / (s + 1)`` and each contacted client mixes in the server model it
received, ``w^i <- w_{t-1} / (s + 1) + s / (s + 1) w^i``, and keeps training from there (it is not reset to
the server model: FAVAS identifies this as the source of client drift). As in the public code
(ShayanTalaei/QuAFL, ``trainer.py``) local steps use the learning rate ``lr (s + 1) / s``.

Quantized exchange (optional ``quantizer``, a :class:`afl.compress.Quantizer` or spec), as the public code does
it (``client.py`` / ``server.py``): each contacted client uploads ``Q(w^i)``, which the server decodes with its
own current model ``w_{t-1}`` as key (the lattice quantizer's decoder needs one; unbiased quantizers ignore
it); the server broadcasts one ``Q(w_{t-1})``, which each contacted client decodes with its own local model as
key. The server average and the client mixing use the decoded values; the server's own ``w_{t-1}`` and the
client's own ``w^i`` enter at full precision. Bytes: each server step counts s uploads and s downloads of
``quantizer.nbytes(d) = ceil(quantizer.bits(d) / 8)`` bytes each (every message padded to whole bytes);
without a quantizer, ``Federation.model_bytes`` each. With a :class:`~afl.compress.LatticeQuantizer` the
counters also hold ``lattice_overflows``: the coordinates, over all messages, that wrapped around because
sender and key were more than the quantizer's ``radius`` apart (a diagnostic the real protocol could not
compute). ``scale_interval_by_bits``: run the server clock at :func:`afl.compress.quantized_interval`
``(server_interval, quantizer) = server_interval * bits / 32``, the QuAFL notebooks' time model (there the
whole interval is interaction time; for a waiting part, compute the interval with ``quantized_interval(sit, q,
waiting_time=swt)`` and pass it as ``server_interval``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..compress import LatticeQuantizer, Quantizer, make_quantizer, quantized_interval
from ..errors import check
from .clocked import ClockedLearner, ClockedSettings, mix_with_server
from .registry import register, server_clock


@dataclass(frozen=True)
class QuAFLSettings(ClockedSettings):
    """QuAFL: an optional ``quantizer`` for both directions, and whether it shortens the server interval."""

    quantizer: Quantizer | str | None = None
    scale_interval_by_bits: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.quantizer is not None:
            make_quantizer(self.quantizer)                     # a bad spec fails here, naming the parameter
        check(self.quantizer is not None or not self.scale_interval_by_bits, "scale_interval_by_bits",
              self.scale_interval_by_bits, "False without a quantizer")

    def contact_interval(self) -> float:
        if self.quantizer is None or not self.scale_interval_by_bits:
            return self.server_interval
        return quantized_interval(self.server_interval, make_quantizer(self.quantizer))


class QuAFL(ClockedLearner):
    """QuAFL learner: full local models up, client-side mixing with the pre-update server model."""

    def __init__(self, fed, history, cfg: QuAFLSettings):
        super().__init__(fed, history, cfg, lr=cfg.lr * (cfg.s + 1) / cfg.s)
        self.quantizer = None if cfg.quantizer is None else make_quantizer(cfg.quantizer, seed=fed.seed)
        if isinstance(self.quantizer, LatticeQuantizer):
            history.counters.setdefault("lattice_overflows", 0)

    def upload(self, clients, local, start, steps):
        if self.quantizer is None:
            return local
        return self._transmit(local, key=self.w)            # the server's w_{t-1} decodes the uploads

    def restart(self, clients, local, w_old, w_new):
        if self.quantizer is None:
            return mix_with_server(w_old, local, self.s)
        received = self._transmit(w_old, key=local)          # one broadcast, decoded by each client's own model
        return mix_with_server(received, local, self.s)

    def _transmit(self, x, key):
        """What the receiver decodes of ``x`` with its ``key``; the lattice's wrap-arounds are counted."""
        if isinstance(self.quantizer, LatticeQuantizer):
            received, overflows = self.quantizer.roundtrip_counting_overflows(x, key)
            self.history.counters["lattice_overflows"] += overflows
            return received
        return self.quantizer.roundtrip(x, key)

    def message_bytes(self) -> int:
        if self.quantizer is None:
            return super().message_bytes()
        return self.quantizer.nbytes(self.w.numel())


register("quafl", QuAFLSettings, QuAFL, server_clock,
         "QuAFL (Zakerinia et al.): server clock, local models up, client-side mixing, optional quantization")
