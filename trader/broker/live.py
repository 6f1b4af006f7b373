"""The live broker: orders on a real venue through ccxt (async), behind the paper broker's
protocol.

- Every order goes out with our deterministic client order id (`newClientOrderId`), its
  amount and price exactly on the market's grid (checked with ccxt's own precision rules, and
  against the minimum amount and notional) or not at all.
- An answer that is lost (a timeout, a dropped connection, a 5xx, an unreadable body) leaves
  the order UNKNOWN. It is settled only by looking it up by client id: found, it takes the
  venue's state and fills; not found once the request's recvWindow (plus a second for clock
  skew) has passed since it was sent, it can no longer arrive and is recorded as never having
  reached the venue. It is never sent again; a later tick decides afresh.
- Requests the venue refused before processing them (HTTP 429/418, a stale timestamp) are
  retried after a back-off (the venue's Retry-After honoured); after 429/418 or a venue that
  is down, new orders wait out a pause. Insufficient funds and invalid orders are rejections
  with their reason. Credentials that do not work raise `BrokerHalt`: the engine halts.
- Resting orders are polled (open orders per symbol, then the orders that left the book),
  their new trades read from the venue's trade history; fees are the venue's own, in the
  asset it charged. Orders with an expiry are cancelled at the venue when it passes.
- Amend is cancel-and-replace (`trader.broker.amend`).
- Reconciliation compares every order the ledger holds open, the recent trade history, the
  open orders of our symbols and the balances with the ledger (see `trader.domain.reconciliation`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace as evolve
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import ccxt.async_support as ccxt

from trader.broker.amend import cancel_and_replace
from trader.broker.ccxt_orders import (
    VenueMismatch,
    VenueOrder,
    advance,
    fill_from_trade,
    unbooked,
)
from trader.broker.safety import InstanceLocks
from trader.broker.venue_errors import BrokerHalt, Classified, Meaning, classify
from trader.config.schema import BrokerSettings
from trader.domain import (
    Bar,
    Fill,
    Instrument,
    Liquidity,
    Order,
    OrderStatus,
    Quote,
    QuoteSource,
    Side,
    decimal_from_float,
)
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
from trader.logging import get_logger
from trader.market.ccxt_feed import _PARSE_ERRORS, retry_after
from trader.market.retry import RetryPolicy

T = TypeVar("T")
CLOCK_SKEW_S = 1.0  # allowance between our clock and the venue's
RECENT_TRADES = timedelta(days=1)  # how far back reconciliation reads the trade history
TRADES_PAGE = 1000
_LIVE = {OrderStatus.SUBMITTED, OrderStatus.UNKNOWN, OrderStatus.OPEN, OrderStatus.PARTIALLY_FILLED}
_LOOKING = {OrderStatus.SUBMITTED, OrderStatus.UNKNOWN}


class LiveBroker:
    external = True

    def __init__(
        self,
        exchange: ccxt.Exchange,
        settings: BrokerSettings,
        instruments: Mapping[str, Instrument],
        *,
        retry: RetryPolicy | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
        locks: InstanceLocks | None = None,
    ) -> None:
        self.exchange = exchange
        self.name = str(exchange.id)
        self.settings = settings
        self.instruments = instruments
        self.retry = retry or RetryPolicy()
        self._monotonic = monotonic
        self._sleep = sleep
        self._window_s = settings.recv_window_ms / 1000 + CLOCK_SKEW_S
        # ccxt signs every private request with this window; the venue refuses it after.
        exchange.options["recvWindow"] = settings.recv_window_ms
        self._open: dict[str, Order] = {}
        self._deadline: dict[str, float] = {}  # UNKNOWN order -> when not-found is final
        self._recorded: set[str] = set()  # PENDING at a restart: maybe sent, look first
        self._paused_until = 0.0
        self._pause_reason = ""
        self._halted: str | None = None
        self._log = get_logger("trader.broker", broker=self.name)
        self._locks = locks  # held while this broker trades

    def close(self) -> None:
        if self._locks is not None:
            self._locks.release()

    # --- state ------------------------------------------------------------------------------

    def restore(self, orders: Sequence[Order], fill_counts: Mapping[str, int]) -> None:
        now = self._monotonic()
        self._open = {o.client_order_id: o for o in orders if o.status in _LIVE}
        self._recorded = {o.client_order_id for o in orders if o.status is OrderStatus.PENDING}
        for cid, order in self._open.items():
            if order.status in _LOOKING:
                # A send from before the restart may still be in flight for a recvWindow.
                self._deadline.setdefault(cid, now + self._window_s)
        self._deadline = {c: t for c, t in self._deadline.items() if c in self._open}

    def open_orders(self) -> list[Order]:
        return list(self._open.values())

    def _track(self, order: Order) -> None:
        cid = order.client_order_id
        if order.status.is_terminal:
            self._open.pop(cid, None)
            self._deadline.pop(cid, None)
        else:
            self._open[cid] = order

    # --- errors -----------------------------------------------------------------------------

    def _check_halted(self) -> None:
        if self._halted is not None:
            raise BrokerHalt(self._halted)

    def _note(self, what: str, order: Order, error: BaseException) -> Classified:
        found = classify(error)
        if found.meaning is Meaning.HALT:
            self._halted = (
                f"{self.name} refused our credentials ({found.detail}): check "
                "exchange.api_key, exchange.api_secret and the key's permissions (spot trading)"
            )
            self._log.error("credentials refused", what=what, detail=found.detail)
            raise BrokerHalt(self._halted) from error
        if found.pause:
            # As long as the venue asked (Retry-After), else a while: nothing new is sent.
            asked = self._retry_after()
            wait = asked if asked is not None else self.retry.max_delay_s
            self._paused_until = max(self._paused_until, self._monotonic() + wait)
            self._pause_reason = f"{found.label} ({found.detail})"
        self._log.warning(
            "exchange call failed", what=what, order=order.client_order_id,
            kind=found.label, meaning=str(found.meaning), detail=found.detail,
        )  # fmt: skip
        return found

    def _retry_after(self) -> float | None:
        return retry_after(self.exchange)

    async def _back_off(self, attempt: int) -> bool:
        """Wait before retrying a refused request; False when the venue asked for longer
        than we may wait."""
        asked = self._retry_after()
        wait = asked if asked is not None else self.retry.backoff(attempt, lambda: 1.0)
        if wait > self.retry.max_delay_s:
            return False
        await self._sleep(wait)
        return True

    # --- reading the venue ------------------------------------------------------------------

    async def _ask(self, call: Awaitable[T]) -> T:
        """An exchange call; an answer ccxt chokes on is a bad answer, not our bug."""
        try:
            return await call
        except _PARSE_ERRORS as error:
            raise ccxt.BadResponse(f"unreadable answer ({error!r})") from error

    def _market_id(self, symbol: str) -> str:
        return str(self.exchange.market(symbol)["id"])

    async def _lookup(self, order: Order) -> VenueOrder | None:
        """The venue's view of `order`, by client id; None when it does not know it."""
        try:
            raw = await self._ask(
                self.exchange.fetch_order(
                    None, order.symbol, {"origClientOrderId": order.client_order_id}
                )
            )
        except ccxt.OrderNotFound:
            return None
        return VenueOrder.read(raw)

    async def _trades(self, order: Order, exchange_id: str) -> list[Fill]:
        raw = await self._ask(
            self.exchange.fetch_my_trades(order.symbol, None, None, {"orderId": exchange_id})
        )
        return [self._fill(t, order, None, Liquidity.MAKER) for t in raw]

    def _fill(
        self, trade: Mapping[str, Any], order: Order, at: datetime | None, liquidity: Liquidity
    ) -> Fill:
        return fill_from_trade(
            trade, order, self._market_id(order.symbol), self.exchange.safe_currency_code,
            default_at=at or order.created_at, default_liquidity=liquidity,
        )  # fmt: skip

    async def _settle(
        self,
        order: Order,
        venue: VenueOrder,
        at: datetime,
        *,
        canceled_as: OrderStatus = OrderStatus.CANCELED,
        reason: str | None = None,
    ) -> Execution | None:
        """`order` brought up to what the venue reports, with the fills the ledger has not
        booked; None when nothing changed."""
        fills = [self._fill(t, order, venue.at or at, Liquidity.TAKER) for t in venue.trades]
        if sum((f.amount for f in fills), Decimal(0)) < venue.filled:
            fills = await self._trades(order, venue.exchange_id)  # the whole history
        new = unbooked(order, fills)
        current = order
        if current.exchange_order_id != venue.exchange_id:
            current = evolve(current, exchange_order_id=venue.exchange_id)
        updated = advance(current, venue, new)
        if updated.status is OrderStatus.CANCELED and canceled_as is not OrderStatus.CANCELED:
            updated = evolve(updated, status=canceled_as)
        self._track(updated)
        if updated == order and not new:
            return None
        return Execution(updated, tuple(new), reason)

    async def _resolve(self, order: Order, at: datetime) -> Execution | None:
        """Settle an UNKNOWN order by looking it up; None while it stays unknown."""
        try:
            venue = await self._lookup(order)
        except BrokerHalt:
            raise
        except (ccxt.BaseError, VenueMismatch) as error:
            if isinstance(error, ccxt.BaseError):
                self._note("look up", order, error)
            return None
        if venue is not None:
            return await self._settle(order, venue, at, reason="found at the venue")
        deadline = self._deadline.setdefault(
            order.client_order_id, self._monotonic() + self._window_s
        )
        if self._monotonic() < deadline:
            return None
        never = order.transition(OrderStatus.REJECTED)
        self._track(never)
        why = f"never reached the venue: not found {self._window_s:.0f}s after it was sent"
        self._log.info("order never arrived", order=order.client_order_id)
        return Execution(never, reason=why)

    # --- sending ----------------------------------------------------------------------------

    def _refusal(self, order: Order, quote: Quote) -> str | None:
        """Why the order must not leave, checked here rather than by the venue."""
        instrument = self.instruments.get(order.symbol)
        if instrument is None or order.symbol not in (self.exchange.markets or {}):
            return f"{order.symbol} is not a market this broker trades"
        if quote.source is QuoteSource.SYNTHETIC:
            return "the quote is synthetic: no real price to check the order against"
        amount = Decimal(self.exchange.amount_to_precision(order.symbol, float(order.amount)))
        if amount != order.amount:
            return f"amount {order.amount} is not on the market's grid (would send {amount})"
        price = order.limit_price
        if price is not None:
            sent = Decimal(self.exchange.price_to_precision(order.symbol, float(price)))
            if sent != price:
                return f"limit {price} is not on the market's price grid (would send {sent})"
        check = price if price is not None else (quote.ask if order.side is Side.BUY else quote.bid)
        if not instrument.tradable(order.amount, check):
            return (
                f"{order.amount} at {check} is below the market's minimum amount "
                f"{instrument.min_amount} or notional {instrument.min_notional}"
            )
        return None

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        self._check_halted()
        if order.client_order_id in self._recorded:
            # Recorded before a restart, perhaps sent: look before sending, never resend.
            self._recorded.discard(order.client_order_id)
            found = await self._look_first(order, at)
            if found is not None:
                return found
        refusal = self._refusal(order, quote)
        if refusal is not None:
            self._log.warning("order refused before sending", order=order.client_order_id,
                              reason=refusal)  # fmt: skip
            return Execution(order.transition(OrderStatus.REJECTED), reason=refusal)
        if self._monotonic() < self._paused_until:
            why = f"not sent: the venue asked us to wait ({self._pause_reason})"
            return Execution(order.transition(OrderStatus.CANCELED), reason=why)
        return await self._send(order.transition(OrderStatus.SUBMITTED), at)

    async def _look_first(self, order: Order, at: datetime) -> Execution | None:
        """A restarted order's state at the venue; None when the venue does not have it."""
        try:
            venue = await self._lookup(order)
        except ccxt.BaseError as error:
            found = self._note("look up", order, error)
            return await self._unknown(order.transition(OrderStatus.SUBMITTED), found, at)
        except VenueMismatch as error:
            garbled = Classified(Meaning.UNKNOWN, "bad_answer", str(error)[:200])
            return await self._unknown(order.transition(OrderStatus.SUBMITTED), garbled, at)
        if venue is None:
            return None
        settled = await self._settle(order, venue, at, reason="sent before a restart")
        return settled or Execution(self._open.get(order.client_order_id, order))

    async def _send(self, sent: Order, at: datetime) -> Execution:
        cid = sent.client_order_id
        price = float(sent.limit_price) if sent.limit_price is not None else None
        for attempt in range(self.retry.attempts):
            try:
                raw = await self._ask(self.exchange.create_order(
                    sent.symbol, sent.type.value, sent.side.value, float(sent.amount), price,
                    {"newClientOrderId": cid},
                ))  # fmt: skip
            except ccxt.BaseError as error:
                found = self._note("create order", sent, error)
                if found.meaning is Meaning.REFUSED:
                    if attempt < self.retry.attempts - 1 and await self._back_off(attempt):
                        continue
                    reason = f"not sent: {found.label}, retries used up"
                    return Execution(sent.transition(OrderStatus.REJECTED), reason=reason)
                if found.meaning is Meaning.REJECTED:
                    reason = f"{found.label}: {found.detail}"
                    return Execution(sent.transition(OrderStatus.REJECTED), reason=reason)
                return await self._unknown(sent, found, at)
            try:
                venue = VenueOrder.read(raw)
            except VenueMismatch as error:  # an answer that cannot be read says nothing
                garbled = Classified(Meaning.UNKNOWN, "bad_answer", str(error)[:200])
                return await self._unknown(sent, garbled, at)
            self._log.info("order sent", order=cid, venue_id=venue.exchange_id, status=venue.status)
            return await self._settle(sent, venue, at) or Execution(sent)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _unknown(self, sent: Order, found: Classified, at: datetime) -> Execution:
        unknown = sent.transition(OrderStatus.UNKNOWN)
        self._deadline[sent.client_order_id] = self._monotonic() + self._window_s
        self._track(unknown)
        resolved = await self._resolve(unknown, at)
        if resolved is not None:
            return resolved
        return Execution(unknown, reason=f"answer lost ({found.label}): looking it up")

    async def cancel(self, order: Order, at: datetime) -> Execution | None:
        return await self._cancel(order, at, OrderStatus.CANCELED)

    async def _cancel(self, order: Order, at: datetime, ending: OrderStatus) -> Execution | None:
        self._check_halted()
        current = self._open.get(order.client_order_id, order)
        if current.status is OrderStatus.PENDING:
            # Recorded before a restart, it may have left then: look before calling it unsent.
            maybe_sent = current.client_order_id in self._recorded
            self._recorded.discard(current.client_order_id)
            found = await self._look_first(current, at) if maybe_sent else None
            if found is None:
                return Execution(current.transition(OrderStatus.CANCELED), reason="never sent")
            if found.order.status.is_terminal or found.order.status in _LOOKING:
                return found
            return _merge(
                found.fills, await self._cancel_at_venue(found.order, at, ending), found.order
            )
        if current.status.is_terminal:
            return None
        fills: tuple[Fill, ...] = ()
        if current.status in _LOOKING:
            resolved = await self._resolve(current, at)
            if resolved is None or resolved.order.status.is_terminal:
                return resolved  # not found (yet): nothing to cancel; or it ended
            fills, current = resolved.fills, resolved.order
        return _merge(fills, await self._cancel_at_venue(current, at, ending), current)

    async def _cancel_at_venue(
        self, order: Order, at: datetime, ending: OrderStatus
    ) -> Execution | None:
        cid = order.client_order_id
        for attempt in range(self.retry.attempts):
            try:
                raw = await self._ask(
                    self.exchange.cancel_order(None, order.symbol, {"origClientOrderId": cid})
                )
                return await self._settle(order, VenueOrder.read(raw), at, canceled_as=ending)
            except ccxt.BaseError as error:
                found = self._note("cancel order", order, error)
                if found.meaning is Meaning.REFUSED and await self._back_off(attempt):
                    continue
                if found.meaning is Meaning.REJECTED:
                    return None
            except VenueMismatch as error:
                self._log.warning("unreadable cancel answer", order=cid, detail=str(error))
            # It ended first (filled), or the answer was lost: the venue's view decides.
            try:
                venue = await self._lookup(order)
            except (ccxt.BaseError, VenueMismatch) as error:
                if isinstance(error, ccxt.BaseError):
                    self._note("look up", order, error)
                return None
            if venue is None:
                self._log.error("order unknown to the venue", order=cid)
                return None
            if venue.status != "open":
                return await self._settle(order, venue, at, canceled_as=ending)
        return None

    async def replace(
        self, order: Order, replacement: Order, quote: Quote, at: datetime
    ) -> list[Execution]:
        return await cancel_and_replace(self, order, replacement, quote, at)

    # --- the market moving ------------------------------------------------------------------

    async def on_market(
        self, bars: Sequence[Bar], quotes: Mapping[str, Quote], at: datetime
    ) -> list[Execution]:
        """Poll what rests at the venue: fills, ends, and expiries (cancelled at the venue)."""
        executions: list[Execution] = []
        symbols = sorted({o.symbol for o in self._open.values()})
        for symbol in symbols:
            try:
                raw = await self._ask(self.exchange.fetch_open_orders(symbol))
                resting = {v.client_order_id: v for v in map(VenueOrder.read, raw)}
            except ccxt.BaseError as error:
                self._note("poll open orders", next(iter(self._open.values())), error)
                continue
            except VenueMismatch as error:
                self._log.warning("unreadable open orders", symbol=symbol, detail=str(error))
                continue
            for order in [o for o in list(self._open.values()) if o.symbol == symbol]:
                try:
                    done = await self._poll(order, resting.get(order.client_order_id), at)
                except VenueMismatch as error:
                    self._log.error(
                        "venue mismatch", order=order.client_order_id, detail=str(error)
                    )
                    continue
                if done is not None:
                    executions.append(done)
                current = self._open.get(order.client_order_id)
                if (
                    current is not None
                    and current.expires_at is not None
                    and current.expires_at <= at
                ):
                    expired = await self._cancel(current, at, OrderStatus.EXPIRED)
                    if expired is not None:
                        executions.append(expired)
        return executions

    async def _poll(
        self, order: Order, resting: VenueOrder | None, at: datetime
    ) -> Execution | None:
        if order.status in _LOOKING:
            return await self._resolve(order, at)
        if resting is not None:
            if resting.filled == order.filled_amount and order.exchange_order_id is not None:
                return None
            return await self._settle(order, resting, at)
        try:
            venue = await self._lookup(order)  # it left the book: how?
        except ccxt.BaseError as error:
            self._note("look up", order, error)
            return None
        if venue is None:
            self._log.error("order unknown to the venue", order=order.client_order_id)
            return None
        return await self._settle(order, venue, at)

    # --- reconciliation ---------------------------------------------------------------------

    async def reconcile(
        self, book: LedgerBook, at: datetime, *, dry_run: bool = False
    ) -> ReconcileReport:
        report = ReportBuilder(at, self.name, dry_run=dry_run)
        try:
            # At start-up this may come before anything else asked the venue for its markets.
            await self._ask(self.exchange.load_markets())
            await self._reconcile_orders(book.open_orders, at, report)
            await self._reconcile_trades(book, at, report)
            await self._reconcile_foreign(book, report, dry_run)
            await self._reconcile_balances(book, at, report)
        except BrokerHalt as error:
            report.problems.append(str(error))
        except ccxt.BaseError as error:
            found = classify(error)
            if found.meaning is Meaning.HALT:
                report.problems.append(
                    f"{self.name} refused our credentials ({found.detail}): check "
                    "exchange.api_key, exchange.api_secret and the key's permissions"
                )
            else:
                report.incomplete = f"{found.label}: {found.detail}"
        return report.build()

    async def _reconcile_orders(
        self, orders: Sequence[Order], at: datetime, report: ReportBuilder, *, first: bool = True
    ) -> None:
        """Each order the ledger holds open, as the venue has it now."""
        if first:
            report.checked.append(f"{len(orders)} open order(s) in the ledger")
        for order in orders:
            cid = order.client_order_id
            venue = await self._lookup(order)
            if venue is not None:
                await self._settle_into(report, order, venue, at, "reconciliation")
            elif order.status is OrderStatus.PENDING:
                if first:
                    report.notes.append(f"order {cid} was recorded but never reached the venue")
            elif order.status in _LOOKING:
                done = await self._resolve(order, at)
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
        """`_settle`, its execution (or the mismatch it found) added to the report."""
        try:
            done = await self._settle(order, venue, at, reason=reason)
        except VenueMismatch as error:
            report.problems.append(str(error))
            return None
        if done is not None:
            report.executions.append(done)
        return done

    async def _recent_trades(self, symbol: str, since: datetime) -> list[dict[str, Any]]:
        trades: list[dict[str, Any]] = []
        page = await self._ask(
            self.exchange.fetch_my_trades(symbol, int(since.timestamp() * 1000), TRADES_PAGE)
        )
        while page:
            trades += page
            if len(page) < TRADES_PAGE:
                break
            last = max(int(t["id"]) for t in page)
            page = await self._ask(
                self.exchange.fetch_my_trades(symbol, None, TRADES_PAGE, {"fromId": last + 1})
            )
        return trades

    async def _reconcile_trades(
        self, book: LedgerBook, at: datetime, report: ReportBuilder
    ) -> None:
        """Trades of the last day the ledger has not booked: late fills of orders it knows
        are booked; a trade of an order it does not know is something else trading here."""
        new = {f.fill_id for e in report.executions for f in e.fills}
        since = at - RECENT_TRADES
        count = 0
        for symbol in sorted(self.instruments):
            market_id = self._market_id(symbol)
            for trade in await self._recent_trades(symbol, since):
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
                venue = await self._lookup(order)
                if venue is None:
                    report.problems.append(f"order {order.client_order_id} vanished at the venue")
                    continue
                done = await self._settle_into(report, order, venue, at, "late fill")
                if done is not None:
                    new |= {f.fill_id for f in done.fills}
        report.checked.append(f"{count} trade(s) of the last {RECENT_TRADES.days} day(s)")

    async def _reconcile_foreign(
        self, book: LedgerBook, report: ReportBuilder, dry_run: bool
    ) -> None:
        for symbol in sorted(self.instruments):
            for venue in map(
                VenueOrder.read, await self._ask(self.exchange.fetch_open_orders(symbol))
            ):
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
        report.checked.append(f"open orders of {len(self.instruments)} symbol(s)")

    async def _cancel_foreign(self, venue: VenueOrder) -> str:
        try:
            await self._ask(self.exchange.cancel_order(venue.exchange_id, venue.symbol))
        except ccxt.BaseError as error:
            return f"cancel failed: {classify(error).detail}"
        return "cancelled"

    async def _balances(self) -> dict[str, Decimal]:
        raw = await self._ask(self.exchange.fetch_balance())
        totals = raw.get("total") or {}
        return {
            str(asset): decimal_from_float(float(value))
            for asset, value in totals.items()
            if isinstance(value, int | float)
        }

    async def _reconcile_balances(
        self, book: LedgerBook, at: datetime, report: ReportBuilder
    ) -> None:
        if book.baseline is None:
            report.notes.append("no baseline of the venue's balances yet: balances not compared")
            return
        symbols = sorted(self.instruments)
        portfolio = portfolio_after(book.portfolio, report.executions)
        checks = compare_balances(
            expected_balances(book, portfolio, symbols), await self._balances()
        )
        if not all(c.ok for c in checks):
            # A resting order may have filled between reading the orders and the balances:
            # read the orders again, then the balances, before calling it unexplained.
            latest = {o.client_order_id: o for o in book.open_orders}
            latest |= {e.order.client_order_id: e.order for e in report.executions}
            again = [o for o in latest.values() if o.status in _LIVE]
            await self._reconcile_orders(again, at, report, first=False)
            portfolio = portfolio_after(book.portfolio, report.executions)
            checks = compare_balances(
                expected_balances(book, portfolio, symbols), await self._balances()
            )
        report.balances += checks
        report.checked.append(f"balances of {', '.join(c.asset for c in checks)}")
        for check in checks:
            if not check.ok:
                report.problems.append(
                    f"{check.asset}: the venue holds {check.actual}, the ledger implies "
                    f"{check.expected} (difference {check.difference})"
                )


def _merge(fills: tuple[Fill, ...], done: Execution | None, order: Order) -> Execution | None:
    """One execution from a lookup's fills and what followed them."""
    if done is None:
        return Execution(order, fills) if fills else None
    return Execution(done.order, fills + done.fills, done.reason)
