"""Batched training augmentations, vectorized over samples and driven by a ``torch.Generator``.

``random_crop_flip`` is the CIFAR recipe of He et al. 2016 (pad 4, random 32x32 crop, horizontal flip
with probability 1/2), used by GHBM (App. C.2) and FAVAS for CIFAR; ``random_flip`` is the TinyImageNet
recipe. Each sample draws its own offsets and flip; random numbers are drawn on the generator's device
and moved to ``x``'s, so a seed gives the same result on CPU and GPU.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from afl.errors import check, check_int


def _rand_int(high: int, n: int, generator: torch.Generator | None, device) -> Tensor:
    """Uniform integers in [0, high) from ``generator`` (torch's global generator if None)."""
    return torch.randint(0, high, (n,), generator=generator, device=_device(generator, device)).to(device)


def _device(generator: torch.Generator | None, device):
    return device if generator is None else generator.device


def random_flip(x: Tensor, generator: torch.Generator, p: float = 0.5) -> Tensor:
    """Flip each image of ``x`` (B, C, H, W) left-right with probability ``p``."""
    check(x.dim() == 4, "x", tuple(x.shape), "a (B, C, H, W) batch")
    u = torch.rand((x.shape[0],), generator=generator, device=_device(generator, x.device)).to(x.device)
    return torch.where((u < p).view(-1, 1, 1, 1), x.flip(3), x)


def random_crop(x: Tensor, generator: torch.Generator, padding: int = 4, fill=0.0) -> Tensor:
    """Pad ``x`` (B, C, H, W) by ``padding`` on each side with ``fill`` (scalar or per-channel) and take an
    independent random H x W crop per sample."""
    check(x.dim() == 4, "x", tuple(x.shape), "a (B, C, H, W) batch")
    padding = check_int("padding", padding, 0)
    if padding == 0 or x.shape[0] == 0:
        return x
    b, c, h, w = x.shape
    if torch.is_tensor(fill):
        f = fill.to(device=x.device, dtype=x.dtype).view(1, c, 1, 1)
        padded = F.pad(x - f, (padding,) * 4) + f
    else:
        padded = F.pad(x, (padding,) * 4, value=fill)
    oy = _rand_int(2 * padding + 1, b, generator, x.device)
    ox = _rand_int(2 * padding + 1, b, generator, x.device)
    rows = (oy[:, None] + torch.arange(h, device=x.device))[:, :, None]      # (B, H, 1)
    cols = (ox[:, None] + torch.arange(w, device=x.device))[:, None, :]      # (B, 1, W)
    bidx = torch.arange(b, device=x.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[bidx, rows, cols].permute(0, 3, 1, 2).contiguous()


def random_crop_flip(x: Tensor, generator: torch.Generator, padding: int = 4, fill=0.0) -> Tensor:
    """Random crop with ``padding`` (see :func:`random_crop`) followed by a random horizontal flip."""
    return random_flip(random_crop(x, generator, padding, fill), generator)
