"""QAFeL's client channel over training: each upload tensor's range against the channel's scale floor (issue 52).

FLSim's channel (``afl.compress.ScalarChannel``, QAFeL's "n-bit qsgd") scales every tensor with more than one
dimension by ``range / (2^bits - 1)``, floored at float32's epsilon (PyTorch's ``MinMaxObserver``). Where a tensor's
range is below ``(2^bits - 1) eps`` the floor holds and more bits no longer lower its error: below 255 eps = 3.0e-5
at 8 bits, below 15 eps = 1.8e-6 at 4 bits. This runs QAFeL on the paper's protocol (the offline substitute) and,
at every server step, puts each buffered upload through the 8-, 4- and 2-bit channels: per window of uploads, the
quantized tensors' ranges (quartiles), the share of (upload, tensor) pairs whose scale the floor holds at 8 and at 4
bits, and the uploads' mean relative error ``|Q(x) - x|^2 / |x|^2`` at 8, 4 and 2 bits. Writes
``OUT/channel-ranges.json`` and ``.md``.

    python tools/qafel_channel_ranges.py --out results/qafel/channel-ranges            # 2,500 users, 3,000 uploads
    python tools/qafel_channel_ranges.py --quick --out /tmp/ranges                        # 300 users (CI-sized)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from afl.algorithms.qafel import QAFeL  # noqa: E402
from afl.compress import make_quantizer  # noqa: E402
from afl.repro import qafel as qr  # noqa: E402
from afl.repro.runner import afl_commit, machine, write_probe  # noqa: E402

import qafel_probe  # noqa: E402

BITS = (8, 4, 2)
EPS = float(torch.finfo(torch.float32).eps)


def probe_class(records: list):
    """A QAFeL learner that, before decoding each buffer, puts every upload through the channels of :data:`BITS`
    and records its tensors' ranges and relative errors (what it sends is unchanged)."""

    class ChannelProbe(QAFeL):
        def received(self, updates):
            shapes = self.fed.engine.model.shapes
            channels = {b: make_quantizer(f"scalar:{b}", shapes=shapes) for b in BITS}
            sizes = [int(np.prod(s)) for s in shapes]
            quantized = [len(s) > 1 for s in shapes]
            x = updates.to(torch.float32)
            for row in x:
                ranges = [float(t.max().clamp(min=0) - t.min().clamp(max=0))
                          for t, q in zip(torch.split(row, sizes), quantized) if q]
                errors = {b: float((c.roundtrip(row[None])[0] - row).square().sum() / row.square().sum().clamp_min(
                    1e-30)) for b, c in channels.items()}
                records.append({"upload": len(records) + 1, "ranges": ranges, "errors": errors})
            return super().received(updates)
    return ChannelProbe


def summary(records: list, window: int) -> list[dict]:
    """Per window of ``window`` uploads: range quartiles, the floor's share at 8 and 4 bits, mean errors."""
    out = []
    for lo in range(0, len(records), window):
        chunk = records[lo:lo + window]
        ranges = np.array([r for rec in chunk for r in rec["ranges"]])
        out.append({"uploads": f"{lo + 1}-{lo + len(chunk)}",
                    "range_quartiles": [float(q) for q in np.quantile(ranges, [0.25, 0.5, 0.75])],
                    "floored_8_bits": float(np.mean(ranges < 255 * EPS)),
                    "floored_4_bits": float(np.mean(ranges < 15 * EPS)),
                    "error": {b: float(np.mean([rec["errors"][b] for rec in chunk])) for b in BITS}})
    return out


def markdown(result: dict) -> str:
    lines = ["# QAFeL's client channel over training: tensor ranges against the scale floor", "",
             f"Command: `{result['command']}`", "", f"Machine: {result['machine']}", "",
             f"Setting: {result['setting']}. Each upload of the run (QAFeL 8/8) put through FLSim's channel at 8, 4 "
             f"and 2 bits (the run itself sends 8). The floor: a tensor's scale stays at float32's eps "
             f"({EPS:.3g}) wherever its range is below (2^bits - 1) eps: {255 * EPS:.2g} at 8 bits, {15 * EPS:.2g} "
             "at 4.", "",
             "| uploads | range of a tensor: 25 / 50 / 75 % | floor holds at 8 bits | at 4 bits | "
             "error 8 bits | 4 bits | 2 bits |", "|---|---|---|---|---|---|---|"]
    for w in result["windows"]:
        q = " / ".join(f"{v:.2g}" for v in w["range_quartiles"])
        e = w["error"]
        lines.append(f"| {w['uploads']} | {q} | {100 * w['floored_8_bits']:.0f} % | {100 * w['floored_4_bits']:.0f} % "
                     f"| {e[8]:.3g} | {e[4]:.3g} | {e[2]:.3g} |")
    return "\n".join(lines) + "\n"


def arguments():
    """The tool's command line (:func:`qafel_probe.parser` and its own options)."""
    return qafel_probe.parser(__doc__, uploads=3000, window=250, seed=0)


def main() -> int:
    p = arguments()
    args = p.parse_args()
    overrides = dict(max_uploads=args.uploads, target=1.0, methods=("qafel_c8_s8",))
    cfg = qr.setting("qafel-table1", quick=args.quick, **overrides)
    records: list = []
    qr.compute_run(cfg, "qafel_c8_s8", None, args.seed, learner_class=probe_class(records))
    setting = (f"{'the quick setting' if args.quick else 'the paper protocol'} on the offline substitute "
               f"({cfg.users} users, lr {cfg.lr:g}, dropout {cfg.dropout:g}), seed {args.seed}, {len(records)} uploads")
    result = {"command": qafel_probe.command("qafel_channel_ranges.py", p, args), "machine": machine("cpu"),
              "afl_commit": afl_commit(), "setting": setting, "eps": EPS, "windows": summary(records, args.window)}
    write_probe(result, args.out, "channel-ranges", markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
