"""The transformer parts Kronos's model and tokenizer share, named as the published checkpoints
name them. Dropout, where the reference has it, in training mode only (`DropoutRates`); eval
mode calls none of it, so inference is the computation without it, bit for bit.

Two attention paths: `Block.forward` runs a whole window causally from position 0 with the same
operations, in the same order, as the reference (so the tokenizer's codes agree bit for bit);
`Block.forward_suffix` runs new tokens of many sample paths against a prefix shared by all paths
of a symbol (its keys and values stored once per symbol) plus each path's own earlier tokens.
That is the KV cache: the context is computed once per symbol, not once per sample path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trader.forecast.dropout import attention_rate, dropped
from trader.forecast.kronos.config import NO_DROPOUT, DropoutRates

ROPE_THETA = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        y = x.float()
        y = y * torch.rsqrt(torch.mean(y * y, dim=-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ff_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, ff_dim, bias=False)
        self.w3 = nn.Linear(d_model, ff_dim, bias=False)
        self.w2 = nn.Linear(ff_dim, d_model, bias=False)
        self.ffn_dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return dropped(self.ffn_dropout, self.w2(F.silu(self.w1(x)) * self.w3(x)))


class Rotary(nn.Module):
    """Holds `inv_freq` as the checkpoint stores it: the reference uses the stored values."""

    inv_freq: Tensor

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def tables(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin, [*positions.shape, head_dim], half-split layout (freqs twice)."""
        freqs = positions.to(self.inv_freq.dtype)[..., None] * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos) + (rotated * sin)


