"""simple: long when the median forecast return is positive; short when negative, if allowed.
Costs are not its concern: the risk engine's minimum edge after fees and spread still applies."""

from __future__ import annotations

from trader.domain import Direction
from trader.strategy.base import Decision, DecisionContext, at_market, stand_aside


class SimpleStrategy:
    name = "simple"

    def decide(self, ctx: DecisionContext) -> Decision:
        move_bps = ctx.median_return() * 10_000
        inputs: dict[str, float | str] = {
            "median_return_bps": round(move_bps, 3),
            "model": ctx.forecast.model,
        }
        if move_bps > 0:
            reason = f"median forecast return {move_bps:+.1f} bps > 0"
            return at_market(self.name, ctx, Direction.LONG, reason, inputs, move_bps)
        if move_bps < 0 and ctx.allow_short:
            reason = f"median forecast return {move_bps:+.1f} bps < 0"
            return at_market(self.name, ctx, Direction.SHORT, reason, inputs, -move_bps)
        why = "long only" if move_bps < 0 else "no move"
        return stand_aside(
            self.name, ctx, f"no trade: median forecast return {move_bps:+.1f} bps ({why})", inputs
        )
