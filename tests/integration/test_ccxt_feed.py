"""The ccxt adapter through the real ccxt library, against the Binance emulator on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest

from tests.integration.emulated import Venue, ccxt_feed, venue
from trader.config.market_settings import MarketSettings
from trader.domain import QuoteSource, decimal_from_float
from trader.emulator import EmulatorServer, Fault
from trader.market.feed import ExchangeCallFailed, UnknownSymbols
from trader.market.hygiene import SkipReason
from trader.market.step import MarketDataStep

pytestmark = pytest.mark.integration
SYMBOLS = ["SOL/USDT", "BTC/USDT"]


def eight_decimals(value: float) -> float:
    return float(f"{decimal_from_float(value):.8f}")


def settings(**overrides) -> MarketSettings:
    return MarketSettings(**({"symbols": SYMBOLS, "context_bars": 64} | overrides))


@asynccontextmanager
async def running(
    v: Venue, errors: list[str] | None = None, timeout_s: float = 2.0, **overrides: object
) -> AsyncIterator[tuple[EmulatorServer, MarketDataStep]]:
    """The emulator serving `v`, and a started data step reading it through ccxt."""
    async with EmulatorServer(v.market) as server:
        feed = ccxt_feed(server.base_url, v.clock, errors, timeout_s=timeout_s)
        step = MarketDataStep(feed, settings(**overrides))
        try:
            await step.start(v.clock.now())
            yield server, step
        finally:
            await feed.close()


async def test_markets_load_and_unknown_symbols_are_named_with_a_suggestion():
    v = venue()
    async with EmulatorServer(v.market) as server:
        feed = ccxt_feed(server.base_url, v.clock)
        try:
            await feed.start(SYMBOLS)
            assert feed.exchange.enableRateLimit
            assert feed.exchange.markets["SOL/USDT"]["precision"]["price"] == 0.01
            with pytest.raises(
                UnknownSymbols, match=r"ETH/USDT, SOL/USDC \(did you mean SOL/USDT\?\)"
            ):
                feed.check_symbols(["SOL/USDT", "ETH/USDT", "SOL/USDC"])
        finally:
            await feed.close()


async def test_only_closed_bars_reach_the_window_exactly_as_the_exchange_sent_them():
    v = venue(start_index=600)
    v.at_bar(600, seconds=1800)  # half-way through bar 600: it is still forming
    async with running(v) as (server, step):
        data = await step.run(v.clock.now())
    assert data.skipped == {}
    for symbol in SYMBOLS:
        bars = data.ready[symbol].bars
        expected = v.bars[symbol][600 - 64 : 600]
        # Binance sends numbers as text with 8 decimals; ccxt parses that text.
        assert [(b.start, b.open, b.high, b.low, b.close, b.volume) for b in bars] == [
            (b.start, *(eight_decimals(x) for x in (b.open, b.high, b.low, b.close, b.volume)))
            for b in expected
        ]
        quote = data.ready[symbol].quote
        assert quote.source is QuoteSource.REAL
        assert quote.bid < quote.ask
    assert any("ticker/bookTicker?symbols=" in r for r in server.requests)  # one batch call


@pytest.mark.parametrize(
    ("has", "endpoint"),
    [
        ({"fetchBidsAsks": False}, "/api/v3/ticker/24hr"),
        ({"fetchBidsAsks": False, "fetchTickers": False}, "/api/v3/depth"),
    ],
)
async def test_quotes_come_from_whatever_the_exchange_supports(has, endpoint):
    v = venue()
    async with EmulatorServer(v.market) as server:
        feed = ccxt_feed(server.base_url, v.clock)
        try:
            await feed.start(SYMBOLS)
            feed.exchange.has = dict(feed.exchange.has) | has
            quotes = await feed.top_of_book(SYMBOLS)
        finally:
            await feed.close()
    assert set(quotes) == set(SYMBOLS)
    assert any(r.startswith(endpoint) for r in server.requests)
    book = v.market.top_of_book("SOLUSDT")
    assert book is not None
    assert (float(quotes["SOL/USDT"].bid), float(quotes["SOL/USDT"].ask)) == (
        float(book[0]),
        float(book[1]),
    )


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault("delay", "/api/v3/klines", delay_s=1.0), "timeout"),
        # ccxt's Binance adapter raises DDoSProtection for both 418 and 429.
        (Fault("status", "/api/v3/klines", status=429, retry_after_s=1), "ddos_protection"),
        (Fault("status", "/api/v3/klines", status=418, retry_after_s=1), "ddos_protection"),
        (
            Fault("status", "/api/v3/klines", status=502, body="<html>bad gateway</html>"),
            "unavailable",
        ),
        (Fault("status", "/api/v3/klines", status=503), "operation_failed"),
        # aiohttp retries a dropped keep-alive connection once by itself, hence two drops.
        (Fault("drop", "/api/v3/klines", times=2), "unavailable"),
    ],
)
async def test_transient_faults_are_retried_counted_and_survived(fault, kind):
    v = venue()
    errors: list[str] = []
    async with running(v, errors, timeout_s=0.5) as (server, step):
        server.faults.add(fault)
        began = time.monotonic()
        data = await step.run(v.clock.now())
        took = time.monotonic() - began
    assert data.skipped == {}
    assert set(data.ready) == set(SYMBOLS)
    assert kind in errors
    if fault.retry_after_s:
        assert took >= fault.retry_after_s  # the exchange's Retry-After was honoured


async def test_an_exchange_that_stays_down_skips_the_tick_and_the_next_tick_recovers():
    v = venue()
    errors: list[str] = []
    async with running(v, errors) as (server, step):
        server.faults.add(Fault("status", "*", status=503, times=-1))
        down = await step.run(v.clock.now())
        server.faults.clear()
        v.at_bar(601)
        up = await step.run(v.clock.now())
    assert down.skipped == dict.fromkeys(SYMBOLS, SkipReason.EXCHANGE_UNAVAILABLE)
    assert step.skips.counts[SkipReason.EXCHANGE_UNAVAILABLE] == 2
    assert errors.count("operation_failed") >= 2 * 4
    assert set(up.ready) == set(SYMBOLS)


async def test_a_long_retry_after_is_respected_without_sending_anything():
    v = venue()
    async with EmulatorServer(v.market) as server:
        feed = ccxt_feed(server.base_url, v.clock)
        try:
            await feed.start(SYMBOLS)
            server.faults.add(Fault("status", "/api/v3/klines", status=418, retry_after_s=120))
            with pytest.raises(ExchangeCallFailed, match="ddos_protection"):
                await feed.ohlcv("SOL/USDT", v.bars["SOL/USDT"][0].timeframe, None, 5)
            sent = len(server.requests)
            with pytest.raises(ExchangeCallFailed, match="cooling_down"):
                await feed.ohlcv("SOL/USDT", v.bars["SOL/USDT"][0].timeframe, None, 5)
            assert len(server.requests) == sent
        finally:
            await feed.close()


async def test_malformed_payloads_are_caught_by_hygiene_and_counted():
    v = venue()
    errors: list[str] = []
    # One bar in a row after a hole is enough here: the test is about the rows.
    async with running(v, errors, symbols=["SOL/USDT"], min_contiguous_bars=1) as (server, step):
        first = await step.run(v.clock.now())
        assert first.ready
        window_before = step.windows["SOL/USDT"].snapshot()
        v.at_bar(602)
        next_ms = int(v.bars["SOL/USDT"][600].start.timestamp() * 1000)
        nan_row = [next_ms, "NaN", "1", "1", "1", "1", next_ms + 3599999, "1", 1, "1", "1", "0"]
        # Garbage parses (in ccxt) to rows of nothing or to no rows: invalid or stale. Each
        # answer stands for the whole tick (a bad row is asked for again before it is dropped).
        unusable = {SkipReason.INVALID_BAR, SkipReason.STALE_BARS}
        for body in ("<html>oops</html>", '{"unexpected": true}', json.dumps([nan_row])):
            server.faults.add(Fault("malformed", "/api/v3/klines", body=body, times=-1))
            data = await step.run(v.clock.now())
            server.faults.clear()
            assert data.skipped["SOL/USDT"] in unusable, body
            assert step.windows["SOL/USDT"].snapshot() == window_before
        # No price in the batch answer: the order book is asked; an empty book, no quote.
        server.faults.add(
            Fault("malformed", "/api/v3/ticker/bookTicker", body="[]"),
            Fault("malformed", "/api/v3/depth", body='{"lastUpdateId": 1, "bids": [], "asks": []}'),
        )
        no_quote = await step.run(v.clock.now())
        recovered = await step.run(v.clock.now())
    assert step.skips.counts[SkipReason.INVALID_BAR] == 1  # the NaN row, dropped for good
    assert no_quote.skipped == {"SOL/USDT": SkipReason.NO_QUOTE}
    bars = recovered.ready["SOL/USDT"].bars
    assert bars[-1].start == v.bars["SOL/USDT"][601].start
    assert bars[-2].start == v.bars["SOL/USDT"][599].start  # the hole closed up


async def test_a_bad_row_the_exchange_sends_once_is_asked_for_again():
    v = venue()
    async with running(v, symbols=["SOL/USDT"]) as (server, step):
        await step.run(v.clock.now())
        v.at_bar(602)
        rows = [_kline(b) for b in v.bars["SOL/USDT"][600:602]]
        rows[0][4] = "NaN"  # bar 600's close
        server.faults.add(Fault("malformed", "/api/v3/klines", body=json.dumps(rows)))
        data = await step.run(v.clock.now())
    assert data.skipped == {}
    assert data.ready["SOL/USDT"].bars[-2].close == eight_decimals(v.bars["SOL/USDT"][600].close)
    assert not step.skips.counts


async def test_a_gap_is_refilled_from_the_exchange():
    v = venue()
    async with running(v, symbols=["SOL/USDT"]) as (server, step):
        await step.run(v.clock.now())
        v.at_bar(604)
        rows = [_kline(b) for i, b in enumerate(v.bars["SOL/USDT"][600:605]) if i != 1]
        server.faults.add(Fault("malformed", "/api/v3/klines", body=json.dumps(rows)))
        data = await step.run(v.clock.now())
        rows = [_kline(b) for i, b in enumerate(v.bars["SOL/USDT"][603:606]) if i != 1]
        server.faults.add(Fault("malformed", "/api/v3/klines", body=json.dumps(rows), times=-1))
        v.at_bar(606)
        gap = await step.run(v.clock.now())
        server.faults.clear()
    assert data.skipped == {}
    assert [b.start for b in data.ready["SOL/USDT"].bars[-4:]] == [
        b.start for b in v.bars["SOL/USDT"][600:604]
    ]
    # The exchange keeps missing bar 604, refill included: counted missing, and the symbol
    # waits for bars in a row (gap_policy skip) with 605 in its window after 603.
    assert gap.skipped == {"SOL/USDT": SkipReason.GAP}
    assert step.missing["SOL/USDT"] == 1
    assert [b.start for b in step.windows["SOL/USDT"].snapshot()[-2:]] == [
        v.bars["SOL/USDT"][603].start, v.bars["SOL/USDT"][605].start,
    ]  # fmt: skip


async def test_a_bar_the_exchange_has_not_published_yet_makes_the_symbol_stale():
    v = venue()
    async with running(v, symbols=["SOL/USDT"]) as (server, step):
        await step.run(v.clock.now())
        v.clock.advance_to(v.clock.now() + timedelta(hours=3))
        server.faults.add(Fault("malformed", "/api/v3/klines", body="[]"))
        data = await step.run(v.clock.now())
    assert data.skipped == {"SOL/USDT": SkipReason.STALE_BARS}


def _kline(bar) -> list:
    ms = int(bar.start.timestamp() * 1000)
    return [ms, str(bar.open), str(bar.high), str(bar.low), str(bar.close), str(bar.volume),
            ms + 3_599_999, "0", 1, "0", "0", "0"]  # fmt: skip


async def test_the_market_list_is_refreshed_when_due_and_a_delisting_skips_only_that_symbol():
    v = venue()

    def market_loads() -> int:
        return sum(r.startswith("/api/v3/exchangeInfo") for r in server.requests)

    async with running(v, markets_refresh_s=7200) as (server, step):
        assert set((await step.run(v.clock.now())).ready) == set(SYMBOLS)
        v.market.delist("SOLUSDT")
        v.at_bar(601)  # an hour after the first load: no reload yet
        first = await step.run(v.clock.now())
        assert market_loads() == 1
        v.at_bar(602)  # two hours after: due
        second = await step.run(v.clock.now())
        assert market_loads() == 2
    for data in (first, second):
        assert data.skipped == {"SOL/USDT": SkipReason.EXCHANGE_UNAVAILABLE}
        assert set(data.ready) == {"BTC/USDT"}
