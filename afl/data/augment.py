"""Batched training augmentations, vectorized over samples and driven by per-sample random bits.

``random_crop_flip`` is the CIFAR recipe of He et al. 2016 (pad 4, random 32x32 crop, horizontal flip
with probability 1/2), used by GHBM (App. C.2) and FAVAS for CIFAR; ``random_flip`` is the TinyImageNet
recipe. Every sample's randomness is one non-negative integer of ``noise`` (:func:`augment_noise`): bit 0
decides its flip, the higher bits its crop offsets. Because the bits travel with the sample (a client's
stream draws them with its mini-batches, :class:`afl.streams.ClientStreams`), a sample is augmented the same
way whichever other samples, clients or runs it is trained with, and on CPU and GPU alike.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from afl.errors import check, check_int

NOISE_HIGH = 1 << 31


def augment_noise(shape, generator: torch.Generator | None = None) -> Tensor:
    """Random bits for augmenting ``shape`` samples: int64 in ``[0, 2^31)``, on the generator's device."""
    device = "cpu" if generator is None else generator.device
    return torch.randint(0, NOISE_HIGH, shape if isinstance(shape, tuple) else (shape,), generator=generator,
                         device=device)


def _check(x: Tensor, noise: Tensor) -> Tensor:
    check(x.dim() == 4, "x", tuple(x.shape), "a (B, C, H, W) batch")
    check(noise.shape == (x.shape[0],), "noise", tuple(noise.shape), f"({x.shape[0]},) random integers")
    return noise.to(x.device)


def random_flip(x: Tensor, noise: Tensor) -> Tensor:
    """Flip each image of ``x`` (B, C, H, W) left-right where bit 0 of its ``noise`` is set (probability 1/2)."""
    flip = (_check(x, noise) & 1).bool()
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)


def random_crop(x: Tensor, noise: Tensor, padding: int = 4, fill=0.0) -> Tensor:
    """Pad ``x`` (B, C, H, W) by ``padding`` on each side with ``fill`` (scalar or per-channel) and take an
    independent random H x W crop per sample (offsets uniform in ``[0, 2 padding]`` from ``noise >> 1``)."""
    noise = _check(x, noise)
    padding = check_int("padding", padding, 0)
    if padding == 0 or x.shape[0] == 0:
        return x
    b, c, h, w = x.shape
    if torch.is_tensor(fill):
        f = fill.to(device=x.device, dtype=x.dtype).view(1, c, 1, 1)
        padded = F.pad(x - f, (padding,) * 4) + f
    else:
        padded = F.pad(x, (padding,) * 4, value=fill)
    m, r = 2 * padding + 1, noise >> 1
    oy, ox = r % m, (r // m) % m
    rows = (oy[:, None] + torch.arange(h, device=x.device))[:, :, None]      # (B, H, 1)
    cols = (ox[:, None] + torch.arange(w, device=x.device))[:, None, :]      # (B, 1, W)
    bidx = torch.arange(b, device=x.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[bidx, rows, cols].permute(0, 3, 1, 2).contiguous()


def random_crop_flip(x: Tensor, noise: Tensor, padding: int = 4, fill=0.0) -> Tensor:
    """Random crop with ``padding`` (see :func:`random_crop`) followed by a random horizontal flip."""
    return random_flip(random_crop(x, noise, padding, fill), noise)
