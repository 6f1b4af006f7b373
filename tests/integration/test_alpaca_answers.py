"""The Alpaca adapter as Alpaca answers, end to end: the live broker on alpaca-py against the
Alpaca emulator, with Alpaca's error bodies injected where the emulator would not answer
them by itself.

Error bodies, each from its source: 42210000 "potential wash trade detected. use complex
orders" (HTTP 422, github.com/Petersoj/alpaca-java issue #145, 2024-01-04); 403 40310000
"insufficient qty available for order (...)" and "account is not allowed to short"
(alpaca-py tests/trading/trading_client/test_position_routes.py); 403 "cannot open a long buy
while a short sell order is open" (Alpaca's User Protection page); 401 40110000 "request is
not authorized" (what the emulator answers bad keys with, as Alpaca's docs show it)."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import ccxt.async_support as ccxt
import pytest

from tests.integration.alpaca_setup import KEY
from tests.integration.test_alpaca_refusals import MONDAY, SYMBOLS, Alpaca, alpaca, bars
from tests.recorded import SOLUSDT_1H
from trader.broker.live.book import LATE_S
from trader.broker.protocol import BrokerHalt
from trader.domain import Liquidity, Order, OrderStatus, Portfolio, Side
from trader.domain.reconciliation import LedgerBook
from trader.emulator.faults import Fault
from trader.market.feed import ExchangeCallFailed, UnknownSymbols

pytestmark = pytest.mark.integration

WASH = {"code": 42210000, "message": "potential wash trade detected. use complex orders"}
LONG_WHILE_SHORT = {
    "code": 40310000,
    "message": "cannot open a long buy while a short sell order is open",
}


def refuse(a: Alpaca, status: int, body: dict, *, path: str = "/v2/orders",
           method: str = "POST") -> None:  # fmt: skip
    a.server.faults.add(Fault("status", path=path, method=method, status=status,
                              body=json.dumps(body)))  # fmt: skip


def book_of(orders: list[Order]) -> LedgerBook:
    """The ledger holding `orders` open, no fills (balances are not compared: no baseline)."""
    cash = Decimal(10_000)
    return LedgerBook(
        portfolio=Portfolio.from_fills("USD", cash, []), starting_cash=cash,
        open_orders=orders, known_orders=frozenset(o.client_order_id for o in orders),
        booked_fills=frozenset(),
    )  # fmt: skip


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("status", "body", "label", "words"),
    [
        (422, WASH, "wash_trade", "potential wash trade detected"),
        (403, LONG_WHILE_SHORT, "wash_trade", "cannot open a long buy while a short sell"),
        (403, {"code": 40310000, "message": "insufficient qty available for order "
                                            "(requested: 1000, available: 0)"},
         "insufficient_funds", "insufficient qty available"),
        (403, {"code": 40310000, "message": "account is not allowed to short"},
         "invalid_order", "account is not allowed to short"),
        (403, {"code": 40310100, "message": "trade denied due to pattern day trading protection"},
         "invalid_order", "pattern day trading protection"),
        (422, {"code": 40010001, "message": "invalid qty"}, "invalid_order", "invalid qty"),
    ],
)  # fmt: skip
async def test_each_refusal_is_a_rejection_with_alpacas_reason_never_a_lost_order(
    status, body, label, words
):
    async with alpaca(account_type="margin") as a:
        refuse(a, status, body)
        before = len(a.server.requests)
        done = await a.submit("AAPL/USD", Side.BUY, "1")
        assert done.order.status is OrderStatus.REJECTED, done.reason
        assert str(done.reason).startswith(f"{label}: "), done.reason
        assert words in str(done.reason)
        assert str(body["code"]) in str(done.reason)
        # Not a lost answer: nothing is looked up by client id afterwards, nothing is open.
        after = a.server.requests[before:]
        assert not any("by_client_order_id" in r for r in after), after
        assert a.broker.open_orders() == []


async def test_a_cancel_of_an_order_that_ended_is_not_found_and_the_lookup_decides():
    async with alpaca(account_type="margin") as a:
        bought = await a.submit("AAPL/USD", Side.BUY, "1")
        assert bought.order.status is OrderStatus.FILLED
        venue_id = bought.order.exchange_order_id
        with pytest.raises(ccxt.OrderNotFound, match="42210000"):
            await a.broker.exchange.cancel_order(venue_id, "AAPL/USD")
        # The same code on an order is a rejection (the wash trade above), not "not found".
        refuse(a, 422, WASH)
        with pytest.raises(ccxt.InvalidOrder) as raised:
            await a.broker.exchange.create_order("AAPL/USD", "market", "buy", 1.0)
        assert not isinstance(raised.value, ccxt.OrderNotFound)


async def test_refused_keys_halt_naming_alpacas_settings_and_count_as_authentication():
    async with alpaca(account_type="margin") as a:
        refuse(a, 401, {"code": 40110000, "message": "request is not authorized"})
        with pytest.raises(BrokerHalt) as halted:
            await a.submit("AAPL/USD", Side.BUY, "1")
        assert "exchange.alpaca.key_id and exchange.alpaca.secret_key" in str(halted.value)
        assert "exchange.api_key" not in str(halted.value)
        refuse(a, 401, {"code": 40110000, "message": "request is not authorized"},
               path="/v2/stocks/quotes/latest", method="GET")  # fmt: skip
        with pytest.raises(ExchangeCallFailed) as failed:
            await a.feed.top_of_book(["AAPL/USD"])
        assert failed.value.kind == "authentication"
        assert a.errors == ["authentication"]


async def test_an_alpaca_order_whose_answer_was_lost_stays_unknown_until_reconciliation():
    """Alpaca has no recvWindow: not found long after the send proves nothing to a poll; a
    reconciliation at least LATE_S after it gives up on it. An order Alpaca took whose answer
    was lost is found whenever it is looked up."""
    clock = Monotonic()
    async with alpaca(account_type="margin", monotonic=clock) as a:
        a.server.faults.add(Fault("drop", path="/v2/orders", method="POST"))  # never arrived
        lost = await a.submit("AAPL/USD", Side.BUY, "1")
        assert lost.order.status is OrderStatus.UNKNOWN, lost.reason
        clock.now += 3600.0  # far past any Binance window (recv_window_ms + 1 s)
        assert await a.broker.on_market([], {}, a.clock.now()) == []  # a poll: still unknown
        assert [o.status for o in a.broker.open_orders()] == [OrderStatus.UNKNOWN]
        report = await a.broker.reconcile(book_of(a.broker.open_orders()), a.clock.now())
        [never] = report.executions
        assert never.order.status is OrderStatus.REJECTED
        assert "not found by reconciliation" in str(never.reason)
        assert "alpaca has no recvWindow" in str(never.reason)
        assert a.broker.open_orders() == []
        # Answer lost after Alpaca took the order: it is found, filled, at the first look.
        a.server.faults.add(Fault("drop", path="/v2/orders", method="POST", after=True))
        taken = await a.submit("AAPL/USD", Side.BUY, "1")
        assert taken.order.status is OrderStatus.FILLED, taken.reason
        assert taken.reason == "found at the venue"


async def test_a_reconciliation_soon_after_the_send_still_leaves_it_unknown():
    clock = Monotonic()
    async with alpaca(account_type="margin", monotonic=clock) as a:
        a.server.faults.add(Fault("drop", path="/v2/orders", method="POST"))
        lost = await a.submit("AAPL/USD", Side.BUY, "1")
        clock.now += LATE_S - 1
        report = await a.broker.reconcile(book_of([lost.order]), a.clock.now())
        assert report.executions == ()
        assert any("outcome still unknown" in n for n in report.notes), report.notes
        clock.now += 1
        report = await a.broker.reconcile(book_of([lost.order]), a.clock.now())
        assert [e.order.status for e in report.executions] == [OrderStatus.REJECTED]


async def test_a_short_of_a_lendable_stock_on_the_margin_account_and_none_on_a_cash_one():
    async with alpaca(account_type="margin", lendable=True) as a:
        short = await a.submit("AAPL/USD", Side.SELL, "2")
        assert short.order.status is OrderStatus.FILLED, short.reason
        assert a.venue.accounts[KEY].balance("AAPL").total == -2
    async with alpaca(account_type="cash", lendable=True) as a:
        sent = a.sent()
        refused = await a.submit("AAPL/USD", Side.SELL, "2")
        assert refused.order.status is OrderStatus.REJECTED
        assert "needs a margin account with shorting enabled" in str(refused.reason)
        assert a.sent() == sent


async def test_extended_hours_orders_go_in_the_extended_sessions_only():
    """Pre-market 04:00-09:30, after-hours 16:00-20:00 ET on trading days (Alpaca's calendar
    `session_open`/`session_close`); limit, day, extended_hours true."""
    async with alpaca(account_type="margin", extended_hours=["AAPL/USD"]) as a:
        a.clock.advance_to(MONDAY.replace(hour=17))  # Monday's after-hours
        limit = a.quote("AAPL/USD").ask
        done = await a.submit("AAPL/USD", Side.BUY, "1", limit=limit)
        assert done.order.status is not OrderStatus.REJECTED, done.reason
        placed = a.broker.exchange._placed[str(done.order.exchange_order_id)]
        assert placed["extended_hours"] is True
        assert placed["time_in_force"] == "day"
        market = await a.submit("AAPL/USD", Side.BUY, "1")
        assert "after-hours session Alpaca takes limit orders only" in str(market.reason)
        for closed in (MONDAY.replace(hour=21), MONDAY.replace(day=8, hour=11)):  # night; Sat
            a.clock.advance_to(closed)
            sent = a.sent()
            refused = await a.submit("AAPL/USD", Side.BUY, "1", limit=limit)
            assert refused.order.status is OrderStatus.REJECTED
            assert "no regular or extended session now" in str(refused.reason)
            assert a.sent() == sent


async def test_an_order_costs_few_requests_once_the_tick_has_read_its_quotes():
    """Before (issue 40): five GETs before each POST (account, positions, clock, quote, today's
    fills) and two after (the order again, its fills). Now: the account, positions for a sale
    only, the calendar once a day, the quote the tick read; after, the fills alone."""
    async with alpaca(account_type="margin") as a:
        await a.feed.top_of_book(list(SYMBOLS))  # the tick's data step reads the quotes
        before_post: dict[str, list[str]] = {}
        after_post: dict[str, int] = {}
        for name, symbol, side, amount in [
            ("stock buy", "AAPL/USD", Side.BUY, "1"), ("stock sell", "AAPL/USD", Side.SELL, "1"),
            ("crypto buy", "BTC/USD", Side.BUY, "1"), ("crypto sell", "BTC/USD", Side.SELL, "0.99"),
        ]:  # fmt: skip
            seen = len(a.server.requests)
            done = await a.submit(symbol, side, amount)
            assert done.order.status is OrderStatus.FILLED, done.reason
            paths = [r.split("?")[0] for r in a.server.requests[seen:]]
            post = paths.index("/v2/orders")
            before_post[name], after_post[name] = paths[:post], len(paths) - post - 1
    assert before_post == {
        "stock buy": ["/v2/account", "/v2/calendar"],  # the calendar: once a day
        "stock sell": ["/v2/account", "/v2/positions"],
        "crypto buy": ["/v2/account"],
        "crypto sell": ["/v2/account", "/v2/positions"],
    }
    assert all(n <= 2 for n in after_post.values()), after_post


async def test_the_asset_list_is_read_once_a_day_and_when_a_symbol_is_missing():
    async with alpaca(account_type="margin") as a:

        def reads() -> int:
            return sum(1 for r in a.server.requests if r.split("?")[0] == "/v2/assets")

        assert reads() == 1  # at start-up
        for hours in (1, 2, 23):  # markets_refresh_s is an hour: nothing read within the day
            a.clock.advance_to(MONDAY + timedelta(hours=hours))
            await a.feed.refresh_markets(list(SYMBOLS))
        assert reads() == 1
        a.clock.advance_to(MONDAY + timedelta(days=1))
        await a.feed.refresh_markets(list(SYMBOLS))
        assert reads() == 2
        with pytest.raises(UnknownSymbols, match="NEW/USD"):
            await a.feed.refresh_markets([*SYMBOLS, "NEW/USD"])
        assert reads() == 3


async def test_market_and_crossing_limit_fills_are_taker_a_resting_limits_maker():
    async with alpaca(account_type="margin") as a:
        await a.feed.top_of_book(list(SYMBOLS))
        market = await a.submit("BTC/USD", Side.BUY, "1")
        crossing = await a.submit("BTC/USD", Side.BUY, "1", limit=a.quote("BTC/USD").ask)
        assert [f.liquidity for f in market.fills + crossing.fills] == [Liquidity.TAKER] * 2
        # A buy limit under the bid rests; the recorded path falls through it within hours.
        step = Decimal("0.01")
        now, bid = a.clock.now(), a.quote("BTC/USD").bid
        path = bars(SOLUSDT_1H, "BTC/USD", MONDAY)  # the listing's path (see `listings`)
        ahead = [b for b in path if b.start >= now][:12]
        low = Decimal(repr(min(b.low for b in ahead)))
        assert low < bid - step, "the path does not fall here"
        limit = ((low + bid) / 2 / step).to_integral_value() * step
        resting = await a.submit("BTC/USD", Side.BUY, "1", limit=limit)
        assert resting.order.status is OrderStatus.OPEN, resting.reason
        a.clock.advance_to(now + timedelta(hours=12))
        polled = await a.broker.on_market([], {}, a.clock.now())
        fills = [f for e in polled for f in e.fills]
        assert fills, "the resting limit did not fill"
        assert {f.liquidity for f in fills} == {Liquidity.MAKER}
