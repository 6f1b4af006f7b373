"""The live broker's answers to what goes wrong between it and a venue, through the real ccxt
client on the emulator's signed endpoints: a lost answer is settled by looking the order up
by its client id, never by sending it again; refusals are retried; rejections say why; keys
that do not work halt; and reconciliation books what happened while nobody was looking."""

from __future__ import annotations

import asyncio
import contextlib
from decimal import Decimal

import ccxt.async_support as ccxt
import pytest

from tests.integration.live_setup import KEY, SECRET, Live, live, make_broker
from trader.broker.live.broker import LiveBroker
from trader.broker.protocol import BrokerHalt
from trader.config.market_settings import ExchangeSettings
from trader.domain import Order, OrderStatus, OrderType, Portfolio, Side
from trader.domain.reconciliation import LedgerBook
from trader.emulator import Fault

pytestmark = pytest.mark.integration
CASH = Decimal(10_000)
N = iter(range(10**6))
WRONG = "not-the-secret"


def order(setup: Live, side: Side = Side.BUY, amount: str = "2", limit: str | None = None) -> Order:
    return Order.create(
        strategy="t", symbol="SOL/USDT", side=side,
        type=OrderType.LIMIT if limit else OrderType.MARKET, amount=Decimal(amount),
        limit_price=Decimal(limit) if limit else None, tick_time=setup.prices.now,
        leg=f"l{next(N)}",
    )  # fmt: skip


async def send(setup: Live, o: Order):
    return await setup.broker.submit(o, setup.prices.quote(), setup.prices.now)


async def settle(setup: Live, seconds: float = 1.6) -> list:
    """Poll until the order's recvWindow (1 s here, plus 1 s of skew) has surely passed."""
    await asyncio.sleep(seconds)
    return await setup.broker.on_market([], {}, setup.prices.now)


@pytest.mark.parametrize(
    "fault",
    [
        Fault("delay", "/api/v3/order", method="POST", delay_s=1.0, after=True),
        Fault("drop", "/api/v3/order", method="POST", after=True),
        Fault("status", "/api/v3/order", method="POST", status=502, after=True),
        Fault("status", "/api/v3/order", method="POST", status=500, after=True),
        Fault(
            "status",
            "/api/v3/order",
            method="POST",
            status=400,
            after=True,
            body='{"code": -2010, "msg": "Duplicate order sent."}',
        ),
        Fault("malformed", "/api/v3/order", method="POST", after=True, body="<html>oops"),
    ],
    ids=["timeout", "drop", "502", "500", "duplicate", "malformed"],
)
async def test_an_answer_lost_after_the_venue_took_the_order_is_found_by_its_id(fault):
    async with live() as setup:
        setup.server.faults.add(fault)
        o = order(setup)
        done = await send(setup, o)
        assert done.order.status is OrderStatus.FILLED, done
        assert sum(f.amount for f in done.fills) == Decimal(2)
        assert setup.orders_with(o.client_order_id) == 1
        assert await settle(setup, 0) == []


@pytest.mark.parametrize(
    "fault",
    [
        Fault("drop", "/api/v3/order", method="POST"),
        Fault("status", "/api/v3/order", method="POST", status=503),
        Fault("delay", "/api/v3/order", method="POST", delay_s=2.5),  # past its recvWindow
    ],
    ids=["drop", "503", "held-past-recvwindow"],
)
async def test_an_order_that_never_arrived_is_known_so_only_after_its_recv_window(fault):
    async with live() as setup:
        setup.server.faults.add(fault)
        o = order(setup)
        first = await send(setup, o)
        assert first.order.status is OrderStatus.UNKNOWN
        assert [x.client_order_id for x in setup.broker.open_orders()] == [o.client_order_id]
        (later,) = await settle(setup, 2.8)
        assert later.order.status is OrderStatus.REJECTED
        assert "never reached the venue" in (later.reason or "")
        assert setup.orders_with(o.client_order_id) == 0
        assert setup.broker.open_orders() == []


async def test_an_order_held_up_inside_its_recv_window_arrives_late_and_is_found():
    async with live() as setup:
        setup.server.faults.add(Fault("delay", "/api/v3/order", method="POST", delay_s=0.8))
        o = order(setup, limit="1.00", amount="10")  # rests far below the market
        first = await send(setup, o)
        assert first.order.status is OrderStatus.UNKNOWN  # the client gave up after 0.5 s
        await asyncio.sleep(0.6)  # the venue takes it now, 0.8 s after it was signed
        (found,) = await setup.broker.on_market([], {}, setup.prices.now)
        assert found.order.status is OrderStatus.OPEN
        assert found.order.exchange_order_id is not None
        assert setup.orders_with(o.client_order_id) == 1


