"""Toto, inference only. Module names follow the published checkpoint (xFormers' fused
SwiGLU names), so its tensors load as they are.

Two entry points:
- `prefill`: the whole (scaled) context for a batch of series, causal over patches; returns
  the output head of the last patch and the context's keys and values (one copy per series).
- `decode`: one new patch per sample path. Its queries attend to the shared context keys
  (broadcast over the samples, never copied), to the path's own earlier decoded keys (a
  preallocated buffer masked by `step`, a tensor), and to themselves. Positions, xPos scales
  and masks are computed from tensors on the device: no host sync, no shape that depends on
  the step, so a compiled decode does not recompile as the step or the context length change.

Dropout, in training mode only, where toto-ts 0.2.0 has it (`toto/model/transformer.py`,
`attention.py`): on the attention weights and after the SwiGLU feed-forward, at the config's
one rate (training runs `prefill`; inference runs in eval mode, where no dropout is called).

Numerics follow the reference: queries, keys and values are split "(qkv head_dim n_heads)"
(heads innermost) and merged back "(n_heads head_dim)"; rotary angles are interleaved but the
xPos scale is concatenated, its centre being each call's largest position // 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from trader.forecast.dropout import attention_rate, dropped
from trader.forecast.toto.config import RMS_EPS, ROPE_THETA, XPOS_SCALE_BASE, TotoConfig


@dataclass(frozen=True)
class Head:
    """Mixture of Student-T parameters, each [..., patch, components]."""

    df: torch.Tensor
    loc: torch.Tensor
    scale: torch.Tensor
    logits: torch.Tensor


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + RMS_EPS) * self.scale


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w12 = nn.Linear(dim, 2 * hidden)
        self.w3 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = self.w12(x).chunk(2, dim=-1)  # gate first, as xFormers orders it
        return self.w3(F.silu(gate) * value)


class Rotary(nn.Module):
    """Rotary embedding with xPos, as rotary-embedding-torch 0.8.6 and Toto compute it."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        even = torch.arange(0, head_dim, 2).float()
        self.register_buffer("inv_freq", 1.0 / (ROPE_THETA ** (even / head_dim)), persistent=False)
        self.register_buffer("xpos", (even + 0.4 * head_dim) / (1.4 * head_dim), persistent=False)

    inv_freq: torch.Tensor
    xpos: torch.Tensor

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k [..., seq, head_dim] at `positions` [seq] (float)."""
        angles = (positions[:, None] * self.inv_freq[None, :]).repeat_interleave(2, dim=-1)
        centre = torch.div(positions.max(), 2, rounding_mode="floor")
        power = (positions - centre) / XPOS_SCALE_BASE
        scale = self.xpos[None, :] ** power[:, None]
        scale = torch.cat((scale, scale), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        return _rotate(q, cos, sin, scale), _rotate(k, cos, sin, scale**-1)


def _rotate(
    t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    pairs = t.unflatten(-1, (-1, 2))
    half = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return ((t * cos * scale) + (half * sin * scale)).type(t.dtype)


class Attention(nn.Module):
    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = config.num_heads, config.head_dim
        self.wQKV = nn.Linear(config.embed_dim, 3 * config.embed_dim)
        self.wO = nn.Linear(config.embed_dim, config.embed_dim)
        self.attn_dropout = nn.Dropout(config.dropout)  # its rate, for the attention weights

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[N, L, E] -> three [N, H, L, D]."""
        n, length, _ = x.shape
        split = self.wQKV(x).view(n, length, 3, self.head_dim, self.heads)
        q, k, v = split.permute(2, 0, 4, 1, 3).unbind(0)
        return q, k, v

    def merge(self, out: torch.Tensor) -> torch.Tensor:
        """[N, H, L, D] -> [N, L, E]."""
        n, _, length, _ = out.shape
        return self.wO(out.transpose(1, 2).reshape(n, length, self.heads * self.head_dim))


