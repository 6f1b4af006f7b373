"""Toto's causal patch scaler: each patch is normalised by the mean and standard deviation of
everything up to the end of that patch (Welford, in float64), clamped to a band around the
context's global scale. Decoding continues the running sums patch by patch, in the same
order of additions as the reference's cumulative sums, so the statistics are the same."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trader.forecast.toto.config import MIN_SCALE


@dataclass(frozen=True)
class ScalerState:
    """Running sums at the end of what has been seen, per series [N, V] (float64)."""

    weight: torch.Tensor  # sum of weights
    value: torch.Tensor  # sum of weight * value
    m2: torch.Tensor  # Welford's sum of squared deviations
    mean: torch.Tensor  # mean at the last position
    bounds: tuple[torch.Tensor, torch.Tensor]  # allowed scale range, from the context

    def repeat(self, times: int) -> ScalerState:
        """The same state for `times` sample paths per series (series-major)."""

        def rep(t: torch.Tensor) -> torch.Tensor:
            return t.repeat_interleave(times, dim=0)

        return ScalerState(
            rep(self.weight), rep(self.value), rep(self.m2), rep(self.mean),
            (rep(self.bounds[0]), rep(self.bounds[1])),
        )  # fmt: skip


def _running(
    x: torch.Tensor, w: torch.Tensor, start: ScalerState | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cumulative weight, mean and m2 at each position, continuing `start` if given."""

    def cumsum(t: torch.Tensor, total: torch.Tensor | None) -> torch.Tensor:
        if total is None:
            return t.cumsum(-1)
        # Prepending the running total keeps the additions in the reference's order.
        return torch.cat([total.unsqueeze(-1), t], dim=-1).cumsum(-1)[..., 1:]

    cum_w = cumsum(w, None if start is None else start.weight)
    cum_v = cumsum(w * x, None if start is None else start.value)
    means = cum_v / cum_w.clamp_min(1.0)
    previous = (
        torch.zeros_like(means) if start is None else start.mean.unsqueeze(-1).expand_as(means)
    )
    shifted = torch.cat([previous[..., :1], means[..., :-1]], dim=-1)
    increment = (x - shifted) * (x - means) * w
    m2 = cumsum(increment, None if start is None else start.m2)
    return cum_w, means, m2, cum_v


def _patch_stats(
    cum_w: torch.Tensor,
    means: torch.Tensor,
    m2: torch.Tensor,
    bounds: tuple[torch.Tensor, torch.Tensor] | None,
    patch: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    variance = m2 / (cum_w.clamp_min(1.0) - 1.0).clamp_min(1.0)  # Bessel
    scale = torch.sqrt(variance + MIN_SCALE)
    if bounds is not None:
        scale = torch.clamp(scale, min=bounds[0].unsqueeze(-1), max=bounds[1].unsqueeze(-1))
    # Every step of a patch uses the statistics at the patch's last step.
    shape = (*means.shape[:-1], means.shape[-1] // patch, patch)
    return means.reshape(shape)[..., -1], scale.reshape(shape)[..., -1]


def scale_context(
    series: torch.Tensor, valid: torch.Tensor, patch: int, *, stabilize: bool, exponent: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ScalerState]:
    """Scaled series, per-patch loc and scale [N, V, patches] (in the series' dtype, as the
    reference hands them on), and the state to decode from. `valid` is False on left padding."""
    x = series.to(torch.float64)
    w = valid.to(torch.float64)
    cum_w, means, m2, cum_v = _running(x, w, None)
    bounds = None
    if stabilize:
        total = w.sum(-1, keepdim=True).clamp_min(1.0)
        global_mean = torch.nan_to_num((w * x).sum(-1, keepdim=True) / total)
        global_var = (((x - global_mean) * w * w) ** 2).sum(-1, keepdim=True) / total
        global_scale = torch.sqrt(global_var + MIN_SCALE).squeeze(-1)
        low = torch.maximum(
            torch.full_like(global_scale, MIN_SCALE), global_scale * 10.0**-exponent
        )
        bounds = (low, global_scale * 10.0**exponent)
    loc, scale = _patch_stats(cum_w, means, m2, bounds, patch)
    state = ScalerState(
        cum_w[..., -1], cum_v[..., -1], m2[..., -1], means[..., -1],
        bounds if bounds is not None else _unbounded(loc),
    )  # fmt: skip
    loc, scale = loc.to(series.dtype), scale.to(series.dtype)
    return _apply(series, loc, scale, patch), loc, scale, state


def scale_patch(
    values: torch.Tensor, state: ScalerState, patch: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ScalerState]:
    """The same for one new patch [N, V, patch] of (sampled) values, all of weight 1."""
    x = values.to(torch.float64)
    w = torch.ones_like(x)
    cum_w, means, m2, cum_v = _running(x, w, state)
    loc, scale = _patch_stats(cum_w, means, m2, state.bounds, patch)
    new_state = ScalerState(
        cum_w[..., -1], cum_v[..., -1], m2[..., -1], means[..., -1], state.bounds
    )
    loc, scale = loc.to(values.dtype), scale.to(values.dtype)
    return _apply(values, loc, scale, patch), loc, scale, new_state


def _unbounded(like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    shape = like.shape[:-1]
    return (
        torch.full(shape, MIN_SCALE, dtype=like.dtype, device=like.device),
        torch.full(shape, torch.inf, dtype=like.dtype, device=like.device),
    )


def _apply(
    series: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor, patch: int
) -> torch.Tensor:
    return (series - loc.repeat_interleave(patch, -1)) / scale.repeat_interleave(patch, -1)
