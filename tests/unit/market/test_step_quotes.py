"""Quotes as the data step and the feed hand them on: a quote too old to trade on still says
when it was the book (its age is what the stale-quote alert reads), and an exchange whose every
order book call fails is said to be away, not to have empty books."""

from __future__ import annotations

from datetime import timedelta

import ccxt.async_support as ccxt
import pytest

from tests.recorded import SOLUSDT_1H
from trader.clock import SimulatedClock
from trader.config.market_settings import MarketSettings
from trader.domain import from_epoch_ms
from trader.market.ccxt_feed import CcxtMarketData
from trader.market.feed import ExchangeCallFailed
from trader.market.hygiene import SkipReason
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData, read_recording
from trader.market.retry import RetryPolicy
from trader.market.step import MarketDataStep

CONTEXT = 64


async def test_a_stale_quote_skips_its_symbol_and_still_says_when_it_was_the_book():
    recording = read_recording(SOLUSDT_1H)
    close = from_epoch_ms(recording.rows[CONTEXT][0])  # bar CONTEXT-1 has just closed
    clock = SimulatedClock(close)
    feed = ReplayMarketData({"SOL/USDT": recording}, clock, FixedSpread(4))
    settings = MarketSettings(symbols=["SOL/USDT"], context_bars=CONTEXT, max_quote_age_s=30)
    step = MarketDataStep(feed, settings)
    await step.start(clock.now())
    fresh = await step.run(clock.now())
    assert fresh.quote_times == {"SOL/USDT": close}
    assert "SOL/USDT" in fresh.ready
    # A minute later the modelled quote (stamped at the bar's close) is too old to trade on.
    await clock.sleep_until(close + timedelta(minutes=1))
    stale = await step.run(clock.now())
    assert stale.skipped == {"SOL/USDT": SkipReason.STALE_QUOTE}
    assert stale.quote_times == {"SOL/USDT": close}


class Books:
    """An exchange with only order books; the symbols in `down` fail like a refused
    connection."""

    id = "fake"

    def __init__(self, down: set[str]) -> None:
        self.down = down
        self.has = {"fetchOrderBook": True}

    async def fetch_order_book(self, symbol: str, limit: int) -> dict:
        if symbol in self.down:
            raise ccxt.NetworkError("connection refused")
        return {"bids": [[99.0, 1.0]], "asks": [[101.0, 1.0]], "timestamp": None}


def books(down: set[str]) -> CcxtMarketData:
    clock = SimulatedClock(from_epoch_ms(1_700_000_000_000))
    return CcxtMarketData(Books(down), clock, retry=RetryPolicy(attempts=1))  # type: ignore[arg-type]


async def test_order_books_that_all_fail_mean_the_exchange_is_away():
    with pytest.raises(ExchangeCallFailed) as failed:
        await books({"SOL/USDT", "BTC/USDT"}).top_of_book(["SOL/USDT", "BTC/USDT"])
    assert failed.value.kind == "network"


async def test_one_order_book_failing_leaves_the_others_priced():
    quotes = await books({"BTC/USDT"}).top_of_book(["SOL/USDT", "BTC/USDT"])
    assert list(quotes) == ["SOL/USDT"]
