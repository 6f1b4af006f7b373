"""Alpaca's market data API as the emulator serves it: stock bars and latest quotes
(`/v2/stocks/...`, on the feed asked for, as the account's data plan allows: `alpaca_feeds`)
and crypto ones (`/v1beta3/crypto/us/...`), from the emulated market's recorded bars and its
top of book."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from aiohttp import web

from trader.domain import Bar, Timeframe
from trader.emulator.alpaca_feeds import FEEDS, DataPlan, trade_count
from trader.emulator.alpaca_wire import alpaca_symbol, error, go_time, rfc3339
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.sessions import Sessions
from trader.market.alpaca.wire import RECENT_SIP_REFUSED

_TIMEFRAME = re.compile(r"^(\d+)(Min|T|Hour|H|Day|D|Week|W)$")
_UNITS = {"Min": "m", "T": "m", "Hour": "h", "H": "h", "Day": "d", "D": "d", "Week": "w", "W": "w"}
MAX_LIMIT = 10_000


class DataError(Exception):
    """A market data refusal; `code` None: Alpaca answers it with a message alone."""

    def __init__(self, status: int, message: str, code: int | None = 40010001) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def timeframe(value: str) -> Timeframe:
    match = _TIMEFRAME.match(value)
    if match is None:
        raise DataError(400, f"invalid timeframe: {value}")
    return Timeframe(f"{match.group(1)}{_UNITS[match.group(2)]}")


def when(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise DataError(400, f"invalid time: {value}") from None
    if parsed.tzinfo is None:
        raise DataError(400, f"time without a zone: {value}")
    return parsed


def bar_json(bar: Bar, feed: str | None = None) -> dict[str, Any]:
    """A bar as Alpaca writes it; `feed`: a stock's (its volume whole shares, as Alpaca's
    are), None for crypto."""
    volume: float | int = bar.volume
    if feed is not None and bar.volume.is_integer():
        volume = int(bar.volume)
    return {
        "t": go_time(bar.start),
        "o": bar.open,
        "h": bar.high,
        "l": bar.low,
        "c": bar.close,
        "v": volume,
        "n": trade_count(feed),
        "vw": (bar.open + bar.close) / 2,
    }


@dataclass
class AlpacaData:
    market: EmulatedMarket
    sessions: Sessions | None
    plan: DataPlan = field(default_factory=DataPlan)

    def routes(self, app: web.Application) -> None:
        get = app.router.add_get
        get("/v2/stocks/bars", self.stock_bars)
        get("/v2/stocks/quotes/latest", self.stock_quotes)
        get("/v1beta3/crypto/us/bars", self.crypto_bars)
        get("/v1beta3/crypto/us/latest/quotes", self.crypto_quotes)

    def _listed(self, request: web.Request, asset_class: str) -> list[Instrument]:
        names = [s for s in request.query.get("symbols", "").split(",") if s]
        if not names:
            raise DataError(400, "symbols is required")
        by_name = {
            alpaca_symbol(i): i for i in self.market.instruments if i.asset_class == asset_class
        }
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise DataError(400, f"invalid symbol: {unknown[0]}")
        return [by_name[n] for n in names]

    async def stock_bars(self, request: web.Request) -> web.Response:
        return self._answer(lambda: self._bars(request, "us_equity"))

    async def crypto_bars(self, request: web.Request) -> web.Response:
        return self._answer(lambda: self._bars(request, "crypto"))

    async def stock_quotes(self, request: web.Request) -> web.Response:
        return self._answer(lambda: self._quotes(request, "us_equity"))

    async def crypto_quotes(self, request: web.Request) -> web.Response:
        return self._answer(lambda: self._quotes(request, "crypto"))

    @staticmethod
    def _answer(make: Any) -> web.Response:
        try:
            return web.json_response(make())
        except DataError as failed:
            body = (
                {"message": failed.message}
                if failed.code is None
                else error(failed.code, failed.message)
            )
            return web.json_response(body, status=failed.status)

    def _feed(self, request: web.Request, end: datetime | None) -> str:
        """The stock feed asked for (the plan's best by default), refused as Alpaca refuses
        recent SIP data to a Free plan."""
        feed = request.query.get("feed") or self.plan.default_feed
        if feed not in FEEDS:
            raise DataError(400, f"invalid feed: {feed}")
        if self.plan.refuses(feed, end, self.market.clock()):
            raise DataError(403, RECENT_SIP_REFUSED, code=None)
        return feed

    def _bars(self, request: web.Request, asset_class: str) -> dict[str, Any]:
        query = request.query
        frame = timeframe(query.get("timeframe", ""))
        start = when(query["start"]) if "start" in query else None
        end = when(query["end"]) if "end" in query else None
        try:
            limit = min(int(query.get("limit") or 1000), MAX_LIMIT)
        except ValueError:
            raise DataError(400, "invalid limit") from None
        if limit < 1:
            raise DataError(400, "invalid limit")
        token = query.get("page_token") or ""
        feed = self._feed(request, end) if asset_class == "us_equity" else None
        out: dict[str, list[dict[str, Any]]] = {}
        left = limit
        next_token = None
        for instrument in self._listed(request, asset_class):
            name = alpaca_symbol(instrument)
            try:
                bars = self.market.bars(instrument.venue_id, frame)
            except ValueError as failed:
                raise DataError(400, str(failed)) from None
            if token:
                after_name, _, after_start = token.partition("|")
                if name < after_name:
                    continue
                if name == after_name:
                    bars = [b for b in bars if str(rfc3339(b.start)) > after_start]
            chosen = [
                b
                for b in bars
                if (start is None or b.start >= start) and (end is None or b.start <= end)
            ]
            if feed == "iex":  # only the bars with an IEX trade, at IEX's volume
                chosen = [b for b in map(self.plan.on_iex, chosen) if b is not None]
            newest_first = query.get("sort") == "desc"
            if newest_first or (not start and not token):
                chosen = chosen[-left:]  # newest first, or no start: the latest
            if len(chosen) > left:
                chosen = chosen[:left]
                next_token = f"{name}|{rfc3339(chosen[-1].start)}"
            if chosen:
                ordered = chosen[::-1] if newest_first else chosen
                out[name] = [bar_json(b, feed) for b in ordered]
            left -= len(chosen)
            if left <= 0:
                break
        return {"bars": out, "next_page_token": next_token}

    def _quotes(self, request: web.Request, asset_class: str) -> dict[str, Any]:
        now = self.market.clock()
        if asset_class == "us_equity":
            self._feed(request, None)  # the latest is recent: no SIP on a Free plan
        quotes = {}
        for instrument in self._listed(request, asset_class):
            book = self.market.top_of_book(instrument.venue_id)
            if book is None:
                continue
            stamp = now
            closed = self.sessions is not None and not self.sessions.is_open(now)
            if asset_class == "us_equity" and self.sessions is not None and closed:
                stamp = self.sessions.last_close(now) or now  # the last session's last quote
            bid, ask = book
            quotes[alpaca_symbol(instrument)] = {
                "t": go_time(stamp),
                "bp": float(bid),
                "bs": float(Decimal(10)),
                "ap": float(ask),
                "as": float(Decimal(10)),
                "bx": "V",
                "ax": "V",
                "c": ["R"],
                "z": "C",
            }
        return {"quotes": quotes}
