"""`trader download` of a perpetual (`market.kind = "perp"`): its funding-rate history and
mark-price candles, beside its bars (`trader.market.files.funding` names the files).

Both resume from the last row on disk and page forward from it, by the times the exchange
gave: a funding time is never assumed to be 8h after the last (Binance moves symbols to 4h
and 1h; ccxt's own `paginate` option steps by 8h, so it is not used here).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol

from trader.domain import Timeframe
from trader.market.files.funding import (
    FundingRate,
    MarkCandle,
    PerpDataError,
    funding_path,
    mark_path,
    read_funding,
    read_marks,
    write_funding,
    write_marks,
)

FUNDING_PAGE = 1000  # Binance's and Aster's most rows a /fundingRate answer holds
MARK_PAGE = 1000


class PerpExchange(Protocol):
    """What of a ccxt (async) client the download calls."""

    id: str
    has: dict[str, Any]

    async def fetch_funding_rate_history(
        self, symbol: str, since: int | None = ..., limit: int | None = ..., params: Any = ...
    ) -> list[dict[str, Any]]: ...

    async def fetch_ohlcv(
        self,
        symbol: str,
        timeframe: str = ...,
        since: int | None = ...,
        limit: int | None = ...,
        params: Any = ...,
    ) -> list[list[Any]]: ...


@dataclass(frozen=True)
class PerpReport:
    funding: Path
    rates: int  # in the file at the end
    marks: Path | None  # None: the exchange has no mark-price candles through ccxt
    candles: int
    intervals_h: tuple[float, ...]  # the funding intervals seen, hours, in order of first sight

    def line(self, symbol: str) -> str:
        seen = ", ".join(f"{h:g}h" for h in self.intervals_h) or "none yet"
        marks = (
            f"{self.candles} mark-price candles in {self.marks}"
            if self.marks is not None
            else "no mark-price candles (the exchange has none through ccxt: the backtest "
            "marks on the funding rows' markPrice where given, else on the bar close)"
        )
        return (
            f"{symbol}: {self.rates} funding times in {self.funding} (intervals {seen}); {marks}\n"
        )


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def decimal_or_none(value: object) -> Decimal | None:
    """A venue's number (text or float) as a finite Decimal; None for anything else."""
    if value in (None, ""):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def parse_funding_row(row: dict[str, Any]) -> FundingRate | None:
    """A ccxt funding-rate-history structure (`timestamp`, `fundingRate`, and the exchange's
    own row in `info`) as a recorded rate; None for one without a time or a rate. The rate
    and mark are read from `info`'s text where it has them (ccxt's `fundingRate` is a float)."""
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    at = row.get("timestamp")
    rate = decimal_or_none(info.get("fundingRate")) if info else None
    rate = rate if rate is not None else decimal_or_none(row.get("fundingRate"))
    if not isinstance(at, int) or rate is None:
        return None
    mark = decimal_or_none(info.get("markPrice")) if info else None
    return FundingRate(at, rate, mark if mark is not None and mark > 0 else None)


def reads_mark_candles(exchange: Any) -> bool:
    """Whether ccxt's `fetch_ohlcv(..., params={"price": "mark"})` reads mark-price candles
    here. ccxt's `aster` says `fetchMarkOHLCV: False` but its `fetch_ohlcv` sends
    `price="mark"` to /fapi/v3/markPriceKlines (ccxt 4.5.90 aster.py); elsewhere the venue's
    `has` decides, since a client that ignores the parameter would answer last-price candles,
    whose wicks must never stand for the mark."""
    return bool(exchange.has.get("fetchMarkOHLCV")) or exchange.id == "aster"


def parse_mark_row(row: list[Any]) -> MarkCandle | None:
    """A ccxt OHLCV row of mark prices ([open ms, open, high, low, close, ...]) as a candle;
    None for one without a time or with a price that is not a positive number."""
    prices = [decimal_or_none(v) for v in row[1:5]] if len(row) >= 5 else []
    at = row[0] if row else None
    if not isinstance(at, int) or len(prices) < 4:
        return None
    o, h, lo, c = prices
    if o is None or h is None or lo is None or c is None or min(o, h, lo, c) <= 0:
        return None
    return MarkCandle(at, o, h, lo, c)


