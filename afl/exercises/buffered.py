"""Exercises on buffered asynchronous aggregation and quantized messages (notebook 03: FedBuff, Nguyen et al.
2022; QAFeL, Ortega & Jafarkhani 2023).

* :data:`check_buffered_step`: ``buffered_step(w, deltas, staleness, server_lr)`` = ``w - server_lr (1/Z)
  sum_j Delta_j / sqrt(1 + tau_j)`` (FedBuff's server step, :mod:`afl.algorithms.fedbuff`);
* :data:`check_qsgd`: ``qsgd(x, bits, generator)``, the decoded QSGD message of QAFeL Example B.1 (L2 scale,
  ``s = 2^(bits-1) - 1`` signed levels, stochastic rounding), checked by its properties: every coordinate on one of
  the two levels around it, the sign kept, and unbiased over many draws;
* :data:`check_qsgd_bits`: ``qsgd_bits(d, bits, bucket)`` = ``bits d + 32 ceil(d / bucket)`` (one float32 scale per
  bucket, or per vector when ``bucket`` is None);
* :data:`check_hidden_state`: ``hidden_update(hidden, w_new, quantize)`` = ``hidden + quantize(w_new - hidden)``
  (QAFeL eqs. (3)-(4));
* :data:`check_fedasync_mix`: ``fedasync_mix(w, x_new, staleness, alpha, a)`` = ``(1 - alpha_t) w + alpha_t x_new``
  with ``alpha_t = alpha (staleness + 1)^(-a)`` (FedAsync's server, Xie et al. 2019, polynomial staleness; notebook
  01, section 4b; :mod:`afl.algorithms.fedasync`).
"""
from __future__ import annotations

import math

import torch

from ..algorithms.fedbuff import STALENESS, staleness_weight
from ..compress import QSGDQuantizer
from .checking import ERROR, WRONG, Exercise, Mistake, Unfinished, call_text, show


def _buffered_cases(rng):
    d = 3
    for staleness in ([0], [0, 0, 0], [4, 1, 9], [0, 7]):     # a buffer of one; no staleness; all stale
        yield {"w": torch.tensor(rng.normal(size=d)), "deltas": torch.tensor(rng.normal(size=(len(staleness), d))),
               "staleness": staleness, "server_lr": 1.0}
    for _ in range(8):
        Z, d = int(rng.integers(2, 6)), int(rng.integers(2, 6))
        yield {"w": torch.tensor(rng.normal(size=d)), "deltas": torch.tensor(rng.normal(size=(Z, d))),
               "staleness": [int(t) for t in rng.integers(0, 12, size=Z)],
               "server_lr": round(float(rng.uniform(0.3, 2)), 3)}


def _step(weight, reducer="mean", sign=-1):
    def step(w, deltas, staleness, server_lr):
        weights = torch.tensor([weight(t) for t in staleness], dtype=deltas.dtype)
        g = (weights[:, None] * deltas).sum(0)
        g = g / len(deltas) if reducer == "mean" else g / weights.sum() if reducer == "weights" else g
        return w + sign * server_lr * g
    return step


check_buffered_step = Exercise(
    name="check_buffered_step", signature="buffered_step(w, deltas, staleness, server_lr)",
    reference=_step(STALENESS["sqrt"]), cases=_buffered_cases,
    source="FedBuff's server step (staleness weight 1/√(1+τ), the buffer's mean)",
    idea="FedBuff's server step (the QAFeL paper's Sec. 2 and Fig. 3): each buffered update weighed by a function "
         "of its staleness, the buffer averaged, then a step of the server's rate against it.",
    hint="g = (1/Z) sum_j Delta_j / sqrt(1 + tau_j), then w - server_lr g (Delta_j = start - end points downhill).",
    mistakes=(
        Mistake(_step(lambda t: 1.0), "weigh each update by its staleness: s(tau) = 1 / sqrt(1 + tau)."),
        Mistake(_step(lambda t: 1 / (1 + t)), "the staleness weight is 1 / sqrt(1 + tau), not 1 / (1 + tau)."),
        Mistake(_step(STALENESS["sqrt"], "sum"), "average the buffer: divide the weighted sum by Z (QAFeL's code "
                                                 "sums it, which is reducer='sum', not this exercise)."),
        Mistake(_step(STALENESS["sqrt"], "weights"), "divide by Z, the buffer size, not by the sum of the weights: "
                                                     "stale updates must count less in total, not be renormalized."),
        Mistake(_step(STALENESS["sqrt"], sign=1), "Delta = start - end is the descent direction's opposite: "
                                                  "subtract it, w - server_lr g."),
    ))


