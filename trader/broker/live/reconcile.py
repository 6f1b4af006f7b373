"""Reconciling the ledger with the venue (see `trader.domain.reconciliation`).

In turn: every order the ledger holds open, as the venue has it now; the trades of the last
day the ledger has not booked (late fills of orders it knows are booked, a trade of an order
it does not know is something else trading on the account); open orders of our symbols the
ledger does not know (left alone, or cancelled when `broker.unknown_orders` says so); the fees
the venue posted since the ledger's oldest estimate (`fee_postings`); and the venue's balances
against what the ledger implies, within the fee estimates still to be posted. A venue that
cannot be read leaves the report incomplete; credentials it refuses are a problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import ccxt.async_support as ccxt

from trader.broker.ccxt_orders import VenueMismatch, VenueOrder, balance_totals
from trader.broker.live.book import LIVE, LOOKING
from trader.broker.live.fee_postings import book_fee_postings
from trader.broker.live.fills import FillBooking
from trader.broker.live.unknown import OutcomeResolver
from trader.broker.live.venue import VenueClient
from trader.broker.venue_errors import BrokerHalt, Meaning, classify, credentials_hint
from trader.config.trading_settings import BrokerSettings
from trader.domain import Order, OrderStatus
from trader.domain.execution import Execution
from trader.domain.reconciliation import (
    ForeignOrder,
    LedgerBook,
    ReconcileReport,
    ReportBuilder,
    compare_balances,
    expected_balances,
    portfolio_after,
)
from trader.market.retry import failure_kind

RECENT_TRADES = timedelta(days=1)  # how far back reconciliation reads the trade history


@dataclass(frozen=True)
class Reconciler:
    client: VenueClient
    booking: FillBooking
    resolver: OutcomeResolver
    settings: BrokerSettings

    async def reconcile(
        self, book: LedgerBook, at: datetime, *, dry_run: bool = False
    ) -> ReconcileReport:
        report = ReportBuilder(at, self.client.name, dry_run=dry_run)
        began = self.client.monotonic()
        try:
            # At start-up this may come before anything else asked the venue for its markets.
            await self.client.ask(self.client.exchange.load_markets())
            await self._open_orders(book.open_orders, at, report)
            await self._recent_trades(book, at, report)
            await self._foreign_orders(book, report, dry_run)
            await book_fee_postings(self.client, book, report)
            await self._balances(book, at, report)
        except BrokerHalt as error:
            report.problems.append(str(error))
        except ccxt.BaseError as error:
            self.client.on_error(failure_kind(error))
            found = classify(error)
            if found.meaning is Meaning.HALT:
                report.problems.append(
                    f"{self.client.name} refused our credentials ({found.detail}): check "
                    f"{credentials_hint(self.client.exchange)}"
                )
            else:
                report.incomplete = f"{found.label}: {found.detail}"
        else:
            self.client.answered(began)
        return report.build()

    async def _open_orders(
        self, orders: Sequence[Order], at: datetime, report: ReportBuilder, *, first: bool = True
    ) -> None:
        """Each order the ledger holds open, as the venue has it now."""
        if first:
            report.checked.append(f"{len(orders)} open order(s) in the ledger")
        for order in orders:
            cid = order.client_order_id
            venue = await self.client.lookup(order)
            if venue is not None:
                await self._settle_into(report, order, venue, at, "reconciliation")
            elif order.status is OrderStatus.PENDING:
                if first:
                    report.notes.append(f"order {cid} was recorded but never reached the venue")
            elif order.status in LOOKING:
                done = await self.resolver.resolve(order, at, reconciling=True)
                if done is not None:
                    report.executions.append(done)
                elif first:
                    report.notes.append(f"order {cid}: outcome still unknown, looked up later")
            else:
                report.problems.append(
                    f"order {cid} ({order.symbol} {order.side} {order.amount}) is "
                    f"{order.status} in the ledger, but the venue does not know it"
                )

    async def _settle_into(
        self, report: ReportBuilder, order: Order, venue: VenueOrder, at: datetime, reason: str
    ) -> Execution | None:
        """`settle`, its execution (or the mismatch it found) added to the report."""
        try:
            done = await self.booking.settle(order, venue, at, reason=reason)
        except VenueMismatch as error:
            report.problems.append(str(error))
            return None
        if done is not None:
            report.executions.append(done)
        return done

    async def _recent_trades(self, book: LedgerBook, at: datetime, report: ReportBuilder) -> None:
        """Trades of the last day the ledger has not booked: late fills of orders it knows
        are booked; a trade of an order it does not know is something else trading here."""
        new = {f.fill_id for e in report.executions for f in e.fills}
        since = at - RECENT_TRADES
        count = 0
        for symbol in sorted(self.client.instruments):
            market_id = self.client.market_id(symbol)
            for trade in await self.booking.recent_trades(symbol, since):
                count += 1
                fill_id = f"{market_id}-{trade['id']}"
                if fill_id in book.booked_fills or fill_id in new:
                    continue
                order = book.recent_orders.get(str(trade.get("order")))
                if order is None:
                    report.problems.append(
                        f"trade {fill_id} ({trade.get('side')} {trade.get('amount')} {symbol} "
                        f"@ {trade.get('price')}) belongs to venue order {trade.get('order')}, "
                        "which the ledger does not know: something else trades on this account"
                    )
                    continue
                venue = await self.client.lookup(order)
                if venue is None:
                    report.problems.append(f"order {order.client_order_id} vanished at the venue")
                    continue
                done = await self._settle_into(report, order, venue, at, "late fill")
                if done is not None:
                    new |= {f.fill_id for f in done.fills}
        report.checked.append(f"{count} trade(s) of the last {RECENT_TRADES.days} day(s)")

    async def _foreign_orders(self, book: LedgerBook, report: ReportBuilder, dry_run: bool) -> None:
        for symbol in sorted(self.client.instruments):
            raw = await self.client.ask(self.client.exchange.fetch_open_orders(symbol))
            for venue in map(VenueOrder.read, raw):
                if venue.client_order_id in book.known_orders:
                    continue
                action = "left alone"
                if self.settings.unknown_orders == "cancel":
                    action = "would be cancelled" if dry_run else await self._cancel_foreign(venue)
                foreign = ForeignOrder(
                    symbol, venue.exchange_id, venue.client_order_id, venue.side,
                    venue.amount, venue.price, action,
                )  # fmt: skip
                report.foreign.append(foreign)
        report.checked.append(f"open orders of {len(self.client.instruments)} symbol(s)")

    async def _cancel_foreign(self, venue: VenueOrder) -> str:
        try:
            await self.client.ask(
                self.client.exchange.cancel_order(venue.exchange_id, venue.symbol)
            )
        except ccxt.BaseError as error:
            return f"cancel failed: {classify(error).detail}"
        return "cancelled"

    async def _venue_balances(self) -> dict[str, Decimal]:
        raw = await self.client.ask(self.client.exchange.fetch_balance())
        return balance_totals(raw)

    async def _balances(self, book: LedgerBook, at: datetime, report: ReportBuilder) -> None:
        if book.baseline is None:
            report.notes.append("no baseline of the venue's balances yet: balances not compared")
            return
        symbols = sorted(self.client.instruments)
        fees = report.fee_corrections
        portfolio = portfolio_after(book.portfolio, report.executions, fees)
        checks = compare_balances(
            expected_balances(book, portfolio, symbols), await self._venue_balances(),
            report.pending_fees,
        )  # fmt: skip
        if not all(c.ok for c in checks):
            # A resting order may have filled between reading the orders and the balances:
            # read the orders again, then the balances, before calling it unexplained.
            latest = {o.client_order_id: o for o in book.open_orders}
            latest |= {e.order.client_order_id: e.order for e in report.executions}
            again = [o for o in latest.values() if o.status in LIVE]
            await self._open_orders(again, at, report, first=False)
            portfolio = portfolio_after(book.portfolio, report.executions, fees)
            checks = compare_balances(
                expected_balances(book, portfolio, symbols), await self._venue_balances(),
                report.pending_fees,
            )  # fmt: skip
        report.balances += checks
        report.checked.append(f"balances of {', '.join(c.asset for c in checks)}")
        for check in checks:
            if check.explained is not None:
                report.notes.append(check.explained)
            if not check.ok:
                report.problems.append(
                    f"{check.asset}: the venue holds {check.actual}, the ledger implies "
                    f"{check.expected} (difference {check.difference})"
                )
