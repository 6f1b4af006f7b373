"""Where a strategy may open a short, and the gate that refuses one where it may not.

`strategy.allow_short` says whether the strategies short at all (default false, for perps too:
shorting is the user's choice, and a setting that changed its default with `market.kind` would
surprise). Where it is on, the instrument decides:
- a perpetual (`market.kind = "perp"`) shorts: a sell opens a short position on margin;
- a stock on Alpaca keeps Alpaca's own rules (shortable and easy to borrow, whole shares, a
  margin account: `trader doctor` checks them, Alpaca refuses what breaks them);
- spot crypto on a ccxt exchange cannot be shorted: a spot sell needs the coin held, and the
  exchange refuses it. The gate turns the short into "no trade" with that reason, and keeps
  every order that only reduces a long (a take-profit sell) or covers. A live account carries
  the gate (`account_short_refusal`); paper runs and backtests of spot model a short as they
  always have, so their figures stay as they were, and say once that the venue would refuse
  it (`modelled_short_caveat`: the daemon's first lines, a backtest's warnings), so those
  figures are not read as tradeable ones.

The gate wraps the strategy (outermost, over the consensus gate), so a strategy's own rules
stay as they are; an outlined strategy stays outlined, so a backtest's quiet stretches take
the same decisions as its ticks.
"""

from __future__ import annotations

from dataclasses import replace

from trader.config.schema import Settings
from trader.domain import Direction
from trader.strategy.base import (
    AtMarket,
    Decision,
    DecisionContext,
    Outline,
    Outlined,
    Outlook,
    RestingLimits,
    Strategy,
    outlined,
    stand_aside,
)

SPOT_CRYPTO = (
    "spot crypto cannot be sold short (a spot sell needs the coin held; the exchange refuses "
    'it): a perpetual can, market.kind = "perp"'
)


def short_refusal(*, kind: str, venue: str) -> str | None:
    """Why the instrument of `kind` ("spot" or "perp") on `venue` ("ccxt" or "alpaca") cannot
    be shorted; None where it can (under the venue's own rules)."""
    if kind == "perp" or venue == "alpaca":
        return None
    return SPOT_CRYPTO


def account_short_refusal(settings: Settings) -> str | None:
    """The refusal the engine's strategies carry: a live account on spot crypto's. Paper
    runs and backtests of spot go on modelling a short as they always have (their figures stay
    as they were); a live spot exchange would refuse the sell, so it is refused before."""
    if settings.broker.mode != "live":
        return None
    return short_refusal(kind=settings.market.kind, venue=settings.exchange.venue)


def modelled_short_caveat(settings: Settings) -> str | None:
    """The line a paper run or a backtest says once where it models shorts the venue would
    refuse (spot crypto with `strategy.allow_short` on); None elsewhere (a live account refuses
    them before: `account_short_refusal`)."""
    if not settings.strategy.allow_short or settings.broker.mode == "live":
        return None
    refusal = short_refusal(kind=settings.market.kind, venue=settings.exchange.venue)
    if refusal is None:
        return None
    return (
        "shorts are modelled here (strategy.allow_short) but a live account would refuse them: "
        f"{refusal}; the short trades in these figures could not be made"
    )


class ShortGate:
    """`inner`, with every decision that would open or add to a short refused for `refusal`."""

    def __init__(self, inner: Strategy, refusal: str) -> None:
        self.inner, self.refusal = inner, refusal
        self.name = inner.name

    def decide(self, ctx: DecisionContext) -> Decision:
        decision = self.inner.decide(ctx)
        plan = decision.plan
        if isinstance(plan, AtMarket):
            if plan.direction is not Direction.SHORT:
                return decision
            why = f"no trade: short refused, {self.refusal} ({decision.signal.reason})"
            return stand_aside(self.name, ctx, why, decision.signal.inputs)
        return self._resting(ctx, decision, plan)

    def _resting(self, ctx: DecisionContext, decision: Decision, plan: RestingLimits) -> Decision:
        """A resting sell stays when it only reduces a long; a sell entry (flat or short) goes."""
        if plan.sell_price is None or ctx.position > 0:
            return decision
        signal = decision.signal
        if plan.buy_price is None:
            why = f"no trade: short refused, {self.refusal} ({signal.reason})"
            return stand_aside(self.name, ctx, why, signal.inputs)
        kept = RestingLimits(plan.buy_price, None, plan.expires_at)
        reason = f"{signal.reason}; the sell entry refused: {self.refusal}"
        direction = Direction.SHORT if ctx.position < 0 else Direction.LONG  # a cover, or a buy
        signal = replace(signal, direction=direction, reason=reason)
        return Decision(signal, kept, decision.edge_bps)


class OutlinedShortGate(ShortGate):
    """The gate over an outlined strategy: outlined itself."""

    inner: Outlined

    def __init__(self, inner: Outlined, refusal: str) -> None:
        super().__init__(inner, refusal)

    def decide(self, ctx: DecisionContext) -> Decision:
        return outlined(self.name, ctx, self.outline(ctx.outlook))

    def outline(self, outlook: Outlook) -> Outline:
        wanted = self.inner.outline(outlook)
        if wanted.direction is not Direction.SHORT:
            return wanted
        why = f"no trade: short refused, {self.refusal} ({wanted.reason})"
        return Outline(Direction.FLAT, why, wanted.inputs, None)


def gate_shorts(strategy: Strategy, refusal: str | None) -> Strategy:
    """`strategy` behind a short gate for `refusal`; itself when shorts are allowed."""
    if refusal is None:
        return strategy
    if isinstance(strategy, Outlined):
        return OutlinedShortGate(strategy, refusal)
    return ShortGate(strategy, refusal)
