"""The consensus gate: a strategy trades only when every model agrees on the direction of the
median forecast (as the earlier system required of Toto and Kronos)."""

from __future__ import annotations

from trader.strategy.base import Decision, DecisionContext, Strategy, stand_aside


class ConsensusGate:
    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.name = f"{inner.name}+consensus"

    def decide(self, ctx: DecisionContext) -> Decision:
        moves = {m: ctx.median_return(f) * 10_000 for m, f in sorted(ctx.forecasts.items())}
        inputs: dict[str, float | str] = {f"{m}_return_bps": round(v, 3) for m, v in moves.items()}
        if len(moves) < 2:
            why = f"consensus needs two models, has {', '.join(moves) or 'none'}"
            return stand_aside(self.name, ctx, f"no trade: {why}", inputs)
        if not (all(v > 0 for v in moves.values()) or all(v < 0 for v in moves.values())):
            said = ", ".join(f"{m} {v:+.1f} bps" for m, v in moves.items())
            return stand_aside(self.name, ctx, f"no trade: models disagree ({said})", inputs)
        return self.inner.decide(ctx)
