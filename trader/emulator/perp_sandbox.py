"""`trader sandbox --venue binanceusdm|aster`: the futures emulator (`trader.emulator.futures`)
as a USDⓈ-M perp venue to trade against live, without an account.

As the spot sandbox: recorded bars replayed on the wall clock, each compressed to
`bar_seconds` (served as `<n>s` klines), `warmup` of them closed at the start; one account
with a USDT wallet. Beside each bar file, the mark-price candles and funding rows recorded by
`trader download` for a perp (`trader.market.files.funding`: `mark/<stem>`, `funding/<stem>`)
are laid on the same compressed time: a funding time between two bar starts keeps its share
of the bar. Without mark candles the mark is the last price (said in the instructions); without
funding rows nothing is paid.

The futures API has no quotes route of its own (helper B's emulator serves klines, premium
index and funding, not the book): Binance's `GET /fapi/v1/ticker/bookTicker` and
`GET /fapi/v1/depth` are added here (and under /fapi/v3 for Aster), on the same top of book
the orders fill against, as the daemon's market data reads them (ccxt binanceusdm
`fetch_bids_asks` / `fetch_order_book`; shapes from Binance's USDⓈ-M "Symbol Order Book
Ticker" and "Order Book").

Aster signs with an Ethereum key: the sandbox makes one (its address is the account's user)
and hands it to the daemon as `exchange.api_secret`, which `create_exchange` gives ccxt's
`aster` as its `privateKey`.
"""

from __future__ import annotations

import bisect
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from aiohttp import web

from trader.domain import Bar, Timeframe, from_epoch_ms, to_epoch_ms
from trader.emulator.faults import FaultPlan
from trader.emulator.futures import FuturesApi, FuturesServer
from trader.emulator.futures_market import FundingEvent, PerpListing, PerpMarket
from trader.emulator.futures_orders import FuturesVenue
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.sandbox_replay import (
    SandboxAccess,
    SandboxClock,
    SandboxSettings,
    recorded_bars,
    restamped,
)
from trader.emulator.venue import Fees
from trader.emulator.wire import ms, num
from trader.market.files.funding import find_funding, find_marks, read_funding, read_marks
from trader.market.replay import Recording

# Binance USDⓈ-M regular tier: maker 0.0200%, taker 0.0500% (binance.com/en/fee/futureFee).
FUTURES_FEES = Fees(Decimal("0.0002"), Decimal("0.0005"))


class QuotedFuturesApi(FuturesApi):
    """The futures API with Binance's book ticker and depth routes."""

    def app(self) -> web.Application:
        app = super().app()
        for prefix in ("/fapi/v1", "/fapi/v3"):
            app.router.add_get(f"{prefix}/ticker/bookTicker", self.book_ticker)
            app.router.add_get(f"{prefix}/depth", self.depth)
        return app

    def _ticker(self, listing: PerpListing) -> dict[str, Any]:
        venue_id = listing.instrument.venue_id
        book = self.perps.market.top_of_book(venue_id)
        bid, ask = book if book is not None else (Decimal(0), Decimal(0))
        return {
            "symbol": venue_id, "bidPrice": num(bid), "bidQty": "10", "askPrice": num(ask),
            "askQty": "10", "time": ms(self.venue.clock()),
        }  # fmt: skip

    async def book_ticker(self, request: web.Request) -> web.Response:
        if "symbol" in request.query:
            return web.json_response(self._ticker(self._listing(request)))
        return web.json_response([self._ticker(listing) for listing in self.perps.listings])

    async def depth(self, request: web.Request) -> web.Response:
        ticker = self._ticker(self._listing(request))
        now = ms(self.venue.clock())
        return web.json_response({
            "lastUpdateId": now, "E": now, "T": now,
            "bids": [[ticker["bidPrice"], "10"]], "asks": [[ticker["askPrice"], "10"]],
        })  # fmt: skip


class SandboxServer(FuturesServer):
    """`FuturesServer` started and stopped as the spot sandbox's server is."""

    async def start(self) -> None:
        await self.__aenter__()

    async def stop(self) -> None:
        await self.__aexit__()


def perp_symbol(symbol: str) -> str:
    """ccxt's unified perp symbol: SOL/USDT -> SOL/USDT:USDT (kept when it has its settle)."""
    return symbol if ":" in symbol else f"{symbol}:{symbol.split('/')[1]}"


def _retimed(original: list[Bar], laid: list[Bar]) -> Any:
    """Recorded time -> the sandbox's: within bar i, its share of the bar kept."""
    starts = [b.start for b in original]
    length = original[0].timeframe.duration if original else timedelta(0)

    def at(when: datetime) -> datetime | None:
        index = bisect.bisect_right(starts, when) - 1
        if index < 0 or index >= len(laid):
            return None
        share = (when - starts[index]) / length
        return laid[index].start + laid[index].timeframe.duration * share

    return at


