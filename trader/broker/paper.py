"""The paper broker and its fill model.

- Market orders fill at once at the real ask (buy) or bid (sell), worsened by the configured
  slippage, and pay the taker fee. A synthetic quote is no price: such an order is rejected.
  A limit order that is marketable when sent fills the same way, never past its limit.
- Resting limit orders fill only when the market trades through them, at their limit (or at
  the bar's open when the bar opened beyond it): a buy when a bar's low is below it or a real
  ask drops below it; a sell when a bar's high is above it or a real bid rises above it. They
  pay the maker fee. Only bars that opened after the order was placed count.
- One bar that reaches both a resting buy and a resting sell of a symbol fills only the one
  nearer the bar's open (the bar is taken to reach it first); the other can fill from the next
  bar on. No round trip ever happens inside one bar.
- A fill is at most `max_volume_share` of the bar's volume (or of the quote's size); the rest
  keeps resting. A symbol whose volume is unknown (`unknown_volume`: a file without one, whose
  bars say 0) is not capped: its orders fill in full, which the backtest says first. Orders
  expire at their `expires_at`: a bar that opened at or after it (or a quote seen then) no
  longer fills the order, however long after that the tick comes (a weekend, a night between
  sessions).
Fees are rounded up to 1e-8 of the cash currency; fill ids are `<client order id>-<n>`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from decimal import ROUND_DOWN, ROUND_UP, Decimal

from trader.broker.amend import cancel_and_replace
from trader.broker.paper_perp import REDUCE_ONLY_REJECTED, PaperPerps
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Bar,
    Fill,
    Instrument,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Quote,
    QuoteSource,
    Side,
    decimal_from_float,
    quote_currency,
)
from trader.domain.execution import Execution
from trader.domain.reconciliation import LedgerBook, ReconcileReport, ReportBuilder

CENT_OF_A_CENT = Decimal("0.00000001")
BPS = Decimal(10_000)


def _against(price: Decimal, side: Side) -> Decimal:
    """Round a fill price to 1e-8, against us: up for a buy, down for a sell."""
    return price.quantize(CENT_OF_A_CENT, ROUND_UP if side is Side.BUY else ROUND_DOWN)


def _expired(order: Order, at: datetime) -> bool:
    return order.expires_at is not None and order.expires_at <= at


class PaperBroker:
    external = False
    name = "paper"

    def __init__(
        self,
        settings: BrokerSettings,
        instruments: Mapping[str, Instrument],
        unknown_volume: Collection[str] = (),
        perps: PaperPerps | None = None,
    ) -> None:
        """`perps`: the perpetuals' margin and reduce-only (`paper_perp`), None for spot."""
        self.settings = settings
        self.perps = perps
        self.instruments = instruments
        self.unknown_volume = frozenset(unknown_volume)
        self._open: dict[str, Order] = {}
        self._fills: dict[str, int] = {}  # fills so far per client order id

    def restore(self, orders: Sequence[Order], fill_counts: Mapping[str, int]) -> None:
        self._fills = dict(fill_counts)
        self._open = {}
        for order in orders:
            if order.status in {OrderStatus.OPEN, OrderStatus.PARTIALLY_FILLED}:
                self._open[order.client_order_id] = order

    def open_orders(self) -> list[Order]:
        return list(self._open.values())

    def close(self) -> None:
        return None

    # --- sending ----------------------------------------------------------------------------

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        sent = order.transition(OrderStatus.SUBMITTED)
        if quote.source is QuoteSource.SYNTHETIC:
            return Execution(sent.transition(OrderStatus.REJECTED))
        touch = quote.ask if order.side is Side.BUY else quote.bid
        marketable = order.type is OrderType.MARKET or (
            order.limit_price is not None
            and (
                touch <= order.limit_price if order.side is Side.BUY else touch >= order.limit_price
            )
        )
        if self.perps is not None:
            at_price = touch if marketable or order.limit_price is None else order.limit_price
            refusal = self.perps.refusal(order, at_price, self._open.values())
            if refusal is not None:
                return Execution(sent.transition(OrderStatus.REJECTED), reason=refusal)
        if not marketable:
            resting = sent.transition(OrderStatus.OPEN)
            self._open[resting.client_order_id] = resting
            return Execution(resting)
        slip = Decimal(1) + order.side.sign * self.settings.slippage_bps / BPS
        price = _against(touch * slip, order.side)
        if order.limit_price is not None:
            price = (
                min(price, order.limit_price)
                if order.side is Side.BUY
                else max(price, order.limit_price)
            )
        amount = self.perps.fillable(sent, sent.amount) if self.perps else sent.amount
        if amount <= 0:
            return Execution(sent.transition(OrderStatus.REJECTED), reason=REDUCE_ONLY_REJECTED)
        fill = self._fill(sent, price, amount, Liquidity.TAKER, at)
        filled = sent.with_fill(fill)
        if amount < sent.amount:  # reduce-only: the rest would open a position
            return Execution(filled.transition(OrderStatus.CANCELED), (fill,), "reduce-only")
        return Execution(filled, (fill,))

    async def cancel(self, order: Order, at: datetime) -> Execution | None:
        current = self._open.pop(order.client_order_id, order)
        if current.status.is_terminal:
            return None
        return Execution(current.transition(OrderStatus.CANCELED))

    async def replace(
        self, order: Order, replacement: Order, quote: Quote, at: datetime
    ) -> list[Execution]:
        return await cancel_and_replace(self, order, replacement, quote, at)

    # --- reconciliation ---------------------------------------------------------------------

    async def reconcile(
        self, book: LedgerBook, at: datetime, *, dry_run: bool = False
    ) -> ReconcileReport:
        """The paper account is the ledger: only the orders resting here can disagree with it
        (they would after a bug, never after a crash, since both come from the ledger)."""
        report = ReportBuilder(at, self.name, dry_run=dry_run)
        # PENDING orders were never sent: the engine holds them, not the broker.
        ledger = {
            o.client_order_id: o for o in book.open_orders if o.status is not OrderStatus.PENDING
        }
        report.checked.append(f"{len(ledger)} open order(s)")
        report.checked.append("cash and positions against the fills")
        for cid in sorted(set(ledger) | set(self._open)):
            mine, theirs = self._open.get(cid), ledger.get(cid)
            if mine is None or theirs is None:
                where = "the broker" if mine is not None else "the ledger"
                report.problems.append(f"order {cid} is open only in {where}")
            elif (mine.status, mine.filled_amount) != (theirs.status, theirs.filled_amount):
                report.problems.append(
                    f"order {cid}: broker {mine.status} filled {mine.filled_amount}, ledger "
                    f"{theirs.status} filled {theirs.filled_amount}"
                )
        return report.build()

    # --- the market moving ------------------------------------------------------------------

    async def on_market(
        self, bars: Sequence[Bar], quotes: Mapping[str, Quote], at: datetime
    ) -> list[Execution]:
        if not self._open:
            return []  # nothing rests here: no bar or quote can fill or expire anything
        executions: list[Execution] = []
        for bar in sorted(bars, key=lambda b: b.start):
            executions += self._on_bar(bar)
        for quote in quotes.values():
            if quote.source is QuoteSource.REAL:
                executions += self._on_quote(quote)
        executions += self._expire(at)
        return executions

    def _on_bar(self, bar: Bar) -> list[Execution]:
        candidates = []
        for order in self._resting(bar.symbol):
            if order.created_at > bar.start or _expired(order, bar.start):
                continue  # placed after this bar opened, or gone before it did
            limit = order.limit_price
            assert limit is not None
            through = bar.low < limit if order.side is Side.BUY else bar.high > limit
            if through:
                candidates.append(order)
        if {o.side for o in candidates} == {Side.BUY, Side.SELL}:
            open_ = decimal_from_float(bar.open)
            nearer = min(candidates, key=lambda o: abs(open_ - (o.limit_price or open_)))
            candidates = [o for o in candidates if o.side is nearer.side]
        executions = []
        for order in candidates:
            assert order.limit_price is not None
            open_ = decimal_from_float(bar.open)
            # A bar that opened beyond the limit filled it at the open, which is better.
            price = (
                min(order.limit_price, open_)
                if order.side is Side.BUY
                else max(order.limit_price, open_)
            )
            available = (
                order.remaining
                if bar.symbol in self.unknown_volume
                else decimal_from_float(bar.volume)
                * decimal_from_float(self.settings.max_volume_share)
            )
            execution = self._fill_resting(order, price, available, bar.end)
            if execution is not None:
                executions.append(execution)
        return executions

    def _on_quote(self, quote: Quote) -> list[Execution]:
        executions = []
        for order in self._resting(quote.symbol):
            limit = order.limit_price
            assert limit is not None
            if order.created_at > quote.at or _expired(order, quote.at):
                continue
            if order.side is Side.BUY and quote.ask < limit:
                size = quote.ask_size
            elif order.side is Side.SELL and quote.bid > limit:
                size = quote.bid_size
            else:
                continue
            share = decimal_from_float(self.settings.max_volume_share)
            available = size * share if size is not None else order.remaining
            execution = self._fill_resting(order, limit, available, quote.at)
            if execution is not None:
                executions.append(execution)
        return executions

    def _fill_resting(
        self, order: Order, price: Decimal, available: Decimal, at: datetime
    ) -> Execution | None:
        amount = min(order.remaining, self.instruments[order.symbol].round_amount(available))
        if self.perps is not None and amount > 0 and self.perps.fillable(order, amount) <= 0:
            del self._open[order.client_order_id]  # reduce-only, and the position is gone
            ended = order.transition(OrderStatus.CANCELED)
            return Execution(ended, reason=REDUCE_ONLY_REJECTED)
        if self.perps is not None:
            amount = self.perps.fillable(order, amount)
        if amount <= 0:
            return None
        fill = self._fill(order, price, amount, Liquidity.MAKER, at)
        filled = order.with_fill(fill)
        if filled.status is OrderStatus.FILLED:
            del self._open[order.client_order_id]
        else:
            self._open[order.client_order_id] = filled
        return Execution(filled, (fill,))

    def _expire(self, at: datetime) -> list[Execution]:
        expired = []
        for order in list(self._open.values()):
            if _expired(order, at):
                del self._open[order.client_order_id]
                expired.append(Execution(order.transition(OrderStatus.EXPIRED)))
        return expired

    def _resting(self, symbol: str) -> list[Order]:
        return [o for o in self._open.values() if o.symbol == symbol]

    def _fill(
        self, order: Order, price: Decimal, amount: Decimal, liquidity: Liquidity, at: datetime
    ) -> Fill:
        bps = (
            self.settings.maker_fee_bps
            if liquidity is Liquidity.MAKER
            else self.settings.taker_fee_bps
        )
        fee = (price * amount * bps / BPS).quantize(CENT_OF_A_CENT, ROUND_UP)
        n = self._fills.get(order.client_order_id, 0) + 1
        self._fills[order.client_order_id] = n
        currency = quote_currency(order.symbol)
        fill = Fill(
            f"{order.client_order_id}-{n}", order.client_order_id, order.symbol, order.side,
            price, amount, fee, currency, liquidity, at,
        )  # fmt: skip
        if self.perps is not None:
            self.perps.filled(fill)
        return fill
