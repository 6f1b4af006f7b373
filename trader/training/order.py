"""Which training windows each step reads: a fresh permutation of all of them per epoch,
drawn from the seed and the epoch alone, so step n reads the same windows in an uninterrupted
run, a resumed one and one spread over any number of processes (each takes an equal share of
the global batch, in rank order)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

from trader.training.distributed import World


@dataclass(frozen=True)
class Order:
    windows: int  # training windows in all
    batch: int  # the global batch
    seed: int

    @property
    def steps_per_epoch(self) -> int:
        return max(1, self.windows // self.batch)

    def _epoch(self, epoch: int) -> NDArray[np.int64]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.windows, generator=generator).numpy()

    def global_batch(self, step: int) -> NDArray[np.int64]:
        """The indices (into the training windows) of step `step`'s global batch."""
        begin = step * self.batch
        out: list[NDArray[np.int64]] = []
        while sum(len(part) for part in out) < self.batch:
            taken = sum(len(part) for part in out)
            position = begin + taken
            epoch, offset = divmod(position, self.windows)
            out.append(self._epoch(epoch)[offset : offset + self.batch - taken])
        return np.concatenate(out)

    def share(self, step: int, world: World) -> NDArray[np.int64]:
        """This process's share of the step's global batch."""
        per = self.batch // world.size
        return self.global_batch(step)[world.rank * per : (world.rank + 1) * per]