def _exists(path: Path) -> bool:
    return path.is_file()


def _existing_rates(path: Path) -> list[FundingRate]:
    return read_funding(path) if _exists(path) else []


async def download_funding(
    exchange: PerpExchange, symbol: str, since: datetime, until: datetime, path: Path
) -> list[FundingRate]:
    """Every funding time in [since, until) into `path`, after what is there already."""
    rates = _existing_rates(path)
    cursor, end = (rates[-1].at_ms + 1 if rates else _ms(since)), _ms(until)
    params: dict[str, Any] = {"until": end - 1}
    if exchange.id.startswith("binance"):
        params["type"] = "swap"  # ccxt's binance reads a swap's rates whatever its defaultType
    added = False
    while cursor < end:
        page = await exchange.fetch_funding_rate_history(symbol, cursor, FUNDING_PAGE, params)
        fresh = [r for row in page if (r := parse_funding_row(row)) is not None]
        fresh = sorted((r for r in fresh if cursor <= r.at_ms < end), key=lambda r: r.at_ms)
        if not fresh:
            break
        rates.extend(fresh)
        cursor, added = fresh[-1].at_ms + 1, True
    if added:
        write_funding(path, rates)
    return rates


async def download_marks(
    exchange: PerpExchange,
    symbol: str,
    timeframe: Timeframe,
    since: datetime,
    until: datetime,
    path: Path,
) -> list[MarkCandle]:
    """The mark-price candles in [since, until) into `path`, after what is there already."""
    length = int(timeframe.duration.total_seconds() * 1000)
    candles = list(read_marks(path, length).candles) if _exists(path) else []
    cursor, end = (candles[-1].open_ms + length if candles else _ms(since)), _ms(until)
    added = False
    while cursor < end:
        page = await exchange.fetch_ohlcv(
            symbol, str(timeframe), cursor, MARK_PAGE, {"price": "mark"}
        )
        fresh: list[MarkCandle] = []
        for row in page:
            candle = parse_mark_row(row)
            if candle is None:
                continue
            at = candle.open_ms
            if cursor <= at and at + length <= end and (not fresh or at > fresh[-1].open_ms):
                fresh.append(candle)
        if not fresh:
            break
        candles.extend(fresh)
        cursor, added = fresh[-1].open_ms + length, True
    if added:
        write_marks(path, candles)
    return candles


def _intervals(rates: list[FundingRate]) -> tuple[float, ...]:
    seen: dict[float, None] = {}
    for a, b in itertools.pairwise(rates):
        seen.setdefault(round((b.at_ms - a.at_ms) / 3_600_000, 2), None)
    return tuple(seen)


async def download_perp(
    exchange: PerpExchange,
    symbol: str,
    timeframe: Timeframe,
    since: datetime,
    until: datetime,
    bars: Path,
) -> PerpReport:
    """The funding rates and (where ccxt has them) mark-price candles of the perpetual whose
    bars are at `bars`. PerpDataError for a file already there that cannot be read."""
    funding = funding_path(bars)
    rates = await download_funding(exchange, symbol, since, until, funding)
    if not rates:
        raise PerpDataError(
            f"{symbol}: {exchange.id} gave no funding rate from {since:%Y-%m-%d} to "
            f"{until:%Y-%m-%d} (is it a perpetual? give its ccxt symbol, e.g. SOL/USDT:USDT)"
        )
    marks: Path | None = None
    candles = 0
    if reads_mark_candles(exchange):
        marks = mark_path(bars)
        candles = len(await download_marks(exchange, symbol, timeframe, since, until, marks))
    return PerpReport(funding, len(rates), marks, candles, _intervals(rates))
