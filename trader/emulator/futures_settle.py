"""What happens to a futures account as the replayed time passes: resting orders fill and
conditional orders trigger on the bars, funding settles at each recorded funding time, and
positions are liquidated on the mark price.

Events are taken in time order; at equal times a bar's fills come first, then the check of the
mark bar that closed then, then the funding settlement at that instant.

- Funding (Binance USDⓈ-M "Introduction to Funding Rates", binance.com/en/support/faq/
  360033525031): funding = position size x mark price x funding rate, paid by longs to shorts
  when the rate is positive; booked as a FUNDING_FEE income row; an isolated position's
  funding moves its isolated wallet. The mark is the one recorded with the funding event, or
  without one (Aster's history) the mark series' close at the funding time.
- Liquidation, checked directly, not by a closed-form liquidation price: at each mark bar
  each position is valued at the bar's extreme against it (a long at the low, a short at the
  high); an isolated position whose wallet + unrealised P&L is at or below its maintenance
  margin (by the brackets) is liquidated, and the cross account when its cross wallet + the
  cross positions' unrealised P&L is at or below their maintenance margin. A last-price wick
  never liquidates: only mark bars are looked at. Then (Binance "Liquidation Protocol":
  open orders cancelled first), by the one model `trader.domain.perp.liquidation_fill`
  (its docstring says what is Binance's and what is ours):
  - the open orders of the symbol (cross: all open orders) are cancelled;
  - each position closes at the mark that triggered the check, or, where that mark gapped
    through the bankruptcy price, at the bankruptcy price (cross: the deficit shared by
    notional); the trade pays no commission;
  - the liquidation fee, `liquidation_fee` x the notional closed, is booked as an
    INSURANCE_CLEAR income row, taken only out of what the position's margin (cross: the cross
    margin) has left above zero after the close: an isolated liquidation never touches the
    cross wallet, no wallet ends below zero, and a zero fee books no row.
  The liquidation order's client id starts "autoclose-", as Binance's force orders do.
- The liquidation price positionRisk shows is found by bisection on the same direct check
  (the price at which the margin balance meets the maintenance margin, other marks as now).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import partial

from trader.domain import Bar, decimal_from_float
from trader.domain.perp.liquidation_fill import Liquidated, liquidation_fills
from trader.emulator.futures_account import (
    FuturesAccount,
    FuturesOrder,
    margin_balance_and_maintenance,
)
from trader.emulator.futures_market import FundingEvent
from trader.emulator.futures_orders import EIGHT, FuturesVenue

ZERO = Decimal(0)
_FILL, _MARK, _FUNDING = 0, 1, 2  # the order of events at the same instant


@dataclass
class Settlement:
    venue: FuturesVenue
    _mark_done: dict[int, dict[str, datetime]] = field(default_factory=dict)
    _funding_done: dict[int, dict[str, datetime]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.venue.on_sync.append(self.sync)
        for account in self.venue.accounts.values():  # settled from now on, not from the past
            self._cursor(self._mark_done, account)
            self._cursor(self._funding_done, account)

    def _cursor(
        self, store: dict[int, dict[str, datetime]], account: FuturesAccount
    ) -> dict[str, datetime]:
        """Per symbol, the last instant already settled for `account` (from its opening)."""
        if id(account) not in store:
            now = self.venue.clock()
            store[id(account)] = {lst.instrument.venue_id: now for lst in self.venue.perps.listings}
        return store[id(account)]

    def sync(self, account: FuturesAccount) -> None:
        perps = self.venue.perps
        marks_done = self._cursor(self._mark_done, account)
        funding_done = self._cursor(self._funding_done, account)
        now = self.venue.clock()
        events: list[tuple[datetime, int, int, Callable[[], None]]] = []

        def add(when: datetime, kind: int, action: Callable[[], None]) -> None:
            events.append((when, kind, len(events), action))

        for listing in perps.listings:
            symbol = listing.instrument.venue_id
            for bar in perps.mark_bars_closed(symbol, marks_done.setdefault(symbol, now)):
                add(bar.end, _MARK, partial(self._mark_step, account, marks_done, symbol, bar))
            since = funding_done.setdefault(symbol, now)
            for event in listing.funding:
                if since < event.time <= now:
                    add(
                        event.time,
                        _FUNDING,
                        partial(self._fund, account, funding_done, symbol, event),
                    )
        for order in account.open_orders():
            for bar in self._bars_for(order, now):
                add(bar.end, _FILL, partial(self._meet, account, order, bar))
        events.sort(key=lambda item: (item[0], item[1], item[2]))
        for *_, action in events:
            action()

    def _mark_step(
        self, account: FuturesAccount, done: dict[str, datetime], symbol: str, bar: Bar
    ) -> None:
        done[symbol] = bar.end
        self._check_liquidation(account, symbol, bar)

    def _fund(
        self, account: FuturesAccount, done: dict[str, datetime], symbol: str, event: FundingEvent
    ) -> None:
        done[symbol] = event.time
        self._settle_funding(account, symbol, event)

    def _bars_for(self, order: FuturesOrder, now: datetime) -> list[Bar]:
        """The bars a resting or conditional order has yet to meet: opened after it was
        placed, closed by now (mark bars for a MARK_PRICE trigger)."""
        perps = self.venue.perps
        if order.algo and order.working_type == "MARK_PRICE":
            bars = perps.visible_mark_bars(order.symbol)
        else:
            market = perps.market
            bars = market.bars(order.symbol, market.timeframe(order.symbol))
        done = self.venue.fills_done.get(order.order_id)
        return [
            b
            for b in bars
            if b.start >= order.time and b.end <= now and (done is None or b.end > done)
        ]

    def _meet(self, account: FuturesAccount, order: FuturesOrder, bar: Bar) -> None:
        self.venue.fills_done[order.order_id] = bar.end
        if order.algo:
            self.venue.trigger(account, order, bar)
        else:
            self.venue.fill_from_bar(account, order, bar)

    # --- funding ----------------------------------------------------------------------------

    def _settle_funding(self, account: FuturesAccount, symbol: str, event: FundingEvent) -> None:
        position = account.positions.get(symbol)
        if position is None or position.size == 0:
            return
        mark = self.venue.perps.funding_mark(symbol, event)
        paid = -(position.size * mark * event.rate)
        if account.is_isolated(symbol):
            position.isolated_wallet += paid
        account.book(symbol, "FUNDING_FEE", paid, event.time)

    # --- liquidation ------------------------------------------------------------------------

    def _step_marks(self, account: FuturesAccount, symbol: str, bar: Bar) -> dict[str, Decimal]:
        """The marks at this step: `symbol`'s at the bar's extreme against its position, the
        others as they stood when the bar closed."""
        perps = self.venue.perps
        marks = {
            lst.instrument.venue_id: perps.mark_at(lst.instrument.venue_id, bar.end)
            for lst in perps.listings
        }
        position = account.positions.get(symbol)
        if position is not None and position.size != 0:
            marks[symbol] = decimal_from_float(bar.low if position.size > 0 else bar.high)
        return marks

    def _check_liquidation(self, account: FuturesAccount, symbol: str, bar: Bar) -> None:
        position = account.positions.get(symbol)
        if position is None or position.size == 0:
            return
        marks = self._step_marks(account, symbol, bar)
        brackets = {lst.instrument.venue_id: lst.brackets for lst in self.venue.perps.listings}
        isolated = account.is_isolated(symbol)
        balance, maintenance = margin_balance_and_maintenance(
            account, brackets, marks, symbol if isolated else None
        )
        if balance > maintenance:
            return
        if isolated:
            self._liquidate(account, [symbol], marks, balance, bar.end)
        else:
            cross = [
                p.symbol for p in account.open_positions() if not account.is_isolated(p.symbol)
            ]
            self._liquidate(account, cross, marks, balance, bar.end)

    def _liquidate(
        self,
        account: FuturesAccount,
        symbols: list[str],
        marks: dict[str, Decimal],
        balance: Decimal,
        at: datetime,
    ) -> None:
        cross = not account.is_isolated(symbols[0])
        for order in account.open_orders(None if cross else symbols[0]):
            order.status, order.update_time = "CANCELED", at
        closing = [Liquidated(s, account.positions[s].size, marks[s]) for s in symbols]
        outcome = liquidation_fills(closing, balance, self.venue.liquidation_fee, step=EIGHT)
        for close in outcome.fills:
            size = abs(close.size)
            number = self.venue.order_id()
            order = FuturesOrder(
                number, f"autoclose-{number}", close.symbol,
                "SELL" if close.size > 0 else "BUY", "MARKET", "IOC", None, size, True, at,
                update_time=at,
            )  # fmt: skip
            account.orders[order.order_id] = order
            trade = self.venue.fill(
                account, order, close.price, size, False, at, commission_rate=ZERO
            )
            trade_id = str(trade.trade_id) if trade is not None else ""
            if close.fee > 0:  # the fee only out of the margin the close left above zero
                account.book(close.symbol, "INSURANCE_CLEAR", -close.fee, at, trade_id)


def liquidation_price(
    venue: FuturesVenue, account: FuturesAccount, symbol: str, iterations: int = 200
) -> Decimal | None:
    """The mark of `symbol` at which the direct check would liquidate the position (the other
    marks as now), by bisection; None when no positive price does."""
    position = account.positions.get(symbol)
    if position is None or position.size == 0:
        return None
    marks = venue.marks()
    brackets = {lst.instrument.venue_id: lst.brackets for lst in venue.perps.listings}
    isolated = symbol if account.is_isolated(symbol) else None

    def liquidated(price: Decimal) -> bool:
        balance, maintenance = margin_balance_and_maintenance(
            account, brackets, marks | {symbol: price}, isolated
        )
        return balance <= maintenance

    mark = marks[symbol]
    if position.size > 0:  # a long is liquidated below some price
        safe, bad = mark, Decimal("1e-12")
        if not liquidated(bad) or liquidated(safe):
            return None if not liquidated(bad) else mark
    else:
        safe, bad = mark, mark * 1000
        if not liquidated(bad) or liquidated(safe):
            return None if not liquidated(bad) else mark
    for _ in range(iterations):
        middle = (safe + bad) / 2
        if liquidated(middle):
            bad = middle
        else:
            safe = middle
    return bad