def _bits_cases(rng):
    yield {"d": 1024, "bits": 4, "bucket": 256}                # the bucket divides d
    yield {"d": 1000, "bits": 3, "bucket": 256}                # a shorter last bucket
    yield {"d": 29282, "bits": 8, "bucket": None}              # one scale for the vector
    yield {"d": 7, "bits": 2, "bucket": 1}                     # a scale per coordinate
    yield {"d": 5, "bits": 8, "bucket": 64}                    # the bucket longer than d
    yield {"d": 1, "bits": 2, "bucket": None}
    for i in range(10):
        d = int(rng.integers(1, 5000))
        yield {"d": d, "bits": int(rng.integers(2, 9)),
               "bucket": None if i % 3 == 0 else int(rng.integers(1, min(d, 512) + 1))}


def _nscales(d, bucket, rounding=math.ceil):
    return 1 if bucket is None else rounding(d / bucket)


check_qsgd_bits = Exercise(
    name="check_qsgd_bits", signature="qsgd_bits(d, bits, bucket)", cases=_bits_cases,
    reference=lambda d, bits, bucket: QSGDQuantizer(bits, bucket).bits(d), source="QAFeL Example B.1's bit count",
    implementations=("afl.compress:QSGDQuantizer",),
    idea="count what the receiver needs to decode the message (QAFeL Example B.1): the codes of the d coordinates "
         "and the scales that turn codes back into numbers.",
    hint="bits per coordinate times d, plus one 32-bit float scale per bucket (ceil(d / bucket) buckets; one "
         "for the whole vector when bucket is None).",
    mistakes=(
        Mistake(lambda d, bits, bucket: bits * d, "the receiver also needs the scale: 32 bits per bucket."),
        Mistake(lambda d, bits, bucket: (bits + 1) * d + 32 * _nscales(d, bucket),
                "the sign is one of the `bits` bits already (signed levels -s..s, s = 2^(bits-1) - 1)."),
        Mistake(lambda d, bits, bucket: bits * d + 32,
                "with buckets every bucket has its own scale: 32 ceil(d / bucket) bits of scales."),
        Mistake(lambda d, bits, bucket: bits * d + 32 * _nscales(d, bucket, math.floor),
                "the last, shorter bucket has a scale too: ceil(d / bucket), not floor."),
        Mistake(lambda d, bits, bucket: bits * d + 32 * _nscales(d, bucket, lambda v: int(v) + 1),
                "when the bucket divides d there is no shorter last bucket: ceil(d / bucket) buckets, not "
                "d // bucket + 1."),
        Mistake(lambda d, bits, bucket: bits * d + 64 * _nscales(d, bucket), "each scale is one float32: 32 bits."),
    ))


def _hidden_cases(rng):
    same = torch.tensor(rng.normal(size=4))
    yield {"hidden": same, "w_new": same.clone(), "quantize": _grid(0.25)}     # nothing changed
    for _ in range(8):
        d, step = int(rng.integers(2, 7)), float(rng.choice([0.5, 0.25, 0.1]))
        quantize = _grid(step)
        yield {"hidden": torch.tensor(rng.normal(size=d)), "w_new": torch.tensor(rng.normal(size=d)),
               "quantize": quantize}


def _grid(step):
    def quantize(v):
        return torch.round(v / step) * step
    quantize.__name__ = f"round_to_multiples_of_{step}"
    return quantize


