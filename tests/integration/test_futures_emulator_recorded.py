"""The futures emulator replaying the perp recordings laid out as `trader download` lays them out
(tests/data/perp/: its README says what is real and what is made up), through ccxt's real
`binanceusdm`: a short held through a symbol's move from 8-hour to 4-hour funding is paid
rate x mark x size at every settlement. The test reads the CSV files itself: the funding
rows in the columns of Binance's `GET /fapi/v1/fundingRate` answer (Binance USDⓈ-M "Get Funding
Rate History"), and, where a row has no `markPrice` (as Aster's history has none), the close of
the mark candle that ends at the funding time (Binance "Mark Price Kline/Candlestick Data").
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import ccxt.async_support as ccxt
import pytest

from tests.integration.futures_setup import KEY, SECRET
from trader.clock import SimulatedClock
from trader.domain import Bar, Timeframe
from trader.emulator.futures import FuturesApi, FuturesServer
from trader.emulator.futures_market import FundingEvent, PerpListing, PerpMarket
from trader.emulator.futures_orders import FuturesVenue
from trader.emulator.market import EmulatedMarket, Instrument
from trader.market.ccxt_feed import point_at
from trader.market.hygiene import parse_row
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration
PERP = Path(__file__).parents[1] / "data" / "perp"
HOUR = Timeframe("1h")
SOL = "SOL/USDT:USDT"
HALF_OF_EIGHT = Decimal("5e-9")  # Binance writes USDT amounts to 8 places


def ms_time(text: str) -> datetime:
    return datetime.fromtimestamp(int(text) / 1000, UTC)


def funding_rows() -> list[dict[str, str]]:
    with (PERP / "funding" / "SOLUSDT_1h.csv").open() as file:
        return list(csv.DictReader(file))


def mark_rows() -> list[dict[str, str]]:
    with (PERP / "mark" / "SOLUSDT_1h.csv").open() as file:
        return list(csv.DictReader(file))


def mark_bars() -> list[Bar]:
    return [
        Bar("SOL/USDT", HOUR, ms_time(r["timestamp"]), float(r["open"]), float(r["high"]),
            float(r["low"]), float(r["close"]), 0.0)
        for r in mark_rows()
    ]  # fmt: skip


@pytest.mark.skipif(not (PERP / "funding").exists(), reason="the perp recordings are not here")
async def test_a_short_is_paid_at_every_recorded_settlement_through_an_interval_change() -> None:
    recording = read_recording(PERP / "SOLUSDT_1h.csv.gz")
    last = [parse_row(row, "SOL/USDT", recording.timeframe) for row in recording.rows]
    bars = [b for b in last if isinstance(b, Bar)]
    rows = funding_rows()
    events = [
        FundingEvent(ms_time(r["fundingTime"]), Decimal(r["fundingRate"]),
                     Decimal(r["markPrice"]) if r["markPrice"] else None)
        for r in rows
    ]  # fmt: skip
    clock = SimulatedClock(bars[0].start + timedelta(hours=1, seconds=5))
    perps = PerpMarket(EmulatedMarket(clock.now))
    perps.list_perp(PerpListing(Instrument("SOL/USDT"), mark_bars(), events), bars)
    venue = FuturesVenue(perps)
    venue.open_account(KEY, Decimal(1000))
    async with FuturesServer(FuturesApi(venue, {KEY: SECRET})) as server:
        exchange = ccxt.binanceusdm({"apiKey": KEY, "secret": SECRET, "timeout": 3000})
        point_at(exchange, server.base_url)
        try:
            await exchange.load_markets()
            await exchange.create_order(SOL, "market", "sell", 10)
            opened = clock.now()
            last_time = ms_time(rows[-1]["fundingTime"])
            clock.advance_to(last_time - timedelta(hours=2))
            assert (await exchange.fetch_funding_interval(SOL))["interval"] == "4h"
            clock.advance_to(last_time + timedelta(seconds=5))
            paid = await exchange.fetch_funding_history(SOL, limit=1000)
        finally:
            await exchange.close()
    closes = {ms_time(r["timestamp"]) + HOUR.duration: Decimal(r["close"]) for r in mark_rows()}
    expected = []
    for row in rows:
        when = ms_time(row["fundingTime"])
        if opened < when:
            mark = Decimal(row["markPrice"]) if row["markPrice"] else closes[when]
            expected.append((int(row["fundingTime"]), 10 * mark * Decimal(row["fundingRate"])))
    assert len(expected) == len(rows)  # every settlement fell after the position opened
    assert [x["timestamp"] for x in paid] == [when for when, _ in expected]
    for row, (_, income) in zip(paid, expected, strict=True):  # written to 8 places
        assert abs(Decimal(row["info"]["income"]) - income) <= HALF_OF_EIGHT
    assert any(not row["markPrice"] for row in rows)  # the 4-hour part has no recorded mark
