"""Toto 2.0's building blocks, named as the published checkpoint names their tensors.

The reference scales every linear map's output by a constant (u-muP: 1/sqrt(fan_in), 1/fan_in
for read-outs), scales SiLU's output, and mixes residual branches by weights derived from the
checkpoint's `attn_tau` / `mlp_tau`. `fold()` bakes all of those constants into the weights
once, after loading, so a forward pass is plain matrix products, norms and attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trader.forecast.toto2.config import Toto2Config

# unit_scaling's SiLU output scale (mult 1): exp(0.8 ln sqrt(2 / (1 - 1/pi)) + 0.2 ln 2).
SILU_SCALE = math.exp(0.8 * math.log((2 / (1 - 1 / math.pi)) ** 0.5) + 0.2 * math.log(2.0))
_SQRT_HALF = 1 / math.sqrt(2.0)


def _linear(fan_in: int, fan_out: int, bias: bool) -> nn.Linear:
    return nn.Linear(fan_in, fan_out, bias=bias)


def _scale_(linear: nn.Linear, weight: float, bias: float | None = None) -> None:
    with torch.no_grad():
        linear.weight.mul_(weight)
        if linear.bias is not None:
            linear.bias.mul_(weight if bias is None else bias)


class Norm(nn.Module):
    """RMS norm over the last dimension, with a weight only where the checkpoint has one."""

    def __init__(self, dim: int, eps: float, weight: bool) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim)) if weight else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (self.dim,), self.weight, self.eps)


class ResidualMLP(nn.Module):
    """linear2(silu(linear1(x))) + skip_proj(x), halved in variance (tau 1); `readout` is the
    output head's (1/fan_in scaling of linear2 and skip_proj)."""

    def __init__(self, fan_in: int, hidden: int, fan_out: int, *, readout: bool) -> None:
        super().__init__()
        self.readout = readout
        self.linear1 = _linear(fan_in, hidden, True)
        self.linear2 = _linear(hidden, fan_out, True)
        self.skip_proj = _linear(fan_in, fan_out, True)
        self.hidden = hidden
        self.first: torch.Tensor
        self.first_bias: torch.Tensor
        self.register_buffer("first", torch.empty(0), persistent=False)
        self.register_buffer("first_bias", torch.empty(0), persistent=False)

    def fold(self) -> None:
        power = 1.0 if self.readout else 0.5
        fan_in, hidden = self.linear1.in_features, self.hidden
        _scale_(self.linear1, fan_in**-0.5)
        _scale_(self.linear2, hidden**-power * SILU_SCALE * _SQRT_HALF, hidden**-power * _SQRT_HALF)
        _scale_(self.skip_proj, fan_in**-power * _SQRT_HALF)
        # linear1 and skip_proj read the same input: one matrix product for both.
        self.first = torch.cat([self.linear1.weight, self.skip_proj.weight])
        self.first_bias = torch.cat([self.linear1.bias, self.skip_proj.bias])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        both = F.linear(x, self.first, self.first_bias)
        hidden, skip = torch.split(both, [self.hidden, both.shape[-1] - self.hidden], dim=-1)
        return F.linear(F.silu(hidden), self.linear2.weight, self.linear2.bias).add_(skip)


class PerDimScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.per_dim_scale = nn.Parameter(torch.zeros(dim))

    def factor(self) -> torch.Tensor:
        """The reference's softplus(p) / ln 2 (its unit-scaling constants cancel)."""
        return F.softplus(self.per_dim_scale) / math.log(2.0)