class Layer(nn.Module):
    def __init__(self, config: TotoConfig, spacewise: bool) -> None:
        super().__init__()
        self.spacewise = spacewise
        self.norm1 = RMSNorm(config.embed_dim)
        self.norm2 = RMSNorm(config.embed_dim)
        self.attention = Attention(config)
        # As the reference's Sequential(SwiGLU, Dropout): the dropout holds no tensor.
        self.mlp = nn.ModuleList(
            [SwiGLU(config.embed_dim, config.mlp_hidden_dim), nn.Dropout(config.dropout)]
        )

    @property
    def attention_dropout(self) -> float:
        """The attention weights' rate: the config's in training mode, 0 in eval mode."""
        return attention_rate(self.attention.attn_dropout)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        swiglu = cast(SwiGLU, self.mlp[0])
        return x + dropped(cast(nn.Dropout, self.mlp[1]), swiglu(self.norm2(x)))

    def across_variates(self, x: torch.Tensor) -> torch.Tensor:
        """Space-wise attention: every variate of a series at the same patch, unmasked."""
        b, v, length, e = x.shape
        flat = self.norm1(x).transpose(1, 2).reshape(b * length, v, e)
        q, k, val = self.attention.qkv(flat)
        out = F.scaled_dot_product_attention(q, k, val, dropout_p=self.attention_dropout)
        out = self.attention.merge(out)
        return x + out.view(b, length, v, e).transpose(1, 2)


class Transformer(nn.Module):
    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        self.rotary = Rotary(config.head_dim)
        self.layers = nn.ModuleList([Layer(config, s) for s in config.space_layers])

    @property
    def blocks(self) -> list[Layer]:
        return cast(list[Layer], list(self.layers))