@pytest.mark.parametrize("status", [429, 418])
async def test_a_rate_limit_refusal_is_retried_after_the_back_off_and_sends_once(status):
    async with live() as setup:
        setup.server.faults.add(
            Fault("status", "/api/v3/order", method="POST", status=status, retry_after_s=0,
                  body='{"code": -1003, "msg": "Too much request weight used."}')
        )  # fmt: skip
        o = order(setup)
        done = await send(setup, o)
        assert done.order.status is OrderStatus.FILLED
        assert setup.orders_with(o.client_order_id) == 1


async def test_rejections_say_why_and_nothing_is_retried():
    async with live(cash=Decimal(20)) as setup:
        poor = await send(setup, order(setup, amount="50"))  # ~175 USDT of SOL with 20
        assert poor.order.status is OrderStatus.REJECTED
        assert (poor.reason or "").startswith("insufficient_funds")
        off_grid = await send(setup, order(setup, amount="1.0005"))
        assert off_grid.order.status is OrderStatus.REJECTED
        assert "grid" in (off_grid.reason or "")
        tiny = await send(setup, order(setup, amount="0.5"))  # under 5 USDT
        assert tiny.order.status is OrderStatus.REJECTED
        assert "minimum" in (tiny.reason or "")
        created = [r for r in setup.server.requests if r == "/api/v3/order"]
        assert len(created) == 1  # only the first reached the venue


@pytest.mark.parametrize("body", [None, "<html>503 Service Unavailable</html>"])
async def test_a_venue_that_is_down_pauses_new_orders(body):
    async with live() as setup:
        setup.server.faults.add(
            Fault("status", "/api/v3/order", method="POST", status=503, body=body)
        )
        first = await send(setup, order(setup))
        assert first.order.status is OrderStatus.UNKNOWN
        paused = await send(setup, order(setup))
        assert paused.order.status is OrderStatus.CANCELED
        assert "wait" in (paused.reason or "")


async def test_keys_the_venue_refuses_halt_with_a_message_that_holds_no_secret():
    async with live() as setup:
        wrong = ExchangeSettings(api_key=KEY, api_secret=WRONG, timeout_s=0.5)
        feed, broker = make_broker(wrong, setup.server.base_url, setup.prices.market)
        broker.instruments = setup.instruments
        with contextlib.suppress(ccxt.AuthenticationError):
            await feed.exchange.load_markets()  # it asks for currencies with the keys: refused
        feed.exchange.markets = setup.feed.exchange.markets
        feed.exchange.markets_by_id = setup.feed.exchange.markets_by_id
        try:
            with pytest.raises(BrokerHalt, match="refused our credentials") as raised:
                await send_with(broker, setup, order(setup))
            with pytest.raises(BrokerHalt):  # and nothing more is sent
                await send_with(broker, setup, order(setup))
        finally:
            await feed.close()
        assert WRONG not in str(raised.value)
        assert SECRET not in str(raised.value)
        assert "api_secret" in str(raised.value)


async def send_with(broker, setup: Live, o: Order):
    return await broker.submit(o, setup.prices.quote(), setup.prices.now)


def restart(setup: Live) -> LiveBroker:
    """A new broker on the same client: the daemon after a restart."""
    broker = make_broker(
        ExchangeSettings(api_key=KEY, api_secret=SECRET, timeout_s=0.5),
        setup.server.base_url, setup.prices.market,
    )[1]  # fmt: skip
    broker.exchange = setup.feed.exchange
    broker.instruments = setup.instruments
    return broker


def ledger_of(setup: Live, orders: list[Order], fills) -> LedgerBook:
    return LedgerBook(
        portfolio=Portfolio.from_fills("USDT", CASH, fills),
        starting_cash=CASH,
        open_orders=[o for o in orders if not o.status.is_terminal],
        known_orders=frozenset(o.client_order_id for o in orders),
        booked_fills=frozenset(f.fill_id for f in fills),
        baseline={"USDT": CASH, "SOL": Decimal(0), "BTC": Decimal(0)},
        recent_orders={o.exchange_order_id: o for o in orders if o.exchange_order_id},
    )


