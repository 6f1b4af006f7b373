"""Toto's fine-tuning objective, on our inference modules (`TotoModel.prefill` over every
patch, the causal patch scaler of `toto/scaler.py`).

As Datadog trains it (toto-ts `TotoForFinetuning`): a window of context + one patch; the
model reads the context, causally, and each patch's head forecasts the next patch; the
targets are scaled by the loc and scale of the patch they follow (what inference does to the
first forecast patch); the loss is their `CombinedLoss`, 0.575 x the negative log-likelihood
under the Student-T mixture + 0.425 x a robust (Cauchy, delta 0.1) loss of the mixture's mean,
averaged over every target step. `finetune.toto_nll_weight` sets the share (1: NLL only).
The model trains in training mode, with the dropout its config.json states (Toto-Open-Base-1.0:
0.1 on the attention weights and after each feed-forward, as toto-ts applies it); validation
runs in eval mode, without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from trader.forecast.toto.model import Head, TotoModel
from trader.forecast.toto.scaler import scale_context
from trader.training.data import Refs, Series

ROBUST_DELTA = 0.1


def mixture_log_prob(head: Head, y: Tensor) -> Tensor:
    """log p(y) under each step's mixture of Student-Ts (head tensors [..., K], y [...])."""
    df, loc, scale, logits = (t.float() for t in (head.df, head.loc, head.scale, head.logits))
    z = (y.unsqueeze(-1) - loc) / scale
    half = (df + 1) / 2
    log_t = (
        torch.lgamma(half)
        - torch.lgamma(df / 2)
        - 0.5 * torch.log(df * math.pi)
        - torch.log(scale)
        - half * torch.log1p(z * z / df)
    )
    return torch.logsumexp(torch.log_softmax(logits, dim=-1) + log_t, dim=-1)


def mixture_mean(head: Head) -> Tensor:
    """The mixture's mean (each component's df > 2, so its mean is its loc)."""
    return (torch.softmax(head.logits.float(), dim=-1) * head.loc.float()).sum(-1)


def combined_loss(head: Head, y: Tensor, nll_weight: float) -> Tensor:
    """Datadog's per-step fine-tuning loss (before averaging)."""
    nll = -mixture_log_prob(head, y)
    robust = torch.log1p(0.5 * ((mixture_mean(head) - y) / ROBUST_DELTA) ** 2)
    return nll_weight * nll + (1 - nll_weight) * robust


class TotoTraining(nn.Module):
    """The loss of a batch of windows [B, V, context + patch] (float32, raw values)."""

    def __init__(self, model: TotoModel, nll_weight: float) -> None:
        super().__init__()
        self.model = model
        self.nll_weight = nll_weight

    def forward(self, windows: Tensor) -> Tensor:
        config = self.model.config
        patch = config.patch_size
        inputs, targets = windows[..., :-patch], windows[..., patch:]
        valid = torch.ones_like(inputs, dtype=torch.bool)
        with torch.no_grad():
            scaled, loc, scale, _ = scale_context(
                inputs, valid, patch,
                stabilize=config.stabilize_with_global, exponent=config.scale_factor_exponent,
            )  # fmt: skip
        head, _, _ = self.model.prefill(scaled, every_patch=True)
        eps = torch.finfo(windows.dtype).eps
        y = (targets - loc.repeat_interleave(patch, -1)) / (
            scale.repeat_interleave(patch, -1) + eps
        )
        return combined_loss(head, y, self.nll_weight).mean()


class TotoBatches:
    """Windows of the chosen variates, as tensors."""

    def __init__(self, series: Sequence[Series], variates: Sequence[str], length: int) -> None:
        self.length = length
        self.tables = [
            np.array([[getattr(b, v) for b in s.bars] for v in variates], dtype=np.float32)
            for s in series
        ]

    def make(self, refs: Refs, device: torch.device) -> tuple[Tensor]:
        rows = [self.tables[s][:, first : first + self.length] for s, first in refs.tolist()]
        return (torch.from_numpy(np.stack(rows)).to(device),)