class PatchEmbedding(nn.Module):
    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        self.patch = config.patch_size
        self.projection = nn.Linear(config.patch_size, config.embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, V, T] -> [B, V, T / patch, E]."""
        return self.projection(x.unflatten(-1, (-1, self.patch)))


class MixtureOfStudentTs(nn.Module):
    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        k = config.k_components
        self.df = nn.Linear(config.embed_dim, k)
        self.loc_proj = nn.Linear(config.embed_dim, k)
        self.scale_proj = nn.Linear(config.embed_dim, k)
        self.mixture_weights = nn.Linear(config.embed_dim, k)

    def forward(self, x: torch.Tensor) -> Head:
        eps = torch.finfo(x.dtype).eps
        return Head(
            df=2.0 + F.softplus(self.df(x)).clamp_min(eps),
            loc=self.loc_proj(x),
            scale=F.softplus(self.scale_proj(x)).clamp_min(eps),
            logits=self.mixture_weights(x),
        )


class Backbone(nn.Module):
    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        self.config = config
        self.patch_embed = PatchEmbedding(config)
        self.transformer = Transformer(config)
        self.unembed = nn.Linear(config.embed_dim, config.embed_dim * config.patch_size)
        self.output_distribution = MixtureOfStudentTs(config)

    def head(self, hidden: torch.Tensor) -> Head:
        """The output distribution of each step of the patches after `hidden` [..., L, E]."""
        *lead, length, e = hidden.shape
        steps = self.unembed(hidden).view(*lead, length * self.config.patch_size, e)
        return self.output_distribution(steps)


class TotoModel(nn.Module):
    """Holds the backbone as `model`, as the checkpoint's key names expect."""

    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        self.config = config
        self.model = Backbone(config)

    @property
    def time_layers(self) -> int:
        return sum(not s for s in self.config.space_layers)

    def prefill(
        self, scaled: torch.Tensor, *, every_patch: bool = False
    ) -> tuple[Head, torch.Tensor, torch.Tensor]:
        """`scaled` [B, V, T] -> the head after the last patch (after every patch with
        `every_patch`), and the context keys and values [time layers, B * V, H, T / patch, D]."""
        backbone = self.model
        x = backbone.patch_embed(scaled)
        b, v, length, e = x.shape
        positions = torch.arange(length, device=x.device, dtype=torch.float32)
        keys, values = [], []
        for layer in backbone.transformer.blocks:
            if layer.spacewise:
                x = layer.across_variates(x)
            else:
                q, k, val = layer.attention.qkv(layer.norm1(x).reshape(b * v, length, e))
                q, k = backbone.transformer.rotary(q, k, positions)
                keys.append(k)
                values.append(val)
                out = F.scaled_dot_product_attention(
                    q, k, val, dropout_p=layer.attention_dropout, is_causal=True
                )
                x = x + layer.attention.merge(out).view(b, v, length, e)
            x = layer.feed_forward(x)
        hidden = x if every_patch else x[:, :, -1:]
        return backbone.head(hidden), torch.stack(keys), torch.stack(values)

    def decode(
        self,
        scaled: torch.Tensor,
        context_keys: torch.Tensor,
        context_values: torch.Tensor,
        decoded_keys: torch.Tensor,
        decoded_values: torch.Tensor,
        step: torch.Tensor,
    ) -> tuple[Head, torch.Tensor, torch.Tensor]:
        """One new patch per sample path. Every size is a dimension of an input (no size is
        derived by division), which keeps symbolic shapes simple for the compiler.

        scaled: [B, S, V, patch], S sample paths for each of B series.
        context_keys/values: [time layers, B, V, H, C, D] (from `prefill`, shared by a
        series' paths). decoded_keys/values: [time layers, B, S, V, H, N, D]; slots before
        `step` hold the path's earlier decoded patches. Returns the head after the new patch
        [B, S, V, patch, K] and its keys and values [time layers, B, S, V, H, 1, D] (the
        caller stores them at slot `step`)."""
        backbone = self.model
        b, s, v, _ = scaled.shape
        x = backbone.patch_embed(scaled)  # [B, S, V, 1, E]
        e = x.shape[-1]
        slots = decoded_keys.shape[5]
        position = (context_keys.shape[4] + step).to(torch.float32).reshape(1)
        earlier = torch.arange(slots, device=x.device) < step
        keys, values = [], []
        time_index = 0
        for layer in backbone.transformer.blocks:
            if layer.spacewise:
                x = layer.across_variates(x.reshape(b * s, v, 1, e)).reshape(b, s, v, 1, e)
            else:
                q, k, val = layer.attention.qkv(layer.norm1(x).reshape(b * s * v, 1, e))
                q, k = backbone.transformer.rotary(q, k, position)
                heads, dim = q.shape[1], q.shape[3]
                q, k, val = (t.reshape(b, s, v, heads, 1, dim) for t in (q, k, val))
                keys.append(k)
                values.append(val)
                out = _attend(
                    q, k, val,
                    context_keys[time_index], context_values[time_index],
                    decoded_keys[time_index], decoded_values[time_index], earlier,
                )  # fmt: skip
                merged = layer.attention.merge(out.reshape(b * s * v, heads, 1, dim))
                x = x + merged.reshape(b, s, v, 1, e)
                time_index += 1
            x = layer.feed_forward(x)
        return backbone.head(x), torch.stack(keys), torch.stack(values)


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    context_k: torch.Tensor,
    context_v: torch.Tensor,
    decoded_k: torch.Tensor,
    decoded_v: torch.Tensor,
    earlier: torch.Tensor,
) -> torch.Tensor:
    """Softmax attention of each path's one query over three groups of keys: the series'
    context (shared, broadcast over the paths), the path's earlier decoded patches (slots
    masked by `earlier`), and the query's own key. Computed group by group against one
    running maximum, so nothing is concatenated.

    q, k, v: [B, S, V, H, 1, D]; context: [B, V, H, C, D]; decoded: [B, S, V, H, N, D]."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    qf = q.float()
    ck, cv = context_k.unsqueeze(1).float(), context_v.unsqueeze(1).float()
    s_context = (qf @ ck.transpose(-1, -2)) * scale  # [B, S, V, H, 1, C]
    s_decoded = (qf @ decoded_k.float().transpose(-1, -2)) * scale  # [B, S, V, H, 1, N]
    s_decoded = s_decoded.masked_fill(~earlier, float("-inf"))
    s_self = (qf * k.float()).sum(-1, keepdim=True) * scale  # [B, S, V, H, 1, 1]
    top = torch.maximum(
        torch.maximum(s_context.amax(-1, keepdim=True), s_decoded.amax(-1, keepdim=True)), s_self
    )
    w_context, w_decoded, w_self = (
        torch.exp(s_context - top), torch.exp(s_decoded - top), torch.exp(s_self - top),
    )  # fmt: skip
    total = w_context.sum(-1, keepdim=True) + w_decoded.sum(-1, keepdim=True) + w_self
    out = w_context @ cv + w_decoded @ decoded_v.float() + w_self * v.float()
    return (out / total).to(q.dtype)
