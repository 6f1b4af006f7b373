"""The Kronos autoregressive model: hierarchical token embedding plus time features, a causal
transformer with half-split RoPE, then two heads: s1 from the hidden state, s2 from the hidden
state and the s1 token just drawn (the dependency-aware layer). In training mode, the reference's
dropout (`DropoutRates`): on the input embedding and in every transformer block; none in the
dependency layer, which the reference builds with its zero defaults."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trader.forecast.dropout import dropped
from trader.forecast.kronos.config import DEPENDENCY_HEADS, NO_DROPOUT, DropoutRates, ModelConfig
from trader.forecast.kronos.layers import Attention, Blocks, RMSNorm, attend

KV = tuple[Tensor, Tensor]

# Time feature order in a stamp row, and each table's size (the reference's).
TIME_FEATURES = (("minute", 60), ("hour", 24), ("weekday", 7), ("day", 32), ("month", 13))


class HierarchicalEmbedding(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.scale = math.sqrt(config.d_model)
        self.emb_s1 = nn.Embedding(2**config.s1_bits, config.d_model)
        self.emb_s2 = nn.Embedding(2**config.s2_bits, config.d_model)
        self.fusion_proj = nn.Linear(2 * config.d_model, config.d_model)

    def forward(self, s1: Tensor, s2: Tensor) -> Tensor:
        both = torch.cat([self.emb_s1(s1) * self.scale, self.emb_s2(s2) * self.scale], dim=-1)
        return self.fusion_proj(both)


class _FixedTable(nn.Module):
    """learn_te = false: the reference nests the (sinusoidal) table one level deeper."""

    def __init__(self, rows: int, d_model: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(rows, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.emb(x)


class TemporalEmbedding(nn.Module):
    def __init__(self, d_model: int, learned: bool) -> None:
        super().__init__()
        table = nn.Embedding if learned else _FixedTable
        for name, rows in TIME_FEATURES:
            self.add_module(f"{name}_embed", table(rows, d_model))

    def forward(self, stamp: Tensor) -> Tensor:
        """stamp [..., 5] int64 (minute, hour, weekday, day, month) -> [..., d]"""
        minute, hour, weekday, day, month = (
            getattr(self, f"{name}_embed")(stamp[..., i])
            for i, (name, _) in enumerate(TIME_FEATURES)
        )
        # The reference's summation order: float addition is not associative.
        return hour + weekday + day + month + minute


class DependencyLayer(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.cross_attn = Attention(d_model, DEPENDENCY_HEADS)
        self.norm = RMSNorm(d_model)


class DualHead(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.proj_s1 = nn.Linear(config.d_model, 2**config.s1_bits)
        self.proj_s2 = nn.Linear(config.d_model, 2**config.s2_bits)


class KronosModel(nn.Module):
    def __init__(self, config: ModelConfig, dropout: DropoutRates = NO_DROPOUT) -> None:
        super().__init__()
        self.config = config
        self.dropout = dropout
        d = config.d_model
        self.token_drop = nn.Dropout(dropout.token)
        self.embedding = HierarchicalEmbedding(config)
        self.time_emb = TemporalEmbedding(d, config.learn_te)
        self.transformer = Blocks(config.n_layers, d, config.n_heads, config.ff_dim, dropout)
        self.norm = RMSNorm(d)
        self.dep_layer = DependencyLayer(d)
        self.head = DualHead(config)

    def _rotary(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """cos, sin for positions [T] (shared) or [B, T] (per symbol, broadcast over paths)."""
        cos, sin = self.transformer.rotary(positions)
        if positions.dim() == 2:
            cos, sin = cos[:, None, None], sin[:, None, None]
        return cos, sin

    def window(self, s1: Tensor, s2: Tensor, stamp: Tensor) -> tuple[Tensor, list[KV]]:
        """A whole window [N, T] from position 0, as the reference runs it: the final normed
        hidden states [N, T, d] and every layer's keys and values [N, H, T, hd]."""
        x = dropped(self.token_drop, self.embedding(s1, s2) + self.time_emb(stamp))
        cos, sin = self._rotary(torch.arange(x.shape[1], device=x.device))
        kvs = []
        for layer in self.transformer:
            x, k, v = layer(x, cos, sin)
            kvs.append((k, v))
        return self.norm(x), kvs

    def extend(
        self,
        s1: Tensor,
        s2: Tensor,
        stamp: Tensor,
        positions: Tensor,
        prefix: list[KV],
        prefix_valid: Tensor | None,
        own: list[KV] | None = None,
        at: int = 0,
    ) -> Tensor:
        """Tokens [B, S, T] of S paths per symbol after each symbol's shared prefix (per-layer
        keys and values [B, H, P, hd]) and, with `own` caches, after the `at` path tokens they
        hold. stamp: [B, T, 5]. Returns the final normed hidden states [B, S, T, d]."""
        x = self.embedding(s1, s2) + self.time_emb(stamp).unsqueeze(1)
        cos, sin = self._rotary(positions)
        for n, layer in enumerate(self.transformer):
            cache = None if own is None else own[n]
            x, _, _ = layer.forward_suffix(x, cos, sin, prefix[n], prefix_valid, cache, at)
        return self.norm(x)

    def dependency_kv(self, hidden: Tensor) -> KV:
        """Keys and values of the dependency layer over hidden states [..., T, d]."""
        attn = self.dep_layer.cross_attn
        return attn.heads(attn.k_proj, hidden), attn.heads(attn.v_proj, hidden)

    def s1_logits(self, hidden: Tensor) -> Tensor:
        return self.head.proj_s1(hidden)

    def s2_logits(
        self,
        hidden: Tensor,
        s1: Tensor,
        prefix: KV | None,
        prefix_valid: Tensor | None,
        own: KV | None,
    ) -> Tensor:
        """hidden [B, S, d] at the last position, s1 [B, S] the token drawn there; the
        dependency layer's keys and values over the window: the symbol's shared prefix and each
        path's own part. Its query, the s1 embedding, has no rotation: the reference rotates it
        as position 0, which is the identity, and its keys likewise."""
        layer = self.dep_layer
        attn = layer.cross_attn
        q = attn.heads(attn.q_proj, self.embedding.emb_s1(s1).unsqueeze(-2))  # [B, S, 4, 1, hd]
        y = attn.merge(attend(q, prefix, prefix_valid, own, causal=False)).squeeze(-2)
        return self.head.proj_s2(layer.norm(hidden + y))

    def s2_logits_every_step(self, hidden: Tensor, s1: Tensor) -> Tensor:
        """Training's view of `s2_logits`: hidden [N, T, d] over a whole window and s1 [N, T],
        the s1 token that follows each position (the target, teacher-forced); returns the s2
        logits [N, T, V2] of every position at once. Position t's query attends to the hidden
        states up to t, unrotated: exactly what `s2_logits` computes when t is the last
        position of a generation step."""
        attn = self.dep_layer.cross_attn
        q = attn.heads(attn.q_proj, self.embedding.emb_s1(s1))
        k, v = self.dependency_kv(hidden)
        y = attn.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return self.head.proj_s2(self.dep_layer.norm(hidden + y))
