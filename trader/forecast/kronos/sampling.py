"""Drawing a token from logits as the reference does: divide by the temperature, then top-k
or else nucleus (top-p) filtering, then a multinomial draw."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0
    top_k: int = 0  # 0: off. With top_k > 0 the reference ignores top_p, and so do we.
    top_p: float = 1.0  # 1.0: off

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")


def filtered(logits: Tensor, sampling: Sampling) -> Tensor:
    """Logits [N, V] after temperature and filtering; removed tokens are -inf."""
    logits = logits / sampling.temperature
    if sampling.top_k > 0:
        k = min(sampling.top_k, logits.shape[-1])
        # Ties with the k-th largest survive, as in the reference.
        kth = torch.topk(logits, k).values[..., -1:]
        return logits.masked_fill(logits < kth, -math.inf)
    if sampling.top_p < 1.0:
        ordered, order = torch.sort(logits, descending=True)
        cumulative = torch.cumsum(torch.softmax(ordered, dim=-1), dim=-1)
        # Drop what lies beyond the mass, shifted by one so the token crossing it stays (and
        # the likeliest always does).
        drop = torch.zeros_like(cumulative, dtype=torch.bool)
        drop[..., 1:] = cumulative[..., :-1] > sampling.top_p
        return logits.masked_fill(drop.scatter(-1, order, drop), -math.inf)
    return logits


def draw(logits: Tensor, sampling: Sampling, generator: torch.Generator) -> Tensor:
    """One token id per row of logits [..., V] -> [...]."""
    flat = filtered(logits.reshape(-1, logits.shape[-1]), sampling)
    probs = torch.softmax(flat, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).reshape(logits.shape[:-1])