check_hidden_state = Exercise(
    name="check_hidden_state", signature="hidden_update(hidden, w_new, quantize)",
    reference=lambda hidden, w_new, quantize: hidden + quantize(w_new - hidden), cases=_hidden_cases,
    source="QAFeL eqs. (3)-(4)",
    idea="QAFeL eqs. (3)-(4): the server broadcasts a quantized *change*, and every client adds it to the hidden "
         "state it already holds.",
    hint="broadcast q = quantize(w_new - hidden), the change since the last hidden state, then hidden + q.",
    mistakes=(
        Mistake(lambda hidden, w_new, quantize: quantize(w_new),
                "quantizing the model itself is QAFeL's ablation (no hidden state): every broadcast's error "
                "stays. Quantize the difference w_new - hidden and add it."),
        Mistake(lambda hidden, w_new, quantize: w_new,
                "the broadcast is quantized: hidden + quantize(w_new - hidden), not w_new itself."),
        Mistake(lambda hidden, w_new, quantize: quantize(w_new - hidden),
                "that is the message q; the new hidden state is hidden + q."),
        Mistake(lambda hidden, w_new, quantize: hidden + quantize(hidden - w_new),
                "the difference goes the other way: w_new - hidden, so that the hidden state moves towards w_new."),
    ))


class QSGDExercise(Exercise):
    """QSGD is random: checked by what every draw must satisfy and by its mean over many draws."""

    DRAWS = 4000
    #: how far a code may sit from a level (levels are 1 apart): a float32 answer's rounding, ``levels`` x 1e-7
    LEVEL_TOLERANCE = 1e-4

    def problem(self, fn, case, rng):
        x, bits = case["x"], case["bits"]
        levels = 2 ** (bits - 1) - 1
        norm = float(x.norm())
        gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
        try:
            draws = torch.stack([torch.as_tensor(self.call(fn, case, generator=gen)).double()
                                 for _ in range(self.DRAWS)])
        except Unfinished:
            raise
        except Exception as err:
            return self.verdict(ERROR, f"Your function raised {type(err).__name__}: {err}\n"
                                       f"  on the case {call_text(self.function_name, case)}.")
        if draws.shape[1:] != x.shape:
            return self.wrong(case, draws[0], x, f"\n  (a vector of the same shape as x: shape {tuple(x.shape)})")
        r = x.abs() / norm * levels                     # where |x_i| sits among the levels 0..s
        code = draws.abs() / norm * levels
        low, high = torch.floor(r), torch.ceil(r)
        tol = self.LEVEL_TOLERANCE
        on_levels = ((code - low).abs() < tol) | ((code - high).abs() < tol)
        first = draws[0]
        if bool(((torch.sign(draws) != torch.sign(x)) & (draws != 0)).any()):
            return self.fail(case, first, "keep each coordinate's sign: the code is sign(x_i) xi_i.")
        if not bool(on_levels.all()):
            grid = code - torch.round(code)
            hint = ("levels are multiples of ||x||_2 / s with s = 2^(bits-1) - 1 (one bit is the sign): each "
                    "coordinate is one of the two levels around |x_i| s / ||x||_2."
                    if bool((grid.abs() > tol).any()) else
                    "round |x_i| s / ||x||_2 to one of its two neighbouring levels only.")
            return self.fail(case, first, hint)
        mean = draws.mean(0)
        p = r - low
        sd = norm / levels * torch.sqrt(p * (1 - p) / self.DRAWS)
        if bool(((mean - x).abs() > 6 * sd + tol * norm / levels).any()):   # float32 rounding of the levels
            hint = ("round up with probability equal to the fractional part of |x_i| s / ||x||_2 and down "
                    "otherwise; rounding to the nearest level is biased."
                    if bool((draws.std(0) < 1e-12).all()) else
                    "the probability of rounding up must be the fractional part of |x_i| s / ||x||_2, so that "
                    "E[Q(x)] = x.")
            return self.fail(case, mean, hint, f"\n  (the mean of {self.DRAWS} draws, which must be x: "
                                               f"{show(x)})")
        return None

    def fail(self, case, got, hint, extra=""):
        shown = {k: v for k, v in case.items() if k != "generator"}
        return self.verdict(WRONG, f"Not yet right: {call_text(self.function_name, shown)} returned "
                                     f"{show(got)}{extra}\n  Hint: {hint}")


