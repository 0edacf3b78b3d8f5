"""Per-client mini-batch streams: each client reads its own data in shuffled epochs, forever.

Client i draws from its index set a fresh permutation every epoch (as a shuffling ``DataLoader`` does) and
consecutive batches are cut from the concatenation of those epochs, so every batch has exactly B
samples (a client with fewer than B samples repeats samples within a batch). Each client has its own
seeded generator, so the batches a client sees do not depend on when or with whom it is trained. With
``noise=True`` (datasets that augment) each sample also carries random bits drawn from the same generator,
which decide its augmentation (:mod:`afl.data.augment`): a batch is then a ``(B, 2)`` tensor of
(index, bits) pairs, and a sample is augmented the same way whichever clients or runs it is trained with.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .data.augment import NOISE_HIGH
from .errors import ParameterError, check_int


class ClientStreams:
    """Shuffled-epoch index streams for every client of a partition (list of index tensors)."""

    def __init__(self, parts: list[Tensor], batch_size: int, seed: int, noise: bool = False):
        batch_size = check_int("batch_size", batch_size, 1)
        self.parts = [np.asarray(p.cpu() if isinstance(p, Tensor) else p, dtype=np.int64) for p in parts]
        for i, p in enumerate(self.parts):
            if p.size == 0:
                raise ParameterError(f"parts[{i}]", "empty", "every client to hold at least one sample")
        self.batch_size, self.noise = batch_size, bool(noise)
        self.rngs = [np.random.default_rng([seed, i]) for i in range(len(parts))]
        self.pending = [np.empty(0, dtype=np.int64) for _ in parts]

    def __len__(self) -> int:
        return len(self.parts)

    def take(self, client: int, steps: int) -> Tensor:
        """The next ``steps`` batches of ``client``: a ``(steps, B)`` int64 tensor of dataset indices, or
        ``(steps, B, 2)`` (index, augmentation bits) pairs with ``noise``."""
        need = steps * self.batch_size
        chunks, have = [self.pending[client]], self.pending[client].size
        while have < need:
            perm = self.parts[client][self.rngs[client].permutation(self.parts[client].size)]
            chunks.append(perm)
            have += perm.size
        flat = np.concatenate(chunks)
        self.pending[client] = flat[need:]
        batches = torch.from_numpy(flat[:need].reshape(steps, self.batch_size))
        if not self.noise:
            return batches
        bits = torch.from_numpy(self.rngs[client].integers(0, NOISE_HIGH, (steps, self.batch_size), dtype=np.int64))
        return torch.stack([batches, bits], dim=-1)
