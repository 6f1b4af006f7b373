"""The live broker after an outage and with refused keys: a pause because the venue was down
ends once a whole reconciliation has read it (the daemon reconciles the moment the exchange is
back, then trades), one the venue asked for stands; every failed call is counted by the
feed's kinds, refused keys as `authentication` before the halt."""

from __future__ import annotations

from collections.abc import AsyncIterator

import ccxt.async_support as ccxt
import pytest

from tests.unit.broker.test_live_venue import ORDER, Clock
from trader.broker.live.venue import VenueClient
from trader.broker.protocol import BrokerHalt
from trader.market.retry import RetryPolicy


@pytest.fixture
async def exchange() -> AsyncIterator[ccxt.Exchange]:
    client = ccxt.binance()
    yield client
    await client.close()


def client_of(exchange: ccxt.Exchange, clock: Clock, counted: list[str]) -> VenueClient:
    retry = RetryPolicy(attempts=4, base_delay_s=0.5, max_delay_s=20)
    return VenueClient(
        exchange, {}, retry, monotonic=clock, sleep=clock.sleep, on_error=counted.append
    )


async def test_a_pause_for_a_venue_that_was_down_ends_when_a_reconciliation_read_it(exchange):
    clock, counted = Clock(), []
    venue = client_of(exchange, clock, counted)
    venue.note("poll open orders", ORDER, ccxt.ExchangeNotAvailable("binance 503 <html>503"))
    assert venue.paused() is not None
    clock.now += 1
    began = clock.now  # the reconciliation after the return
    clock.now += 0.7
    venue.answered(began)
    assert venue.paused() is None
    assert counted == ["unavailable"]


async def test_a_pause_that_began_during_the_reconciliation_stands(exchange):
    clock, counted = Clock(), []
    venue = client_of(exchange, clock, counted)
    began = clock.now
    clock.now += 0.2
    venue.note("look up", ORDER, ccxt.ExchangeNotAvailable("binance 503"))
    venue.answered(began)
    assert venue.paused() is not None


@pytest.mark.parametrize(
    ("error", "kind"),
    [(ccxt.RateLimitExceeded('{"code":-1003}'), "rate_limited"),
     (ccxt.ExchangeNotAvailable("binance 503 maintenance"), "unavailable")],
)  # fmt: skip
async def test_a_pause_the_venue_asked_for_stands(exchange, error, kind):
    clock, counted = Clock(), []
    venue = client_of(exchange, clock, counted)
    exchange.last_response_headers = {"Retry-After": "60"}
    venue.note("create order", ORDER, error)
    clock.now += 1
    venue.answered(clock.now)
    assert venue.paused() is not None
    clock.now += 59
    assert venue.paused() is None
    assert counted == [kind]


async def test_refused_keys_are_counted_before_the_halt(exchange):
    clock, counted = Clock(), []
    venue = client_of(exchange, clock, counted)
    body = '{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}'
    with pytest.raises(BrokerHalt, match=r"exchange\.api_key"):
        venue.note("create order", ORDER, ccxt.DDoSProtection(f"binance {body}"))
    assert counted == ["authentication"]
