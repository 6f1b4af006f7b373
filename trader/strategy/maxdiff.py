"""maxdiff: rest a buy near the forecast low and a sell near the forecast high for the horizon.

Flat: a buy at the low (and, where shorting is allowed, a sell at the high). Long: the sell at
the high is the take-profit. Short: the buy at the low covers. Orders expire at the horizon's
end and are placed afresh each tick; they fill only when the market trades through them. Its
limits are chosen from the forecast of the period it trades, never tuned on that period.

A venue that forbids resting both sides of one symbol (`both_sides=False`: Alpaca, whose
wash-trade check refuses an order opposite a resting one, HTTP 422 code 42210000) gets one
side at a time. Holding, that is already so: only the side that reduces the position rests.
Flat with both entries in reach, the side the median forecast favours rests: each entry
profits only when the market then reaches the other extreme, and the expected drift carries
it there after a buy when the median is above the last close, after a sell when below; no
drift: the buy (a short costs borrow, and Alpaca shorts whole shares only). Alpaca's complex
orders do not express the pair: an OCO's two legs are both exits on one side (a take-profit
limit and a stop-loss stop), and a bracket or OTO has one entry whose exits follow it, not a
buy entry and a sell entry at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from trader.domain import Direction, Signal, decimal_from_float
from trader.strategy.base import Decision, DecisionContext, RestingLimits, stand_aside


class MaxDiffStrategy:
    name = "maxdiff"

    def __init__(
        self, entry_quantile: float = 0.2, exit_quantile: float = 0.8, *, both_sides: bool = True
    ) -> None:
        """`both_sides`: the venue lets a symbol rest a buy and a sell at once."""
        if not 0 < entry_quantile < exit_quantile < 1:
            raise ValueError("maxdiff needs 0 < entry quantile < exit quantile < 1")
        self.entry_quantile, self.exit_quantile = entry_quantile, exit_quantile
        self.both_sides = both_sides

    def decide(self, ctx: DecisionContext) -> Decision:
        forecast = ctx.forecast
        if not {"low", "high"} <= set(forecast.quantiles):
            return stand_aside(self.name, ctx, "no trade: the forecast has no high/low", {})
        steps = range(forecast.steps)
        low = min(forecast.quantile("low", self.entry_quantile, k) for k in steps)
        high = max(forecast.quantile("high", self.exit_quantile, k) for k in steps)
        buy, sell = decimal_from_float(low), decimal_from_float(high)
        range_bps = (high - low) / low * 10_000
        costs_bps = 2 * ctx.costs.maker_fee_bps
        inputs: dict[str, float | str] = {
            "buy_limit": low,
            "sell_limit": high,
            "range_bps": round(range_bps, 3),
            "costs_bps": costs_bps,
            "model": forecast.model,
        }
        expires = ctx.valid_until()
        if ctx.position:
            return self._exit(ctx, RestingLimits(buy, sell, expires), inputs)
        if range_bps <= costs_bps:
            why = f"forecast range {range_bps:.1f} bps does not pay maker fees {costs_bps:.1f} bps"
            return stand_aside(self.name, ctx, f"no trade: {why}", inputs)
        entry_buy = buy if buy < ctx.quote.bid else None
        entry_sell = sell if ctx.allow_short and sell > ctx.quote.ask else None
        if entry_buy is None and entry_sell is None:
            why = "the forecast range does not straddle the market"
            return stand_aside(self.name, ctx, f"no trade: {why}", inputs)
        why = ""
        if entry_buy is not None and entry_sell is not None and not self.both_sides:
            drift_bps = ctx.median_return() * 10_000
            inputs["median_return_bps"] = round(drift_bps, 3)
            if drift_bps < 0:
                entry_buy = None
            else:
                entry_sell = None
            favoured = "no drift" if drift_bps == 0 else f"median {drift_bps:+.1f} bps"
            why = f" (one side at a time, as the venue requires: {favoured})"
        parts = [f"a buy at {low:.6g}"] if entry_buy else []
        parts += [f"a sell at {high:.6g}"] if entry_sell else []
        limits = RestingLimits(entry_buy, entry_sell, expires)
        reason = "rest " + " and ".join(parts) + why
        return self._rest(ctx, _direction(limits), limits, reason, inputs, range_bps)

    def _exit(
        self, ctx: DecisionContext, both: RestingLimits, inputs: Mapping[str, float | str]
    ) -> Decision:
        """Holding: the opposite limit takes the profit; past it already, leave at market."""
        buy, sell = both.buy_price, both.sell_price
        assert buy is not None
        assert sell is not None
        if ctx.position > 0:
            if sell <= ctx.quote.bid:
                return stand_aside(self.name, ctx, "forecast high is below the bid: exit", inputs)
            limits = RestingLimits(None, sell, both.expires_at)
            reason = "take profit at the forecast high"
            return self._rest(ctx, Direction.LONG, limits, reason, inputs)
        if buy >= ctx.quote.ask:
            return stand_aside(self.name, ctx, "forecast low is above the ask: cover", inputs)
        limits = RestingLimits(buy, None, both.expires_at)
        return self._rest(ctx, Direction.SHORT, limits, "cover at the forecast low", inputs)

    def _rest(
        self,
        ctx: DecisionContext,
        direction: Direction,
        limits: RestingLimits,
        reason: str,
        inputs: Mapping[str, float | str],
        edge_bps: float | None = None,
    ) -> Decision:
        signal = Signal(self.name, ctx.symbol, ctx.at, direction, reason, inputs)
        return Decision(signal, limits, edge_bps)


def _direction(limits: RestingLimits) -> Direction:
    """Where the entries lead: long from a buy alone, short from a sell alone, flat between
    the two."""
    if limits.sell_price is None:
        return Direction.LONG
    return Direction.SHORT if limits.buy_price is None else Direction.FLAT
