"""Where a grouped convolution's weight gradient should come from on a GPU: a probe prepared for the next GPU job.

An H100 profile of cnn-cifar under vmap (100 clients x 8 steps, bf16) spent 269 of its 525 ms of kernels in one
CUTLASS weight-gradient kernel launched once per client (``results/measurements/h100-2026-11-26/``). Computing that
gradient as unfold + einsum inside a vmapped ``autograd.Function`` was tried and was 4.7x *slower* end to end
(651 against 3,048 client-steps/s at 400 clients); why is not known. This times, for one of cnn-cifar's convolutions
(``--layer``: ``conv2``, 64 -> 64 channels, 5x5, 14x14 inputs; ``conv1``, 3 -> 64 channels, 5x5, 32x32 inputs; batch
64) and k clients, each way of computing the k weight gradients alone:

* ``cudnn-grouped``: ``aten.convolution_backward`` of the grouped convolution, weight gradient only (what vmap does);
* ``unfold-bmm`` in float32, TF32 and bf16: one unfold of all clients' inputs and one batched matmul;
* ``vmap-function``: the tried ``autograd.Function`` (unfold + einsum, vmap's generated rule);
* ``vmap-view``: the same with the patches as a strided view instead of ``F.unfold``;
* ``view-bmm`` in bf16: the patches as a strided view, one copy, one batched matmul (what ``afl.conv`` does);
* ``view-bmm split-K`` in bf16: the same with the sum over samples and positions cut into 8 batched products, then
  added (M x N is only 64 x 75 for ``conv1``: one product per client leaves most of a GPU idle);
* ``fprop-swapped``: the gradient as a *forward* grouped convolution with the roles swapped -- the input's channels
  as its batch, samples as channels, the output gradient as filters: ``dW[o, c] = conv(X[:, c], dY[:, o])``.

The H200 profile (``results/measurements/h200-2026-11-27/``) put half of a step in ``conv1``'s kernel, 330 us a
client, against ``conv2``'s 33 us: ``--layer conv1`` is the one to time first. Prints a table (milliseconds per
call, TFLOP/s). ``python tools/conv_wgrad_probe.py [--device cpu] [--layer conv1]``.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch.func import vmap

#: (input channels, output channels, kernel, input size) of cnn-cifar's convolutions; batch 64
LAYERS = {"conv1": (3, 64, 5, 32), "conv2": (64, 64, 5, 14)}
B = 64


class MatmulWeightGradient(torch.autograd.Function):
    """The tried function: unfold (``F.unfold``, im2col) + einsum; vmap's generated rule batches it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, w):
        return F.conv2d(x, w)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        cols = F.unfold(x, w.shape[2:])
        return None, torch.einsum("bol,bkl->ok", g.flatten(2), cols).reshape(w.shape)


