"""An Alpaca emulator with a paper account, spoken to over HTTP as Alpaca's clients do.

Its market: MSFT's recorded daily bars (tests/data/MSFT_1d_2002_2004.csv.gz, the 2:1 split of
2003-02-18 in them) laid as the hours of a fractionable stock Alpaca lends for shorts,
"MSFT"; AAPL's (AAPL_1d_2004_2006.csv.gz) as the hours of "AAPL" made a whole-share stock
Alpaca does not lend (the emulator's listing, not Apple's real terms); both on the New York
Stock Exchange's sessions around the clock's start; and the late-2022 SOL/USDT hours
(SOLUSDT_1h_2022.csv.gz) as the crypto pair "BTC/USD", with Alpaca's first crypto fee
tier. Only the times are new (see tests/data/README.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal
from zoneinfo import ZoneInfo

import aiohttp

from tests.recorded import AAPL_1D, MSFT_1D, SOLUSDT_1H_2022
from trader.clock import SimulatedClock
from trader.domain import Bar, Timeframe, decimal_from_float
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.emulator.alpaca_sandbox import CRYPTO_FEES, STOCK_FEES
from trader.emulator.sandbox_replay import recorded_bars, restamped
from trader.emulator.sessions import Sessions
from trader.emulator.venue import Venue
from trader.market.replay import read_recording

NEW_YORK = ZoneInfo("America/New_York")
TUESDAY = datetime(2025, 3, 4, 11, 5, tzinfo=NEW_YORK)  # in the session
HOUR = Timeframe("1h")
KEY, SECRET = "paper-key", "paper-secret"


def _instruments() -> list[tuple[Instrument, Any, str]]:
    whole = {"step_size": Decimal(1), "min_qty": Decimal(1), "min_notional": Decimal(1)}
    nine = Decimal("0.000000001")
    return [
        (Instrument("MSFT/USD", step_size=nine, min_qty=nine, min_notional=Decimal(1),
                    asset_class="us_equity", shortable=True, easy_to_borrow=True),
         MSFT_1D, "XNYS"),
        (Instrument("AAPL/USD", **whole, asset_class="us_equity", fractionable=False),
         AAPL_1D, "XNYS"),
        (Instrument("BTC/USD", min_notional=Decimal(1)), SOLUSDT_1H_2022, "continuous"),
    ]  # fmt: skip


@dataclass
class Paper:
    clock: SimulatedClock
    venue: Venue
    server: EmulatorServer
    http: aiohttp.ClientSession
    bars: dict[str, list[Bar]]  # by Alpaca symbol

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.http.get(self.server.base_url + path) as answer:
            return answer.status, await answer.json()

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.http.post(self.server.base_url + path, json=body) as answer:
            return answer.status, await answer.json()

    async def order(
        self,
        symbol: str,
        side: str,
        qty: str,
        *,
        limit: Decimal | None = None,
        tif: str | None = None,  # day for a stock, gtc for crypto
        extended: bool | None = None,
    ) -> tuple[int, Any]:
        tif = tif or ("gtc" if "/" in symbol else "day")
        body: dict[str, Any] = {"symbol": symbol, "side": side, "qty": qty, "time_in_force": tif}
        body["type"] = "market" if limit is None else "limit"
        if limit is not None:
            body["limit_price"] = str(limit)
        if extended is not None:
            body["extended_hours"] = extended
        return await self.post("/v2/orders", body)

    def last_close(self, symbol: str, at: datetime | None = None) -> Decimal:
        """The close of `symbol`'s last bar closed by `at` (now when None), as recorded."""
        when = at or self.clock.now()
        return decimal_from_float([b for b in self.bars[symbol] if b.end <= when][-1].close)

    def limit(self, symbol: str, times: str = "1") -> Decimal:
        """A limit price `times` the last close, on the cent grid."""
        return (self.last_close(symbol) * Decimal(times)).quantize(Decimal("0.01"))

    def bar_at(self, symbol: str, at: datetime) -> Bar:
        """The recorded bar that holds the moment `at` (the first one after it, if none)."""
        return next(b for b in self.bars[symbol] if b.end > at)


@asynccontextmanager
async def paper(
    *,
    account_type: Literal["margin", "cash"] = "margin",
    cash: Decimal = Decimal(100_000),
    now: datetime = TUESDAY,
) -> AsyncIterator[Paper]:
    """The default: a $100,000 paper margin account, as Alpaca opens one."""
    clock = SimulatedClock(now)
    market = EmulatedMarket(clock.now)
    venue = Venue(market, CRYPTO_FEES, unique_client_ids=True)
    bars = {}
    for instrument, path, calendar in _instruments():
        recording = read_recording(path, None if calendar == "continuous" else instrument.symbol)
        laid = restamped(recorded_bars(recording), HOUR, 300, now, calendar)
        market.add_listing(instrument, laid)
        name = instrument.base if calendar == "XNYS" else instrument.symbol
        bars[name] = laid
        if instrument.asset_class == "us_equity":
            venue.fees_by_symbol[instrument.venue_id] = STOCK_FEES
    venue.open_account(KEY, {"USD": cash})
    sessions = Sessions.of("XNYS", now - timedelta(days=90), now + timedelta(days=90))
    server = EmulatorServer(
        market, venue=venue, secrets={KEY: SECRET}, dialect="alpaca", sessions=sessions,
        account_type=account_type,
    )  # fmt: skip
    headers = {"APCA-API-KEY-ID": KEY, "APCA-API-SECRET-KEY": SECRET}
    async with server, aiohttp.ClientSession(headers=headers) as http:
        yield Paper(clock, venue, server, http, bars)
