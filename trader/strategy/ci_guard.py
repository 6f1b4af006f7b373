"""ci_guard: trade only when the forecast clears its own uncertainty band and the costs.

The band is the spread between two forecast quantiles (by default 0.4 and 0.6) at the horizon,
times a multiplier; the costs are taker fees both ways plus the quoted spread. A quote whose
spread is unknown (synthetic) never passes: an unknown spread is not a zero spread.
"""

from __future__ import annotations

from trader.domain import Direction
from trader.strategy.base import Decision, DecisionContext, Outline, Outlook, outlined


class CiGuardStrategy:
    name = "ci_guard"

    def __init__(self, lower: float = 0.4, upper: float = 0.6, multiplier: float = 1.0) -> None:
        if not 0 < lower < 0.5 < upper < 1:
            raise ValueError("ci_guard needs quantiles lower < 0.5 < upper")
        self.lower, self.upper, self.multiplier = lower, upper, multiplier

    def decide(self, ctx: DecisionContext) -> Decision:
        return outlined(self.name, ctx, self.outline(ctx.outlook))

    def outline(self, outlook: Outlook) -> Outline:
        forecast, last_close = outlook.forecast, outlook.last_close
        move_bps = outlook.median_return() * 10_000
        low = forecast.quantile("close", self.lower)
        high = forecast.quantile("close", self.upper)
        band_bps = (high - low) / last_close * 10_000 * self.multiplier
        inputs: dict[str, float | str] = {
            "median_return_bps": round(move_bps, 3),
            "band_bps": round(band_bps, 3),
            "model": forecast.model,
        }
        spread_bps = outlook.quote.spread_bps
        if spread_bps is None:
            return Outline(
                Direction.FLAT, "no trade: spread unknown (synthetic quote)", inputs, None
            )
        costs_bps = 2 * outlook.costs.taker_fee_bps + spread_bps
        inputs["costs_bps"] = round(costs_bps, 3)
        hurdle = max(band_bps, costs_bps)
        cleared = (
            f"forecast {move_bps:+.1f} bps clears band {band_bps:.1f} and costs {costs_bps:.1f}"
        )
        if move_bps > hurdle:
            return Outline(Direction.LONG, cleared, inputs, move_bps)
        if -move_bps > hurdle and outlook.allow_short:
            return Outline(Direction.SHORT, cleared, inputs, -move_bps)
        if abs(move_bps) <= band_bps:
            why = f"forecast {move_bps:+.1f} bps inside its band {band_bps:.1f} bps"
        elif abs(move_bps) <= costs_bps:
            why = f"forecast {move_bps:+.1f} bps does not cover costs {costs_bps:.1f} bps"
        else:
            why = f"forecast {move_bps:+.1f} bps is short-side and shorting is off"
        return Outline(Direction.FLAT, f"no trade: {why}", inputs, None)
