"""Settling an order whose outcome is unknown, part by part, on the real ccxt client against
the emulator's signed endpoints, with a clock the test moves: looked up by its client id, it
takes the venue's state when found, and is known never to have arrived only once its
recvWindow (plus a second of skew) has passed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.integration.emulated import FAST_RETRY
from tests.integration.live_setup import Live, live
from trader.broker.live.book import OpenOrders
from trader.broker.live.fills import FillBooking
from trader.broker.live.unknown import OutcomeResolver
from trader.broker.live.venue import VenueClient
from trader.domain import Order, OrderStatus, OrderType, Side

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def parts(setup: Live, clock: Clock) -> tuple[OpenOrders, OutcomeResolver]:
    client = VenueClient(setup.feed.exchange, setup.instruments, FAST_RETRY, monotonic=clock)
    orders = OpenOrders(clock, recv_window_ms=1000)
    return orders, OutcomeResolver(client, orders, FillBooking(client, orders))


def order(setup: Live, leg: str) -> Order:
    return Order.create(
        strategy="t", symbol="SOL/USDT", side=Side.BUY, type=OrderType.MARKET,
        amount=Decimal(2), limit_price=None, tick_time=setup.prices.now, leg=leg,
    )  # fmt: skip


async def test_an_order_the_venue_never_got_stays_unknown_until_its_window_has_passed():
    async with live() as setup:
        clock = Clock()
        orders, resolver = parts(setup, clock)
        lost = order(setup, "never").transition(OrderStatus.SUBMITTED)
        lost = lost.transition(OrderStatus.UNKNOWN)
        orders.track(lost)
        orders.sent_now(lost)
        assert await resolver.resolve(lost, setup.prices.now) is None
        clock.now += 1.9
        assert await resolver.resolve(lost, setup.prices.now) is None
        clock.now += 0.1
        never = await resolver.resolve(lost, setup.prices.now)
        assert never is not None
        assert never.order.status is OrderStatus.REJECTED
        assert never.reason == "never reached the venue: not found 2s after it was sent"
        assert orders.all() == []
        assert setup.orders_with(lost.client_order_id) == 0


async def test_an_order_the_venue_took_is_found_by_its_client_id_with_its_fills():
    async with live() as setup:
        clock = Clock()
        orders, resolver = parts(setup, clock)
        sent = order(setup, "taken").transition(OrderStatus.SUBMITTED)
        await setup.feed.exchange.create_order(
            "SOL/USDT", "market", "buy", 2.0, None, {"newClientOrderId": sent.client_order_id}
        )  # the answer arrived, but suppose it had been lost
        lost = sent.transition(OrderStatus.UNKNOWN)
        orders.track(lost)
        found = await resolver.resolve(lost, setup.prices.now)
        assert found is not None
        assert found.order.status is OrderStatus.FILLED
        assert found.reason == "found at the venue"
        assert sum(f.amount for f in found.fills) == Decimal(2)
        assert orders.all() == []
        assert setup.orders_with(sent.client_order_id) == 1


async def test_an_order_recorded_before_a_restart_is_looked_up_not_sent():
    async with live() as setup:
        orders, resolver = parts(setup, Clock())
        recorded = order(setup, "recorded")  # PENDING: the process died around the send
        assert await resolver.look_first(recorded, setup.prices.now) is None
        assert setup.orders_with(recorded.client_order_id) == 0
        assert orders.all() == []
        assert "/api/v3/order" not in setup.server.requests  # no create (a lookup has a query)
        assert any(r.startswith("/api/v3/order?") for r in setup.server.requests)
