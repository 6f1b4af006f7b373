"""Toto 2.0's network, inference only: patches of (scaled values, missing flags) in, the nine
quantile knots of the following patches out.

Layers alternate causal attention over time (partial RoPE with xPos) and attention across
the variates of each patch. One pass (`run`) takes the patches after `start`; time layers can
write their keys and values into a static cache (`StaticCache`) and attend over everything
cached so far, which is how block decoding continues without re-running the context."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from trader.forecast.toto2.config import KNOTS, ROPE_TABLE, ROPE_THETA, XPOS_SCALE_BASE, Toto2Config
from trader.forecast.toto2.layers import Layer, Norm, ResidualMLP


@dataclass(frozen=True)
class StaticCache:
    """Keys and values of every time layer: [time layers, B * V, kv heads, slots, D]."""

    keys: torch.Tensor
    values: torch.Tensor

    @classmethod
    def allocate(
        cls, config: Toto2Config, series: int, slots: int, like: torch.Tensor
    ) -> StaticCache:
        shape = (config.time_layers, series, config.kv_heads, slots, config.head_dim)
        value_shape = (*shape[:-1], config.value_dim)
        return cls(like.new_zeros(shape), like.new_zeros(value_shape))


class Rotary(nn.Module):
    """The reference's rotary tables (interleaved pairs over the first `rotary_dim` of each
    head) and its xPos scale, whose centre is the middle of each pass's positions."""

    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        dim = self.dim = config.rotary_dim
        self.xpos = config.use_xpos
        theta = 1.0 / torch.pow(ROPE_THETA, torch.arange(0, dim, 2, dtype=torch.float) / dim)
        angles = torch.outer(torch.arange(ROPE_TABLE, dtype=torch.float), theta)
        angles = angles.repeat_interleave(2, dim=-1)
        self.cos: torch.Tensor
        self.sin: torch.Tensor
        self.xpos_base: torch.Tensor
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        base = (torch.arange(0, dim, 2).float() + 0.4 * dim) / (1.4 * dim)
        self.register_buffer("xpos_base", base, persistent=False)

    def tables(self, start: int, length: int) -> tuple[torch.Tensor, ...]:
        """cos and sin for queries, then for keys, at positions start .. start + length."""
        if start + length > ROPE_TABLE:
            raise ValueError(f"{start + length} patches exceed the rotary table ({ROPE_TABLE})")
        cos, sin = self.cos[start : start + length], self.sin[start : start + length]
        if not self.xpos:
            return cos, sin, cos, sin
        centre = (start + length) // 2  # (max position + 1) // 2
        positions = torch.arange(start, start + length, device=cos.device, dtype=torch.float)
        power = ((positions - centre) / XPOS_SCALE_BASE).unsqueeze(-1)
        scale = (self.xpos_base**power).repeat_interleave(2, dim=-1)
        inverse = scale**-1.0
        return cos * scale, sin * scale, cos * inverse, sin * inverse


def _turn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    dim = cos.shape[-1]
    turned, rest = x[..., :dim], x[..., dim:]
    pairs = torch.unflatten(turned, -1, (-1, 2))
    rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return torch.cat((turned * cos.to(x.dtype) + rotated * sin.to(x.dtype), rest), dim=-1)


class Transformer(nn.Module):
    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Layer(config, v) for v in config.variate_layers])
        self.blocks = [layer for layer in self.layers if isinstance(layer, Layer)]
        self.out_norm = Norm(config.d_model, config.norm_eps, config.norm_include_weight)


class _Projection(nn.Module):
    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        out = config.patch_size * len(KNOTS)
        self.proj = ResidualMLP(config.d_model, 4 * config.d_model, out, readout=True)


class _OutputHead(nn.Module):
    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        self.param_projection = _Projection(config)


class Toto2Model(nn.Module):
    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        self.config = config
        self.patch_proj = ResidualMLP(
            2 * config.patch_size, 4 * config.d_model, config.d_model, readout=False
        )
        self.transformer = Transformer(config)
        self.output_head = _OutputHead(config)
        self.rotary = Rotary(config)
        self.folded = False

    def fold(self) -> Toto2Model:
        """Bake the reference's constant scales into the weights (once, after loading)."""
        if not self.folded:
            self.patch_proj.fold()
            for layer in self.transformer.blocks:
                layer.fold()
            self.output_head.param_projection.proj.fold()
            self.folded = True
        return self

    def embed(self, scaled: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
        """[B, V, T] scaled values and observed flags -> [B, V, T / patch, E]."""
        p = self.config.patch_size
        values = torch.unflatten(scaled, -1, (-1, p))
        missing = torch.unflatten((~observed).to(scaled.dtype), -1, (-1, p))
        embedded: torch.Tensor = self.patch_proj(torch.cat([values, missing], dim=-1))
        return embedded

    def run(
        self,
        x: torch.Tensor,
        start: int,
        block: int,
        time_mask: torch.Tensor | None,
        variate_mask: torch.Tensor | None,
        cache: StaticCache | None = None,
        cached: int = 0,
    ) -> torch.Tensor:
        """Patches `x` [B, V, L, E] at positions start .. start + L -> the knots [9, B, V,
        block, patch] predicted for the patches after the last `block + 1` but one. With a
        cache, time layers store their keys at slots cached .. cached + L and attend over
        slots 0 .. cached + L; `time_mask` [B * V, 1, L, cached + L] (None: causal)."""
        b, v, length, e = x.shape
        state = x.reshape(b * v, length, e)
        cos_q, sin_q, cos_k, sin_k = self.rotary.tables(start, length)
        time_index = 0
        for layer in self.transformer.blocks:
            attn = layer.attn
            if layer.variate:
                across = state.view(b, v, length, e).transpose(1, 2).reshape(b * length, v, e)
                q, k, values = attn.project(layer.norm1(across))
                out = attn.attend(q, k, values, variate_mask, causal=False)
                across = layer.feed_forward(torch.add(out, across, alpha=layer.attn_skip))
                state = across.view(b, length, v, e).transpose(1, 2).reshape(b * v, length, e)
                continue
            q, k, values = attn.project(layer.norm1(state))
            q, k = _turn(q, cos_q, sin_q), _turn(k, cos_k, sin_k)
            if cache is not None:
                end = cached + length
                cache.keys[time_index, :, :, cached:end] = k
                cache.values[time_index, :, :, cached:end] = values
                k, values = cache.keys[time_index, :, :, :end], cache.values[time_index, :, :, :end]
            out = attn.attend(q, k, values, time_mask, causal=True)
            state = layer.feed_forward(torch.add(out, state, alpha=layer.attn_skip))
            time_index += 1
        hidden = self.transformer.out_norm(state[:, length - block - 1 : length - 1])
        knots: torch.Tensor = self.output_head.param_projection.proj(hidden)  # [BV, block, 9p]
        p = self.config.patch_size
        return knots.view(b, v, block, p, len(KNOTS)).permute(4, 0, 1, 2, 3)
