"""Quantile forecasts from Toto 2.0, as the reference's `Toto2Model.forecast` makes them.

The model predicts the next patch from each position, so the context is followed by
placeholder patches (no values, all flagged missing) and the outputs at the last context
patch and all placeholders but the last are the forecast. A horizon longer than one decode
block goes on block by block: the block's median is written into the series as if observed,
the causal scaler runs again, and only the new patches pass through the network, attending
to the context and earlier medians in the static cache. Missing values are flags beside each
patch's values; patches with no observation at all are kept out of the attention of
observed ones (as group id -1, as the reference does).

Every shape and every loop bound is a Python integer known before the call: nothing here
reads a tensor back to the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trader.forecast.toto2.config import KNOTS, MIN_SCALE
from trader.forecast.toto2.model import StaticCache, Toto2Model

MEDIAN = KNOTS.index(0.5)

Runner = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Inputs:
    """target [B, V, T] (T a whole number of patches), observed [B, V, T] (bool), series
    ids [B, V] (variates with one id attend to each other), and whether any context patch
    has no observation at all (the reference's has_missing_values)."""

    target: torch.Tensor
    observed: torch.Tensor
    series: torch.Tensor
    missing: bool


def causal_scale(
    data: torch.Tensor, observed: torch.Tensor, patch: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per patch [B, V, patches]: the mean and standard deviation (Bessel) of the observed
    values up to the patch's end, in float64 (Welford), floored at MIN_SCALE."""
    x = data.to(torch.float64)
    counts = observed.cumsum(dim=-1).clamp_min(1)
    mean = (x * observed).cumsum(dim=-1) / counts
    before = torch.cat([torch.zeros_like(mean[..., :1]), mean[..., :-1]], dim=-1)
    m2 = ((x - before) * (x - mean) * observed).cumsum(dim=-1)
    std = torch.sqrt(m2 / (counts - 1).clamp(min=1)).clamp(min=MIN_SCALE)
    last = slice(patch - 1, None, patch)
    return mean[..., last].to(data.dtype), std[..., last].to(data.dtype)


def _normalised(
    values: torch.Tensor, observed: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """asinh((x - loc) / scale) where observed, else 0; loc and scale per patch."""
    patches = torch.unflatten(values, -1, (loc.shape[-1], -1))
    raw = ((patches - loc.unsqueeze(-1)) / scale.unsqueeze(-1)).flatten(-2)
    return torch.where(observed, raw, torch.zeros_like(raw)).asinh()


def _finite(values: torch.Tensor) -> torch.Tensor:
    """+inf becomes the largest finite value of its patch, -inf the smallest (the reference's
    _clamp_nonfinite)."""
    top = torch.where(values.isfinite(), values, -torch.inf).amax(dim=-1, keepdim=True)
    bottom = torch.where(values.isfinite(), values, torch.inf).amin(dim=-1, keepdim=True)
    values = torch.where(values == torch.inf, top, values)
    return torch.where(values == -torch.inf, bottom, values)


def _variate_mask(groups: torch.Tensor) -> torch.Tensor | None:
    """[B, V, L] group ids -> [B * L, 1, V, V]: variates attend where their ids match."""
    if groups.shape[1] == 1:
        return None
    ids = groups.transpose(1, 2)  # [B, L, V]
    same = ids.unsqueeze(-1) == ids.unsqueeze(-2)
    return same.reshape(-1, 1, *same.shape[-2:])


@dataclass
class _Series:
    """The series being forecast: context, then the horizon's patches (zeros, unobserved,
    until a block's median fills them), and the group id of every patch."""

    target: torch.Tensor  # [B, V, T + horizon patches]
    observed: torch.Tensor
    groups: torch.Tensor  # [B, V, patches]: the series id, -1 for unobserved context patches
    context: int  # patches of context
    patch: int

    @classmethod
    def of(cls, inputs: Inputs, patches: int, width: int, patch: int) -> _Series:
        b, v, t = inputs.target.shape
        device = inputs.target.device
        target = torch.cat([inputs.target, inputs.target.new_zeros(b, v, patches * patch)], -1)
        observed = torch.cat(
            [
                inputs.observed[..., :-patch],
                torch.ones(b, v, patch, dtype=torch.bool, device=device),  # the last one counts
                torch.zeros(b, v, patches * patch, dtype=torch.bool, device=device),
            ],
            dim=-1,
        )
        context = t // patch
        seen = torch.unflatten(observed[..., :t], -1, (context, patch)).any(dim=-1)
        groups = inputs.series.unsqueeze(-1).expand(b, v, width)
        groups = torch.cat(
            [torch.where(seen, groups[..., :context], -1), groups[..., context:]], dim=-1
        )
        return cls(target, observed, groups, context, patch)

    def embedded(
        self, model: Toto2Model, patches: slice, loc: torch.Tensor, scale: torch.Tensor
    ) -> torch.Tensor:
        """Patches `patches` (indices into the whole series) scaled and embedded."""
        steps = slice(patches.start * self.patch, patches.stop * self.patch)
        values, observed = self.target[..., steps], self.observed[..., steps]
        scaled = _normalised(values, observed, loc[..., patches], scale[..., patches])
        return model.embed(scaled, observed)


def forecast_knots(
    model: Toto2Model,
    inputs: Inputs,
    horizon: int,
    decode_block: int | None = None,
    runner: Runner | None = None,
) -> torch.Tensor:
    """The nine quantile knots [9, B, V, horizon] after `inputs`. `decode_block` (steps, a
    whole number of patches; None or 0: one pass) bounds how many patches one pass predicts.
    `runner` runs `model.run` (a compiled version, say)."""
    run = runner or model.run
    p = model.config.patch_size
    b, v, t = inputs.target.shape
    if t % p:
        raise ValueError(f"context of {t} steps is not a whole number of {p}-step patches")
    if decode_block and decode_block % p:
        raise ValueError(f"decode block {decode_block} is not a multiple of the patch ({p})")
    patches = math.ceil(horizon / p)
    size = min(decode_block // p, patches) if decode_block else patches
    series = _Series.of(inputs, patches, max(t // p + patches, 2 * size), p)
    context = series.context
    cache, valid = None, None
    if size < patches:  # the last pass reads up to the horizon's end
        cache = StaticCache.allocate(model.config, b * v, context + patches, inputs.target)
        valid = inputs.observed.new_ones(b * v, context + patches)
        valid[:, : context + size] = (series.groups[..., : context + size] != -1).flatten(0, 1)
    knots = inputs.target.new_zeros(len(KNOTS), b, v, patches, p)
    done = cached = 0
    embedded_context = None
    while done < patches:
        block = min(size, patches - done)
        loc, scale = causal_scale(series.target, series.observed, p)
        if embedded_context is None:
            embedded_context = series.embedded(model, slice(0, context), loc, scale)
        ahead = slice(context + done, context + done + block)
        placeholders = series.embedded(model, ahead, loc, scale)
        if done == 0:
            x, ids, start = torch.cat([embedded_context, placeholders], -2), context + block, 0
        else:
            start = context + done - size
            medians = series.embedded(model, slice(start, context + done), loc, scale)
            # The reference's decode passes take the group ids of the first patches.
            x, ids = torch.cat([medians, placeholders], dim=-2), size + block
        groups = series.groups[..., :ids]
        mask = _time_mask(groups, inputs.missing, valid, cached, x.shape[-2])
        out = run(x, start, block, mask, _variate_mask(groups), cache, cached)
        if cache is not None:
            cached += x.shape[-2] - block
        real = _finite(out.sinh() * scale[..., ahead, None] + loc[..., ahead, None])
        real = real.sort(dim=0).values
        knots[..., done : done + block, :] = real
        done += block
        if done < patches:
            steps = slice(ahead.start * p, ahead.stop * p)
            series.target[..., steps] = real[MEDIAN].flatten(-2)
            series.observed[..., steps] = True
    return knots.flatten(-2)[..., :horizon]


def _time_mask(
    ids: torch.Tensor, missing: bool, valid: torch.Tensor | None, cached: int, length: int
) -> torch.Tensor | None:
    """The time layers' mask [B * V, 1, L, cached + L] (True: attend), or None for plain
    causal attention."""
    if cached:  # a decode pass: causal over the cache, skipping unobserved context patches
        assert valid is not None
        end = cached + length
        causal = torch.ones(length, end, dtype=torch.bool, device=ids.device).tril(cached)
        return causal & valid[:, None, None, :end]
    if not missing:
        return None
    flat = ids.flatten(0, 1)  # [B * V, L]
    causal = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()
    return (causal & (flat.unsqueeze(-1) == flat.unsqueeze(-2))).unsqueeze(1)