async def test_reconciliation_books_the_fills_of_a_restart_and_finds_balances_equal():
    async with live() as setup:
        # Sent, then the process died before booking anything: the ledger holds it PENDING.
        market = order(setup, amount="3")
        await send(setup, market)
        bid = setup.prices.quote().bid
        resting = (
            await send(setup, order(setup, amount="10", limit=str(bid - Decimal("0.02"))))
        ).order
        setup.prices.advance(4)  # it fills while the daemon is down
        restarted = restart(setup)
        ledger = ledger_of(setup, [market, resting], [])
        restarted.restore(list(ledger.open_orders), {})
        report = await restarted.reconcile(ledger, setup.prices.now)
    assert report.ok, report.text
    booked = {e.order.client_order_id: e.order for e in report.executions}
    assert booked[market.client_order_id].status is OrderStatus.FILLED
    assert booked[resting.client_order_id].status is OrderStatus.FILLED
    assert sum(f.amount for f in report.fills) == Decimal(13)
    assert all(b.ok for b in report.balances)
    assert "ok" in report.summary


async def test_orders_and_trades_the_ledger_does_not_know_are_reported():
    async with live(unknown_orders="cancel") as setup:
        exchange = setup.feed.exchange
        # Someone else, on the same account: a resting order, and a trade.
        await exchange.create_order(
            "SOL/USDT", "limit", "buy", 5, 1.0, {"newClientOrderId": "manual1"}
        )
        await exchange.create_order(
            "SOL/USDT", "market", "buy", 2, None, {"newClientOrderId": "manual2"}
        )
        report = await setup.broker.reconcile(ledger_of(setup, [], []), setup.prices.now)
        left = setup.venue.accounts[KEY]
        still_open = [o for o in left.orders.values() if o.is_open]
    assert not report.ok
    (foreign,) = report.foreign
    assert foreign.client_order_id == "manual1"
    assert foreign.action == "cancelled"
    assert still_open == []
    assert any("something else trades on this account" in p for p in report.problems)
    assert any(p.startswith("SOL: the venue holds") for p in report.problems)
    assert "MISMATCH" in report.summary
    assert "unknown order" in report.text


async def test_a_dry_run_cancels_nothing():
    async with live(unknown_orders="cancel") as setup:
        await setup.feed.exchange.create_order(
            "SOL/USDT", "limit", "buy", 5, 1.0, {"newClientOrderId": "manual1"}
        )
        report = await setup.broker.reconcile(
            ledger_of(setup, [], []), setup.prices.now, dry_run=True
        )
        left = [o for o in setup.venue.accounts[KEY].orders.values() if o.is_open]
    assert report.dry_run
    assert [f.action for f in report.foreign] == ["would be cancelled"]
    assert len(left) == 1


async def test_a_reconciliation_before_anything_loaded_the_markets_loads_them():
    async with live() as setup:
        feed, fresh = make_broker(
            ExchangeSettings(api_key=KEY, api_secret=SECRET, timeout_s=0.5),
            setup.server.base_url, setup.prices.market,
        )  # fmt: skip
        fresh.instruments = setup.instruments
        try:
            assert not feed.exchange.markets
            report = await fresh.reconcile(ledger_of(setup, [], []), setup.prices.now)
        finally:
            await feed.close()
    assert report.ok, report.text


async def test_an_order_recorded_before_a_restart_is_looked_up_before_it_is_written_off():
    async with live() as setup:
        sent, unsent = order(setup), order(setup)
        await send(setup, sent)  # it left, then the process died: the ledger says PENDING
        restarted = restart(setup)
        restarted.restore([sent, unsent], {})
        found = await restarted.cancel(sent, setup.prices.now)
        written_off = await restarted.cancel(unsent, setup.prices.now)
        assert setup.orders_with(unsent.client_order_id) == 0
    assert found is not None
    assert found.order.status is OrderStatus.FILLED  # not "never sent": its fills are booked
    assert sum(f.amount for f in found.fills) == Decimal(2)
    assert written_off is not None
    assert written_off.order.status is OrderStatus.CANCELED
    assert written_off.reason == "never sent"


async def test_an_amend_whose_order_filled_while_being_cancelled_sends_no_replacement():
    async with live(liquidity_share=Decimal("0.0001")) as setup:
        bid = setup.prices.quote().bid
        old = (await send(setup, order(setup, amount="10", limit=str(bid - Decimal("0.02"))))).order
        setup.prices.advance(2)  # part of it fills at the venue; the broker has not looked yet
        new = order(setup, amount="10", limit=str(bid - Decimal("0.05")))
        done = await setup.broker.replace(old, new, setup.prices.quote(), setup.prices.now)
        assert setup.orders_with(new.client_order_id) == 0
    cancelled, replacement = done
    assert cancelled.order.status is OrderStatus.CANCELED
    assert cancelled.fills  # booked, not lost
    assert replacement.order.status is OrderStatus.CANCELED
    assert "filled" in (replacement.reason or "")