class Attention(nn.Module):
    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        c = config
        self.heads, self.kv_heads = c.num_heads, c.kv_heads
        self.qk_dim, self.v_dim = c.head_dim, c.value_dim
        self.split = [c.head_dim * c.num_heads, c.head_dim * c.kv_heads, c.value_dim * c.kv_heads]
        self.in_proj = _linear(c.d_model, sum(self.split), c.attn_bias)
        self.out_proj = _linear(c.value_dim * c.num_heads, c.d_model, c.attn_bias)
        self.q_norm = Norm(c.head_dim, c.norm_eps, c.qk_weight) if c.qk_norm else None
        self.k_norm = Norm(c.head_dim, c.norm_eps, c.qk_weight) if c.qk_norm else None
        self._pds = PerDimScale(c.head_dim) if c.per_dim_scale else None
        self.query_scale: torch.Tensor
        self.register_buffer("query_scale", torch.empty(0), persistent=False)

    def fold(self, residual: float) -> None:
        _scale_(self.in_proj, self.in_proj.in_features**-0.5)
        _scale_(self.out_proj, self.out_proj.in_features**-0.5 * residual)
        if self._pds is None:
            return
        factor = self._pds.factor().detach()
        if self.q_norm is None:  # q is scaled straight after the projection: fold it in
            rows = factor.repeat(self.heads)
            with torch.no_grad():
                self.in_proj.weight[: self.split[0]].mul_(rows[:, None])
                if self.in_proj.bias is not None:
                    self.in_proj.bias[: self.split[0]].mul_(rows)
        else:
            self.query_scale = factor

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[N, L, E] -> q [N, H, L, D], k and v [N, Hkv, L, D]."""
        n, length, _ = x.shape
        q, k, v = torch.split(
            F.linear(x, self.in_proj.weight, self.in_proj.bias), self.split, dim=-1
        )
        q = q.view(n, length, self.heads, self.qk_dim).transpose(1, 2)
        k = k.view(n, length, self.kv_heads, self.qk_dim).transpose(1, 2)
        v = v.view(n, length, self.kv_heads, self.v_dim).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
            if self.query_scale.numel():
                q = q * self.query_scale
        return q, k, v

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        """Softmax attention with the muP 1/d scale; [N, L, E] out."""
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal and mask is None,
            scale=1.0 / self.qk_dim, enable_gqa=self.heads != self.kv_heads,
        )  # fmt: skip
        n, _, length, _ = out.shape
        return F.linear(
            out.transpose(1, 2).reshape(n, length, -1), self.out_proj.weight, self.out_proj.bias
        )


class FeedForward(nn.Module):
    """fc2(gate * silu(x)) with gate, x the halves of fc1 (gate first, as the reference)."""

    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        self.fc1 = _linear(config.d_model, 2 * config.ff_dim, config.mlp_bias)
        self.fc2 = _linear(config.ff_dim, config.d_model, config.mlp_bias)

    def fold(self, residual: float) -> None:
        _scale_(self.fc1, self.fc1.in_features**-0.5)
        _scale_(self.fc2, self.fc2.in_features**-0.5 * residual)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = F.linear(x, self.fc1.weight, self.fc1.bias).chunk(2, dim=-1)
        return F.linear(gate * F.silu(value), self.fc2.weight, self.fc2.bias)


class Layer(nn.Module):
    """Pre-norm attention and feed-forward, each mixed into the residual stream as
    x * skip + branch (the branch weight folded into its last linear map)."""

    def __init__(self, config: Toto2Config, variate: bool) -> None:
        super().__init__()
        self.variate = variate
        self.attn = Attention(config)
        self.ffn = FeedForward(config)
        self.norm1 = Norm(config.d_model, config.norm_eps, config.norm_include_weight)
        self.norm2 = Norm(config.d_model, config.norm_eps, config.norm_include_weight)
        self.attn_tau: torch.Tensor
        self.mlp_tau: torch.Tensor
        self.register_buffer("attn_tau", torch.tensor(1.0))
        self.register_buffer("mlp_tau", torch.tensor(1.0))
        self.attn_skip = self.mlp_skip = 1.0

    def fold(self) -> None:
        """The reference's residual_add(branch, skip, tau): (tau * branch + skip) /
        sqrt(1 + tau^2)."""
        attn_tau, mlp_tau = float(self.attn_tau), float(self.mlp_tau)
        self.attn_skip = 1 / math.sqrt(1 + attn_tau**2)
        self.mlp_skip = 1 / math.sqrt(1 + mlp_tau**2)
        self.attn.fold(attn_tau * self.attn_skip)
        self.ffn.fold(mlp_tau * self.mlp_skip)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.add(self.ffn(self.norm2(x)), x, alpha=self.mlp_skip)