class Attention(nn.Module):
    """Multi-head attention with biased projections; RoPE is applied by the caller's tables.
    The dropout rates are the block's (the dependency layer's are zero, as the reference's)."""

    def __init__(
        self, d_model: int, n_heads: int, attn_p: float = 0.0, resid_p: float = 0.0
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.rotary = Rotary(self.head_dim)
        self.attn_dropout = nn.Dropout(attn_p)  # its rate, for the attention weights
        self.resid_dropout = nn.Dropout(resid_p)

    def heads(self, proj: nn.Linear, x: Tensor) -> Tensor:
        """[..., T, d] -> [..., H, T, head_dim]"""
        y = proj(x).unflatten(-1, (self.n_heads, self.head_dim))
        return y.transpose(-3, -2)

    def merge(self, y: Tensor) -> Tensor:
        """[..., H, T, head_dim] -> out_proj([..., T, d])"""
        return self.out_proj(y.transpose(-3, -2).contiguous().flatten(-2))


def attend(
    q: Tensor,
    prefix: tuple[Tensor, Tensor] | None,
    prefix_valid: Tensor | None,
    own: tuple[Tensor, Tensor] | None,
    causal: bool,
) -> Tensor:
    """Attention of every sample path's queries over its symbol's shared prefix and its own keys.

    q: [B, S, H, T, hd] (B symbols, S paths each); prefix: keys and values [B, H, P, hd], with
    prefix_valid [B, P] marking the real positions (None: all); own: [B, S, H, Q, hd], the
    queries being the last T of those Q positions when `causal`. One softmax over both parts:
    the same arithmetic as attending over their concatenation, without copying the prefix S times.
    """
    b, s, h, t, hd = q.shape
    scale = 1.0 / math.sqrt(hd)
    scores: list[Tensor] = []
    if prefix is not None:
        flat = q.permute(0, 2, 1, 3, 4).reshape(b, h, s * t, hd)
        shared = (flat @ prefix[0].transpose(-1, -2)).mul_(scale)
        shared = shared.unflatten(2, (s, t)).permute(0, 2, 1, 3, 4)  # [B, S, H, T, P]
        if prefix_valid is not None:
            shared = shared.masked_fill(~prefix_valid[:, None, None, None, :], -math.inf)
        scores.append(shared)
    if own is not None:
        mine = (q @ own[0].transpose(-1, -2)).mul_(scale)  # [B, S, H, T, Q]
        if causal and t > 1:
            width = mine.shape[-1]
            allowed = torch.ones(t, width, dtype=torch.bool, device=q.device).tril(width - t)
            mine = mine.masked_fill(~allowed, -math.inf)
        scores.append(mine)
    weights = torch.softmax(torch.cat(scores, dim=-1), dim=-1)
    out = torch.zeros_like(q)
    split = 0
    if prefix is not None:
        split = prefix[0].shape[-2]
        w = weights[..., :split].permute(0, 2, 1, 3, 4).reshape(b, h, s * t, split)
        out += (w @ prefix[1]).unflatten(2, (s, t)).permute(0, 2, 1, 3, 4)
    if own is not None:
        out += weights[..., split:] @ own[1]
    return out


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then + ffn(norm2(x))."""

    def __init__(
        self, d_model: int, n_heads: int, ff_dim: int, dropout: DropoutRates = NO_DROPOUT
    ) -> None:
        super().__init__()
        self.norm1 = RMSNorm(d_model)
        self.self_attn = Attention(d_model, n_heads, dropout.attn, dropout.resid)
        self.norm2 = RMSNorm(d_model)
        self.ffn = FeedForward(d_model, ff_dim, dropout.ffn)

    def rotary(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        return self.self_attn.rotary.tables(positions)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """A whole window [N, T, d] from position 0, causal; also its keys and values. The
        one path training runs: in training mode with the reference's dropout, drawn in its
        order (attention weights, after the projection, after the feed-forward)."""
        attn = self.self_attn
        h = self.norm1(x)
        q = rotate(attn.heads(attn.q_proj, h), cos, sin)
        k = rotate(attn.heads(attn.k_proj, h), cos, sin)
        v = attn.heads(attn.v_proj, h)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=attention_rate(attn.attn_dropout), is_causal=True
        )
        x = x + dropped(attn.resid_dropout, attn.merge(y))
        return x + self.ffn(self.norm2(x)), k, v

    def forward_suffix(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        prefix: tuple[Tensor, Tensor] | None,
        prefix_valid: Tensor | None,
        own: tuple[Tensor, Tensor] | None = None,
        at: int = 0,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """New tokens [B, S, T, d] after the shared prefix and, when `own` (a cache
        [B, S, H, >=at+T, hd]) is given, after the `at` tokens it already holds: their keys and
        values are written there at [at, at+T). Returns the output and the new keys, values.
        Inference's path, run in eval mode (training runs `forward`)."""
        attn = self.self_attn
        h = self.norm1(x)
        q = rotate(attn.heads(attn.q_proj, h), cos, sin)
        k = rotate(attn.heads(attn.k_proj, h), cos, sin)
        v = attn.heads(attn.v_proj, h)
        t = x.shape[-2]
        if own is None:
            keys, values = k, v
        else:
            own[0][..., at : at + t, :] = k
            own[1][..., at : at + t, :] = v
            keys, values = own[0][..., : at + t, :], own[1][..., : at + t, :]
        y = attend(q, prefix, prefix_valid, (keys, values), causal=True)
        x = x + attn.merge(y)
        return x + self.ffn(self.norm2(x)), k, v


class Blocks(nn.ModuleList):
    """A ModuleList of Blocks, typed as such."""

    def __init__(
        self,
        count: int,
        d_model: int,
        n_heads: int,
        ff_dim: int,
        dropout: DropoutRates = NO_DROPOUT,
    ) -> None:
        super().__init__(Block(d_model, n_heads, ff_dim, dropout) for _ in range(count))

    def __iter__(self) -> Iterator[Block]:
        return cast(Iterator[Block], super().__iter__())

    def rotary(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """The tables of the first block (all blocks' are the same; with none, unused)."""
        for block in self:
            return block.rotary(positions)
        return positions, positions
