"""Sampling Toto's mixture of Student-Ts, with an explicit generator (never the global RNG)."""

from __future__ import annotations

import torch

from trader.forecast.toto.model import Head


def sample_mixture(head: Head, generator: torch.Generator) -> torch.Tensor:
    """One draw per distribution in `head` (shape [..., K] -> [...]): a component by the
    Gumbel-max trick, then a Student-T draw from it, as torch's StudentT draws
    (normal / sqrt(chi-square / df))."""
    logits = head.logits.float()
    uniform = torch.rand(logits.shape, generator=generator, device=logits.device)
    gumbel = -torch.log(-torch.log(uniform.clamp(1e-20, 1.0 - 1e-7)))
    component = (logits + gumbel).argmax(dim=-1, keepdim=True)
    df = head.df.float().gather(-1, component).squeeze(-1)
    loc = head.loc.float().gather(-1, component).squeeze(-1)
    scale = head.scale.float().gather(-1, component).squeeze(-1)
    normal = torch.randn(df.shape, generator=generator, device=df.device)
    chi2 = 2.0 * torch._standard_gamma(df / 2.0, generator=generator)
    return loc + scale * normal * torch.rsqrt(chi2 / df)


def replace_extreme(values: torch.Tensor) -> torch.Tensor:
    """NaN, infinite and absurdly large draws become 0, as the reference does."""
    bad = ~torch.isfinite(values) | (values.abs() >= torch.finfo(values.dtype).max / 2)
    return torch.where(bad, torch.zeros_like(values), values)