def listing_of(recording: Recording, timeframe: Timeframe, warmup: int, now: datetime) -> tuple[
    PerpListing, list[Bar], list[str]
]:  # fmt: skip
    """A recording's perp listing (mark, funding) and last-price bars laid around `now`; what
    it lacks, said."""
    original = recorded_bars(recording)
    laid = restamped(original, timeframe, warmup, now)
    if len(laid) <= warmup:
        raise ValueError(f"{recording.path}: {len(laid)} bars, not more than the warm-up {warmup}")
    symbol = perp_symbol(recording.symbol).split(":")[0]
    laid = [Bar(symbol, timeframe, b.start, b.open, b.high, b.low, b.close, b.volume,
                b.quote_volume) for b in laid]  # fmt: skip
    retime = _retimed(original, laid)
    said: list[str] = []
    marks_file = find_marks(recording.path)
    mark_bars = laid
    if marks_file is None:
        said.append(f"{recording.symbol}: no mark candles recorded: the mark is the last price")
    else:
        length_ms = int(recording.timeframe.duration.total_seconds() * 1000)
        by_start = {to_epoch_ms(b.start): n for n, b in enumerate(original[: len(laid)])}
        mark_bars = []
        for candle in read_marks(marks_file, length_ms).candles:
            n = by_start.get(candle.open_ms)
            if n is not None:
                o, h, lo, c = (
                    float(x) for x in (candle.open, candle.high, candle.low, candle.close)
                )
                mark_bars.append(Bar(symbol, timeframe, laid[n].start, o, h, lo, c, 0.0))
        if not mark_bars:
            raise ValueError(f"{marks_file}: no mark candle at a recorded bar's time")
    events: list[FundingEvent] = []
    funding_file = find_funding(recording.path)
    if funding_file is None:
        said.append(f"{recording.symbol}: no funding recorded: nothing is paid")
    else:
        for rate in read_funding(funding_file):
            when = retime(from_epoch_ms(rate.at_ms))
            if when is not None:
                events.append(FundingEvent(when, rate.rate, rate.mark))
    instrument = Instrument(symbol)
    return PerpListing(instrument, mark_bars, events), laid, said


@dataclass
class PerpSandbox:
    server: SandboxServer
    clock: SandboxClock
    venue_name: str  # binanceusdm | aster
    api_key: str
    api_secret: str  # Aster: the account's Ethereum private key
    symbols: list[str]
    timeframe: str
    ends: datetime
    said: list[str]

    @property
    def access(self) -> SandboxAccess:
        venue = {"TRADER_EXCHANGE__ID": self.venue_name, "TRADER_MARKET__KIND": "perp"}
        return SandboxAccess(
            self.venue_name, self.server.base_url, self.api_key, self.api_secret, self.symbols,
            self.timeframe, venue,
        )  # fmt: skip

    def daemon_settings(self) -> dict[str, str]:
        return self.access.daemon_settings()

    def ready(self) -> dict[str, Any]:
        return {**self.access.ready(), "notes": self.said}

    def instructions(self) -> str:
        url = self.server.base_url
        return "\n".join([
            f"sandbox: {self.venue_name} USDⓈ-M futures emulator at {url}, replaying "
            f"{', '.join(self.symbols)} as {self.timeframe} bars until {self.ends:%H:%M:%S} UTC",
            *self.said,
            *self.access.how_to_trade(),
            f"faults: POST {url}/__emulator__/faults",
        ])  # fmt: skip


async def open_perp_sandbox(settings: SandboxSettings) -> PerpSandbox:
    """Raises ValueError for settings it cannot serve (the message says why)."""
    if settings.bar_seconds != int(settings.bar_seconds):
        raise ValueError("the sandbox's shortest bars are a second long: --bar-seconds 1 or more")
    timeframe = Timeframe(f"{int(settings.bar_seconds)}s")
    clock = SandboxClock()
    now = clock.now()
    perps = PerpMarket(EmulatedMarket(clock.now))
    ends, said = now, list[str]()
    for recording in settings.recordings:
        listing, laid, notes = listing_of(recording, timeframe, settings.warmup, now)
        perps.list_perp(listing, laid)
        ends, said = max(ends, laid[-1].end), said + notes
    venue = FuturesVenue(perps, FUTURES_FEES, liquidity_share=settings.liquidity_share)
    key = settings.api_key or "sandbox-" + secrets.token_hex(8)
    secret = settings.api_secret or secrets.token_hex(24)
    aster_users: dict[str, str] = {}
    if settings.venue == "aster":
        import ccxt  # noqa: PLC0415 - its Ethereum helpers, only for Aster

        secret = settings.api_secret or "0x" + secrets.token_hex(32)
        address = ccxt.aster().eth_get_address_from_private_key(secret)
        aster_users[str(address).lower()] = key
    venue.open_account(key, settings.cash)
    api = QuotedFuturesApi(
        venue, {key: secret}, FaultPlan(), aster_users=aster_users, on_clock=clock.pause
    )
    server = SandboxServer(api, settings.host, settings.port)
    await server.start()
    symbols = [perp_symbol(r.symbol) for r in settings.recordings]
    return PerpSandbox(server, clock, settings.venue, key, secret, symbols, timeframe.text, ends,
                       said)  # fmt: skip
