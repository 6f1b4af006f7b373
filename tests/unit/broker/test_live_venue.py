"""What a failed exchange call does to the live broker: credentials refused halt for good, a
venue that is down or asked us to back off pauses new orders (as long as it asked), refused
requests wait out a back-off, and an answer ccxt cannot read is a bad answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal

import ccxt.async_support as ccxt
import pytest

from trader.broker.live.venue import VenueClient
from trader.broker.protocol import BrokerHalt
from trader.domain import Order, OrderType, Side
from trader.market.retry import RetryPolicy

ORDER = Order.create(
    strategy="t", symbol="SOL/USDT", side=Side.BUY, type=OrderType.MARKET, amount=Decimal(1),
    limit_price=None, tick_time=datetime(2024, 3, 1, tzinfo=UTC), leg="x",
)  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 50.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
async def exchange() -> AsyncIterator[ccxt.Exchange]:
    client = ccxt.binance()
    yield client
    await client.close()


def client_of(exchange: ccxt.Exchange, clock: Clock, max_delay_s: float = 30) -> VenueClient:
    retry = RetryPolicy(attempts=4, base_delay_s=0.5, max_delay_s=max_delay_s)
    return VenueClient(exchange, {}, retry, monotonic=clock, sleep=clock.sleep)


async def test_credentials_refused_halt_now_and_on_every_later_check(exchange):
    venue = client_of(exchange, Clock())
    venue.check_halted()
    with pytest.raises(BrokerHalt, match="binance refused our credentials") as raised:
        venue.note("create order", ORDER, ccxt.AuthenticationError('{"code":-2015}'))
    assert "exchange.api_secret" in str(raised.value)
    with pytest.raises(BrokerHalt, match="-2015"):
        venue.check_halted()


async def test_a_rate_limit_pauses_new_orders_as_long_as_the_venue_asked(exchange):
    clock = Clock()
    venue = client_of(exchange, clock)
    exchange.last_response_headers = {"Retry-After": "7"}
    found = venue.note("create order", ORDER, ccxt.RateLimitExceeded('{"code":-1003}'))
    assert found.label == "rate_limited"
    assert venue.paused() == 'rate_limited ({"code":-1003})'
    clock.now += 6.9
    assert venue.paused() is not None
    clock.now += 0.1
    assert venue.paused() is None


async def test_a_venue_that_is_down_without_saying_how_long_pauses_the_longest_wait(exchange):
    clock = Clock()
    venue = client_of(exchange, clock, max_delay_s=12)
    venue.note("create order", ORDER, ccxt.ExchangeNotAvailable("503"))
    clock.now += 11.9
    assert venue.paused() is not None
    clock.now += 0.1
    assert venue.paused() is None


async def test_a_lost_answer_pauses_nothing(exchange):
    venue = client_of(exchange, Clock())
    found = venue.note("create order", ORDER, ccxt.RequestTimeout("timed out"))
    assert found.label == "timeout"
    assert venue.paused() is None
    venue.check_halted()


async def test_a_refused_request_waits_what_the_venue_asked_unless_that_is_too_long(exchange):
    clock = Clock()
    venue = client_of(exchange, clock, max_delay_s=10)
    exchange.last_response_headers = {"retry-after": "3"}
    assert await venue.back_off(0)
    exchange.last_response_headers = {"Retry-After": "11"}
    assert not await venue.back_off(1)
    exchange.last_response_headers = {}
    assert await venue.back_off(1)  # the policy's own back-off: 0.5 s doubled
    assert clock.slept == [3.0, 1.0]


async def test_an_answer_ccxt_cannot_read_is_a_bad_answer(exchange):
    venue = client_of(exchange, Clock())

    async def choke() -> None:
        raise KeyError("price")

    with pytest.raises(ccxt.BadResponse, match="unreadable answer"):
        await venue.ask(choke())