def _qsgd_cases(rng):
    yield {"x": torch.tensor([0.0, 1.5, -2.0, 0.25]), "bits": 2}             # a zero coordinate, the fewest bits
    for bits in (2, 3, 4, 6):
        yield {"x": torch.tensor(rng.normal(size=int(rng.integers(3, 9)))), "bits": bits}


def _reference_qsgd(x, bits, generator=None):
    q = QSGDQuantizer(bits)
    return q.decode(q.encode(x, generator=generator))


check_qsgd = QSGDExercise(
    name="check_qsgd", signature="qsgd(x, bits, generator)", reference=_reference_qsgd, cases=_qsgd_cases,
    source="the properties of QSGD (QAFeL Example B.1: levels, sign, unbiasedness)",
    implementations=("afl.compress:QSGDQuantizer", "afl.compress:make_quantizer"))

__all__ = ["check_buffered_step", "check_qsgd", "check_qsgd_bits", "check_hidden_state"]


def _mix_cases(rng):
    d = 3
    w, x = torch.tensor(rng.normal(size=d)), torch.tensor(rng.normal(size=d))
    yield {"w": w, "x_new": x, "staleness": 0, "alpha": 0.6, "a": 0.5}       # fresh: no damping
    yield {"w": w, "x_new": x, "staleness": 0, "alpha": 1.0, "a": 0.5}       # fresh, alpha 1: the client's model
    yield {"w": w, "x_new": x, "staleness": 3, "alpha": 0.6, "a": 0.5}       # (3 + 1)^-0.5 = 1/2
    yield {"w": w, "x_new": w.clone(), "staleness": 5, "alpha": 0.9, "a": 1.0}   # the same model: nothing moves
    yield {"w": w, "x_new": x, "staleness": 40, "alpha": 0.9, "a": 2.0}      # very stale: almost ignored
    for _ in range(8):
        d = int(rng.integers(2, 6))
        yield {"w": torch.tensor(rng.normal(size=d)), "x_new": torch.tensor(rng.normal(size=d)),
               "staleness": int(rng.integers(0, 20)), "alpha": round(float(rng.uniform(0.1, 1.0)), 2),
               "a": round(float(rng.uniform(0.2, 2.0)), 2)}


def _mix(weight=lambda alpha, tau, a: alpha * staleness_weight(f"poly:{a}")(tau), swap=False, keep=False):
    def mix(w, x_new, staleness, alpha, a):
        alpha_t = weight(alpha, staleness, a)
        if keep:
            return w + alpha_t * x_new
        return (1 - alpha_t) * x_new + alpha_t * w if swap else (1 - alpha_t) * w + alpha_t * x_new
    return mix


check_fedasync_mix = Exercise(
    name="check_fedasync_mix", signature="fedasync_mix(w, x_new, staleness, alpha, a)", reference=_mix(),
    cases=_mix_cases, source="FedAsync's server update with polynomial staleness (Xie et al. 2019)",
    implementations=("afl.algorithms.fedbuff:staleness_weight",),
    idea="FedAsync (Xie et al. 2019, Algorithm 1 and Sec. 5.2): the server blends the arriving model into its own "
         "at once, with a mixing weight that shrinks the staler the arriving model is.",
    hint="alpha_t = alpha (staleness + 1)^(-a), then (1 - alpha_t) w + alpha_t x_new.",
    mistakes=(
        Mistake(_mix(lambda alpha, tau, a: alpha), "damp stale models: the weight is alpha (staleness + 1)^(-a), "
                                                  "not alpha alone."),
        Mistake(_mix(lambda alpha, tau, a: alpha * (tau + 1.0) ** a), "the exponent is -a: a staler model must weigh "
                                                                      "less, (staleness + 1)^(-a)."),
        Mistake(_mix(lambda alpha, tau, a: alpha * max(tau, 1) ** -a),
                "add one to the staleness before the power: a fresh model (staleness 0) gets the full alpha, "
                "and staleness 1 already halves it at a = 1."),
        Mistake(_mix(swap=True), "the weight alpha_t goes to the arriving model x_new, 1 - alpha_t to the server's."),
        Mistake(_mix(keep=True), "a weighted average, not a sum: the server's model keeps 1 - alpha_t of itself."),
    ))