class ViewWeightGradient(MatmulWeightGradient):
    """The same with the patches as a strided view (``Tensor.unfold``): PyTorch's CUDA im2col launches one kernel per
    sample (a loop over the batch in ``Im2Col.cu``), 25,600 launches for 400 clients of 64 images, which would
    explain why the tried function ran at the same rate per client whatever the number of clients."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        patches = x.unfold(2, w.shape[2], 1).unfold(3, w.shape[3], 1)           # (B, C, Ho, Wo, kh, kw), a view
        return None, torch.einsum("boyx,bcyxij->ocij", g, patches)


def timed(fn, device, repeats=10) -> float:
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def probe(k: int, device: torch.device, layer: str = "conv2") -> list[dict]:
    CIN, COUT, KS, HW = LAYERS[layer]
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(k, B, CIN, HW, HW, generator=g).to(device)
    w = (0.05 * torch.randn(k, COUT, CIN, KS, KS, generator=g)).to(device)
    out = HW - KS + 1
    gy = torch.randn(k, B, COUT, out, out, generator=g).to(device)
    flops = 2 * k * B * COUT * CIN * KS * KS * out * out
    xg = x.transpose(0, 1).reshape(B, k * CIN, HW, HW)
    gyg = gy.transpose(0, 1).reshape(B, k * COUT, out, out)
    wg = w.reshape(k * COUT, CIN, KS, KS)

    def cudnn_grouped():
        return torch.ops.aten.convolution_backward(gyg, xg, wg, None, [1, 1], [0, 0], [1, 1], False, [0, 0], k,
                                                   [False, True, False])[1]

    def unfold_bmm(dtype):
        def run():
            cols = F.unfold(x.reshape(k * B, CIN, HW, HW).to(dtype), KS)                # (kB, C K K, L)
            cols = cols.view(k, B, -1, out * out).permute(0, 2, 1, 3).reshape(k, -1, B * out * out)
            dy = gy.to(dtype).permute(0, 2, 1, 3, 4).reshape(k, COUT, -1)
            return torch.bmm(dy, cols.transpose(1, 2))
        return run

    def view_bmm(dtype, split=1):
        def run():
            view = x.to(dtype).unfold(3, KS, 1).unfold(4, KS, 1)                    # (k, B, C, Ho, Wo, K, K)
            cols = view.permute(0, 1, 3, 4, 2, 5, 6).reshape(k, split, -1, CIN * KS * KS)
            dy = gy.to(dtype).permute(0, 1, 3, 4, 2).reshape(k, split, -1, COUT)
            parts = torch.matmul(dy.transpose(2, 3), cols)                           # (k, split, COUT, C K K)
            return parts.sum(1, dtype=torch.float32) if split > 1 else parts[:, 0]
        return run

    def fprop_swapped():
        inputs = x.permute(2, 0, 1, 3, 4).reshape(CIN, k * B, HW, HW)               # channels as the batch
        filters = gy.permute(0, 2, 1, 3, 4).reshape(k * COUT, B, out, out)          # output gradients as filters
        return F.conv2d(inputs, filters, groups=k).reshape(CIN, k, COUT, KS, KS).permute(1, 2, 0, 3, 4)

    def vmap_function(function):
        def run():
            leaf = w.detach().requires_grad_(True)
            y = vmap(function.apply)(x, leaf)
            return torch.autograd.grad(y, leaf, gy)[0]
        return run

    ref = cudnn_grouped().reshape(k, COUT, CIN, KS, KS).double()
    rows = []
    variants = [("cudnn-grouped", cudnn_grouped, None), ("unfold-bmm fp32", unfold_bmm(torch.float32), False),
                ("unfold-bmm tf32", unfold_bmm(torch.float32), True),
                ("unfold-bmm bf16", unfold_bmm(torch.bfloat16), None),
                ("vmap-function", vmap_function(MatmulWeightGradient), False),
                ("vmap-view", vmap_function(ViewWeightGradient), False),
                ("view-bmm bf16", view_bmm(torch.bfloat16), None),
                ("view-bmm split-K bf16", view_bmm(torch.bfloat16, split=8), None),
                ("fprop-swapped", fprop_swapped, False)]
    for name, fn, tf32 in variants:
        before = torch.backends.cuda.matmul.allow_tf32
        if tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            seconds = timed(fn, device)
            err = float((fn().reshape(ref.shape).double() - ref).norm() / ref.norm())
            rows.append({"layer": layer, "clients": k, "variant": name, "ms": round(1e3 * seconds, 3),
                         "tflops": round(flops / seconds / 1e12, 2), "relative_error": err})
        except Exception as error:  # noqa: BLE001 -- a variant that fails is reported, the others still run
            rows.append({"layer": layer, "clients": k, "variant": name, "error": repr(error)[:300]})
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--clients", nargs="+", type=int, default=[10, 100, 400])
    p.add_argument("--layer", nargs="+", choices=list(LAYERS), default=["conv1", "conv2"])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    for layer in args.layer:
        for k in args.clients:
            for row in probe(k, device, layer):
                figures = (f"{row['ms']:9.3f} ms  {row['tflops']:7.2f} TFLOP/s  rel. error {row['relative_error']:.1e}"
                           if "ms" in row else row["error"])
                print(json.dumps(row) if args.json else f"{layer} k={k:<4} {row['variant']:<22} {figures}", flush=True)


if __name__ == "__main__":
    main()
