"""The daemon's running shortfall against its own cost model: per fill, what it paid beside what
the configured costs (the ones a backtest of these settings charges) say it should have paid,
in basis points, so that a dashboard shows the ratio live and an alert fires when the venue
costs much more than the backtest assumes.

Per fill, against the quote its order was decided on (mid m, touch t: the ask for a buy, the
bid for a sell; the quotes the tick priced with, which the ledger records with the tick):

    part      realised                       modelled
    spread    (t - m) / m, half the spread   market.replay_spread_bps / 2 (a backtest's quote)
    slippage  side * (price - t) / t         broker.slippage_bps
    fees      fee / notional                 broker.taker_fee_bps or maker_fee_bps

Counters only grow: what a fill gained on a part (a price better than the touch, a fee rebate)
is its realised `improvement`, and the realised cost is spread + slippage + fees - improvement.
Spread and slippage are those of fills that took liquidity (taker: what the model's spread and
slippage apply to); a resting order's maker fill pays neither in the model and counts for fees
only. Each fill counts once (the mean is over fills, as `trader shortfall` measures them).
A fill whose order's decision quote is not known here (an order placed before a restart, or
decided on a synthetic quote) is counted as unpriced and adds to no cost. The sums are
counters: the ratio of their increases over any window is the realised cost against the
modelled one, whatever the bar size and whether the market trades 24/7 or in sessions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter

from trader.config.schema import Settings
from trader.domain import Fill, Liquidity, Order, Quote, QuoteSource, Side

# A counter only grows: what a fill gained (a price better than the touch, a fee rebate) is
# counted apart, and the realised cost is spread + slippage + fees - improvement (the model
# has no improvement: its series stays 0).
PARTS = ("spread", "slippage", "fees", "improvement")
REMEMBERED = 10_000  # decision quotes kept, newest; far more than orders open at once
KINDS = ("realised", "modelled")
BPS = 10_000


@dataclass(frozen=True)
class CostModel:
    """The configured costs, in bps: what a backtest of these settings charges a fill."""

    spread_bps: float  # the whole spread; a crossing pays half of it
    slippage_bps: float
    taker_fee_bps: float
    maker_fee_bps: float

    @classmethod
    def of(cls, settings: Settings) -> CostModel:
        broker = settings.broker
        return cls(
            float(settings.market.replay_spread_bps),
            float(broker.slippage_bps),
            float(broker.taker_fee_bps),
            float(broker.maker_fee_bps),
        )


def fill_costs(fill: Fill, quote: Quote, model: CostModel) -> dict[tuple[str, str], float]:
    """(kind, part) -> bps of one fill against the quote its order was decided on (the module's
    table). Every value is >= 0: what the fill gained on a part (a price better than the touch,
    a fee rebate) is its realised `improvement`."""
    notional = fill.notional
    maker = fill.liquidity is Liquidity.MAKER
    realised = {"fees": float(fill.quote_fee / notional) * BPS if notional else 0.0}
    costs = {("modelled", "fees"): model.maker_fee_bps if maker else model.taker_fee_bps}
    if not maker:
        touch = quote.ask if fill.side is Side.BUY else quote.bid
        sign = fill.side.sign
        realised["spread"] = float(sign * (touch - quote.mid) / quote.mid) * BPS
        realised["slippage"] = float(sign * (fill.price - touch) / touch) * BPS
        costs["modelled", "spread"] = model.spread_bps / 2
        costs["modelled", "slippage"] = model.slippage_bps
    for part, bps in realised.items():
        costs["realised", part] = max(bps, 0.0)
    costs["realised", "improvement"] = sum(max(-bps, 0.0) for bps in realised.values())
    return costs


class FillCostMetrics:
    """`trader_fill_cost_bps_total{symbol,kind,part}`, the fills priced and those that could
    not be. Orders are told as the ticks place them (with the tick's quotes), fills as they
    are booked, by a tick or between ticks."""

    def __init__(self, registry: CollectorRegistry, symbols: Sequence[str]) -> None:
        self.model: CostModel | None = None
        self._decided: dict[str, Quote] = {}  # client order id -> the quote it was decided on
        self.cost = Counter(
            "trader_fill_cost_bps_total", "Sum over fills of each fill's cost in bps against "
            "the quote its order was decided on: realised, and what the configured cost model "
            "charges (modelled); spread and slippage of taker fills, fees of every fill",
            ["symbol", "kind", "part"], registry=registry,
        )  # fmt: skip
        self.fills = Counter(
            "trader_fill_cost_fills_total",
            "Fills whose costs are in trader_fill_cost_bps_total",
            ["symbol", "liquidity"], registry=registry,
        )  # fmt: skip
        self.unpriced = Counter(
            "trader_fill_cost_unpriced_total", "Fills whose order's decision quote is unknown "
            "here (placed before a restart, or on a synthetic quote): in no cost",
            ["symbol"], registry=registry,
        )  # fmt: skip
        for symbol in symbols:
            for kind in KINDS:
                for part in PARTS:
                    self.cost.labels(symbol, kind, part)
            for liquidity in Liquidity:
                self.fills.labels(symbol, liquidity.value)
            self.unpriced.labels(symbol)

    def use_model(self, model: CostModel) -> None:
        self.model = model

    def decided(self, at: datetime, orders: Iterable[Order], quotes: dict[str, Quote]) -> None:
        """A tick's order changes: the orders it placed (created at its time) remember the
        quote it priced them with."""
        for order in orders:
            quote = quotes.get(order.symbol)
            if order.created_at != at or quote is None or quote.source is QuoteSource.SYNTHETIC:
                continue
            self._decided.setdefault(order.client_order_id, quote)
        while len(self._decided) > REMEMBERED:
            del self._decided[next(iter(self._decided))]

    def booked(self, fills: Iterable[Fill]) -> None:
        for fill in fills:
            quote = self._decided.get(fill.client_order_id)
            if quote is None or self.model is None or fill.notional <= 0:
                self.unpriced.labels(fill.symbol).inc()
                continue
            for (kind, part), bps in fill_costs(fill, quote, self.model).items():
                self.cost.labels(fill.symbol, kind, part).inc(bps)
            self.fills.labels(fill.symbol, fill.liquidity.value).inc()

    def settled(self, orders: Iterable[Order]) -> None:
        """Orders that reached a final status: their quotes are no longer needed."""
        for order in orders:
            if order.status.is_terminal:
                self._decided.pop(order.client_order_id, None)
