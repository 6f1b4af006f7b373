"""Kronos's fine-tuning objectives, on our inference modules.

Windows are context + horizon bars, z-scored by the statistics of their context part alone
(as inference normalises the future by the context's), clipped at +-5, with the bars' time
features.

- Predictor (the published objective, `finetune/train_predictor.py`): the frozen tokenizer
  encodes the window; the model reads tokens 0..T-2 and is scored by the mean of the
  cross-entropies of the s1 and then the s2 token at 1..T-1. The s2 head is conditioned on the
  true s1 token (teacher forcing, the reference's `use_teacher_forcing=True`), attending to
  the hidden states up to its own position, unrotated: what generation computes at each step.
- Tokenizer (`finetune/train_tokenizer.py`): (MSE of the s1-only reconstruction + MSE of the
  full reconstruction + the BSQ quantizer loss) / 2, the sign quantizer passing gradients
  straight through. The s1-only decoder input (`post_quant_embed_pre`) is a published tensor
  inference never reads; it is trained here and written back.
- Both: the sum of the two, in one step; the predictor reads the tokenizer's current tokens
  (the reference trains the tokenizer first, then the predictor on its tokens: two runs, the
  second from the first's weights, do exactly that).

The networks trained run in training mode, with the dropout their checkpoint's config.json
states (`DropoutRates`: Kronos-small's 0.25 after the feed-forward and the attention projection,
0.1 on the attention weights and the input embedding; the published tokenizers' none);
validation runs them in eval mode, as the reference's loops do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trader.forecast.kronos.inputs import CLIP, EPSILON, bar_values, time_features
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.tokenizer import KronosTokenizer
from trader.training.data import Refs, Series
from trader.training.modes import evaluating

# Kronos-Tokenizer-base's quantizer loss weights, for checkpoints that do not state theirs.
QUANTIZER_DEFAULTS = {"beta": 0.05, "gamma0": 1.0, "gamma": 1.1, "zeta": 0.05}


@dataclass(frozen=True)
class QuantizerWeights:
    beta: float  # commitment
    gamma0: float  # per-sample entropy
    gamma: float  # codebook entropy
    zeta: float  # the entropy penalty as a whole

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> QuantizerWeights:
        return cls(**{k: float(raw.get(k, v)) for k, v in QUANTIZER_DEFAULTS.items()})


def bsq_loss(z: Tensor, zq: Tensor, group_size: int, weights: QuantizerWeights) -> Tensor:
    """The reference's binary spherical quantizer loss (soft, analytical per-sample entropy,
    group codebook entropy). z: the unit-normalised latent [..., D]; zq: its quantized value."""
    dim = z.shape[-1]
    commit = weights.beta * ((zq.detach() - z) ** 2).sum(-1).mean()
    # The codes of one group of bits, most significant first, on the unit sphere's scale.
    index = torch.arange(2**group_size, device=z.device)
    shifts = torch.arange(group_size - 1, -1, -1, device=z.device)
    codebook = (((index[:, None] >> shifts) & 1).float() * 2 - 1) / dim**0.5
    groups = z.unflatten(-1, (dim // group_size, group_size))
    prob = (2 * torch.einsum("...gc,dc->...gd", groups, codebook)).softmax(-1)
    p = torch.sigmoid(-4 * z / dim**0.5)
    per_sample = _entropy(torch.stack([p, 1 - p], dim=-1)).sum(-1).mean()
    codebook_entropy = _entropy(prob.flatten(0, -3).mean(0)).sum()
    penalty = weights.gamma0 * per_sample - weights.gamma * codebook_entropy
    return commit + weights.zeta * penalty


def _entropy(probs: Tensor) -> Tensor:
    return -(probs * torch.log(probs + 1e-8)).sum(-1)


def predictor_loss(
    model: KronosModel, tokenizer: KronosTokenizer, x: Tensor, stamp: Tensor
) -> Tensor:
    """The mean of the s1 and s2 cross-entropies over a batch of windows."""
    ce1, ce2 = predictor_cross_entropies(model, tokenizer, x, stamp)
    return (ce1 + ce2) / 2


def predictor_cross_entropies(
    model: KronosModel, tokenizer: KronosTokenizer, x: Tensor, stamp: Tensor
) -> tuple[Tensor, Tensor]:
    """The s1 and the s2 cross-entropy over a batch of windows. The tokens come from the
    tokenizer in eval mode (the reference's `train_predictor.py` keeps it there: no dropout
    in the targets), never differentiated through, in float32 as inference encodes: a bfloat16
    autocast could flip the sign of a small coordinate, and so a bit of a token. The model
    runs in its own mode: training's dropout, in the reference's order."""
    with torch.no_grad(), torch.autocast(x.device.type, enabled=False), evaluating(tokenizer):
        s1, s2 = tokenizer.encode(x)
    hidden, _ = model.window(s1[:, :-1], s2[:, :-1], stamp[:, :-1])
    s1_logits = model.s1_logits(hidden)
    s2_logits = model.s2_logits_every_step(hidden, s1[:, 1:])
    ce1 = F.cross_entropy(s1_logits.flatten(0, 1).float(), s1[:, 1:].flatten())
    ce2 = F.cross_entropy(s2_logits.flatten(0, 1).float(), s2[:, 1:].flatten())
    return ce1, ce2


def tokenizer_loss(
    tokenizer: KronosTokenizer, pre: nn.Linear, weights: QuantizerWeights, x: Tensor
) -> Tensor:
    """(s1-only reconstruction MSE + full reconstruction MSE + BSQ loss) / 2."""
    config = tokenizer.config
    z = F.normalize(tokenizer.latent(x), dim=-1)
    signs = torch.where(z > 0, 1.0, -1.0).to(z.dtype)
    zq = (z + (signs - z).detach()) / config.codebook_dim**0.5
    quantizer = bsq_loss(z.float(), zq.float(), config.group_size, weights)
    coarse = tokenizer.reconstruct(pre(zq[..., : config.s1_bits]))
    full = tokenizer.reconstruct(tokenizer.post_quant_embed(zq))
    mse = F.mse_loss(coarse.float(), x) + F.mse_loss(full.float(), x)
    return (mse + quantizer) / 2


class KronosTraining(nn.Module):
    """The loss of a batch (x [B, T, 6] normalised bars, stamp [B, T, 5]) for the parts
    trained: the predictor, the tokenizer, or both (the sum of the two losses, the predictor
    reading the tokenizer's current tokens). The parts not trained are frozen."""

    def __init__(
        self,
        model: KronosModel,
        tokenizer: KronosTokenizer,
        pre: nn.Linear,
        weights: QuantizerWeights,
        part: str,
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.pre = pre  # post_quant_embed_pre: the s1 bits -> the decoder's input
        self.weights = weights
        self.part = part
        for name, module in (("predictor", model), ("tokenizer", tokenizer), ("tokenizer", pre)):
            module.requires_grad_(part in (name, "both"))
        if not model.config.learn_te:
            model.time_emb.requires_grad_(False)  # fixed sinusoids, as the reference keeps them

    def forward(self, x: Tensor, stamp: Tensor) -> Tensor:
        losses = []
        if self.part != "predictor":
            losses.append(tokenizer_loss(self.tokenizer, self.pre, self.weights, x))
        if self.part != "tokenizer":
            losses.append(predictor_loss(self.model, self.tokenizer, x, stamp))
        return sum(losses[1:], losses[0])


class KronosBatches:
    """Windows of the six columns, z-scored by their first `context` bars, and their time
    features."""

    def __init__(self, series: Sequence[Series], context: int, length: int) -> None:
        self.context = context
        self.length = length
        self.values = [np.ascontiguousarray(bar_values(s.bars)) for s in series]
        self.stamps = [time_features([b.start for b in s.bars]) for s in series]

    def make(self, refs: Refs, device: torch.device) -> tuple[Tensor, Tensor]:
        pairs = refs.tolist()
        values = np.stack([self.values[s][first : first + self.length] for s, first in pairs])
        stamps = np.stack([self.stamps[s][first : first + self.length] for s, first in pairs])
        x = torch.from_numpy(values).to(device)
        past = x[:, : self.context]
        mean, std = past.mean(1, keepdim=True), past.std(1, keepdim=True, unbiased=False)
        x = ((x - mean) / (std + EPSILON)).clamp(-CLIP, CLIP)
        return x, torch.from_numpy(stamps).to(device)
