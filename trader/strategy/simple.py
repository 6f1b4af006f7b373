"""simple: long when the median forecast return is positive; short when negative, if allowed.
Costs are not its concern: the risk engine's minimum edge after fees and spread still applies."""

from __future__ import annotations

from trader.domain import Direction
from trader.strategy.base import Decision, DecisionContext, Outline, Outlook, outlined


class SimpleStrategy:
    name = "simple"

    def decide(self, ctx: DecisionContext) -> Decision:
        return outlined(self.name, ctx, self.outline(ctx.outlook))

    def outline(self, outlook: Outlook) -> Outline:
        move_bps = outlook.median_return() * 10_000
        inputs: dict[str, float | str] = {
            "median_return_bps": round(move_bps, 3),
            "model": outlook.forecast.model,
        }
        if move_bps > 0:
            reason = f"median forecast return {move_bps:+.1f} bps > 0"
            return Outline(Direction.LONG, reason, inputs, move_bps)
        if move_bps < 0 and outlook.allow_short:
            reason = f"median forecast return {move_bps:+.1f} bps < 0"
            return Outline(Direction.SHORT, reason, inputs, -move_bps)
        why = "long only" if move_bps < 0 else "no move"
        reason = f"no trade: median forecast return {move_bps:+.1f} bps ({why})"
        return Outline(Direction.FLAT, reason, inputs, None)
