"""Recorded bars as a market-data source: CSV or Parquet, on a simulated clock.

Bars appear as time passes (the forming bar too, as on an exchange); quotes come from a stated
spread model and are labelled MODELLED.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import numpy as np

from trader.clock import Clock
from trader.config.loader import DataLayer, data_layer
from trader.domain import Bar, Instrument, Timeframe, from_epoch_ms
from trader.logging import get_logger
from trader.market.feed import UnknownSymbols
from trader.market.files.folders import bar_files
from trader.market.files.instruments import Wanted, wanted_symbol, wanted_ticker
from trader.market.files.naming import name_symbol, symbol_from_name
from trader.market.files.options import AS_WRITTEN, ReadOptions, ReplayDataError
from trader.market.files.read import read_bar_file
from trader.market.files.report import FileReport
from trader.market.hygiene import RawQuote, Row, parse_row
from trader.market.quotes import SpreadModel, modelled_quote

__all__ = [
    "Recording",
    "RecordingsRequestError",
    "ReplayDataError",  # defined with the file reading, raised from here too
    "ReplayMarketData",
    "first_bar_time",
    "log_reading",
    "read_recording",
    "read_recordings",
    "settings_from",
    "symbol_from_name",
]


@dataclass(frozen=True)
class Recording:
    """One symbol's recorded bars: rows (start ms, open, high, low, close, volume, quote
    volume or None), in time order, one per time. `report`: how the file was read;
    `naive_times`: its times of day had no zone and were read as UTC (a later step may know
    the exchange's zone better); `notes`: how its symbol was told and what else reading it
    decided beyond the file's report."""

    symbol: str
    timeframe: Timeframe
    rows: list[tuple[int, float, float, float, float, float, float | None]]
    path: Path
    report: FileReport | None = None
    naive_times: bool = False
    notes: tuple[str, ...] = ()

    @property
    def starts(self) -> list[int]:
        return [row[0] for row in self.rows]


def read_recording(
    path: Path,
    symbol: str | None = None,
    timeframe: Timeframe | None = None,
    options: ReadOptions = AS_WRITTEN,
) -> Recording:
    """Bars from a CSV or Parquet file, in time order with one row per time, values exactly as
    recorded (no cleaning: hygiene is downstream). What reading took is logged and reported.
    A file of several instruments is read for the one `symbol` or `options.tickers` (one
    value) names."""
    if len(options.tickers) > 1:
        raise ReplayDataError(f"{path}: one --ticker for one file, not {len(options.tickers)}")
    ticker = options.tickers[0] if options.tickers else None
    wanted: Wanted | None = None
    if ticker is not None:
        wanted = wanted_ticker(ticker)
    elif symbol is not None:
        wanted = wanted_symbol(symbol)
    bars = read_bar_file(path, options, wanted)
    report = bars.report
    named = name_symbol(path, symbol, report.instrument, asked=ticker is not None)
    timeframe = timeframe or _timeframe_of_rows(bars.rows, path)
    notes = (named.note,) if named.note else ()
    return Recording(named.symbol, timeframe, bars.rows, path, report, report.naive_times, notes)


def log_reading(recording: Recording) -> None:
    """What reading the file took, once logging is set up (a warning if it repaired it)."""
    report = recording.report
    if report is None:
        return
    log = get_logger("trader.market")
    say = log.warning if report.repaired else log.info
    say(
        "recording read", symbol=recording.symbol, timeframe=str(recording.timeframe),
        **report.log_fields(),
    )  # fmt: skip


def settings_from(recordings: Sequence[Recording]) -> DataLayer:
    """The settings a replay's files decide (symbols, timeframe, the account's currency), as
    the highest layer of the settings. ReplayDataError for files that cannot share a run."""
    timeframes = sorted({r.timeframe.text for r in recordings})
    if len(timeframes) != 1:
        names = ", ".join(f"{r.path.name} ({r.timeframe})" for r in recordings)
        raise ReplayDataError(f"the files hold bars of different lengths: {names}")
    source = ", ".join(r.path.name for r in recordings)
    return data_layer([r.symbol for r in recordings], timeframes[0], source)


def _timeframe_of_rows(rows: Sequence[Row], path: Path) -> Timeframe:
    """The median step between bars (rows sorted, one per time)."""
    if len(rows) < 2:
        raise ReplayDataError(
            f"{path}: {len(rows)} distinct bar time(s), too few to tell the timeframe; give a "
            "file of at least two bars"
        )
    steps = np.diff(np.array([row[0] for row in rows], dtype=np.int64))
    return _timeframe_of(int(np.median(steps)), path)


def _timeframe_of(step_ms: int, path: Path) -> Timeframe:
    seconds = step_ms // 1000
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds % size == 0:
            return Timeframe(f"{seconds // size}{unit}")
    raise ReplayDataError(f"{path}: bars {step_ms} ms apart are not a timeframe")


class ReplayMarketData:
    """Serves recordings as an exchange would, as of the clock's time."""

    name = "replay"

    def __init__(
        self,
        recordings: Mapping[str, Recording],
        clock: Clock,
        spread: SpreadModel,
        rules: Instrument | None = None,
    ) -> None:
        """`rules`: the trading rules every replayed symbol gets (its symbol is replaced)."""
        self._recordings = dict(recordings)
        self._rules = rules
        self._parsed: dict[tuple[str, int], Bar | None] = {}
        self._starts = {symbol: rec.starts for symbol, rec in recordings.items()}
        self._clock = clock
        self.spread = spread

    @property
    def page_limit(self) -> int:
        return 1000

    def no_trade_feed(self, symbol: str) -> str | None:
        """None: a recording's missing bar is a hole (`MarketData`)."""
        return None

    @property
    def volume_unknown(self) -> frozenset[str]:
        """The symbols whose file has no volume (its bars say 0: not "nothing traded")."""
        return frozenset(
            s for s, r in self._recordings.items() if r.report and not r.report.volume_known
        )

    def instrument(self, symbol: str) -> Instrument:
        if self._rules is None:
            return Instrument(symbol, Decimal("0.00000001"), Decimal("0.00000001"))
        return replace(self._rules, symbol=symbol)

    async def start(self, symbols: Sequence[str]) -> None:
        unknown = [s for s in symbols if s not in self._recordings]
        if unknown:
            raise UnknownSymbols(self.name, unknown, self._recordings)

    async def refresh_markets(self, symbols: Sequence[str]) -> None:
        await self.start(symbols)

    def _visible_end(self, symbol: str) -> int:
        """Index past the last bar that has opened by now."""
        now_ms = int(self._clock.now().timestamp() * 1000)
        return bisect.bisect_right(self._starts[symbol], now_ms)

    async def ohlcv(
        self, symbol: str, timeframe: Timeframe, since: datetime | None, limit: int
    ) -> list[Row]:
        recording = self._recordings[symbol]
        if timeframe != recording.timeframe:
            raise ReplayDataError(
                f"{recording.path} holds {recording.timeframe} bars, not {timeframe}"
            )
        end = self._visible_end(symbol)
        if since is None:
            return list(recording.rows[max(0, end - limit) : end])
        first = bisect.bisect_left(self._starts[symbol], int(since.timestamp() * 1000))
        return list(recording.rows[first : min(end, first + limit)])

    async def top_of_book(self, symbols: Sequence[str]) -> dict[str, RawQuote]:
        now = self._clock.now()
        quotes = {}
        for symbol in symbols:
            end = self._visible_end(symbol)
            recent = []
            for index in range(max(0, end - 3), end):
                bar = self._bar(symbol, index)
                if bar is not None and bar.end <= now:
                    recent.append(bar)
            if recent:
                quotes[symbol] = modelled_quote(recent[-2:], self.spread)
        return quotes

    def _bar(self, symbol: str, index: int) -> Bar | None:
        """Row `index` as a bar (None if it is not a valid one), parsed once."""
        key = (symbol, index)
        if key not in self._parsed:
            parsed = parse_row(
                self._recordings[symbol].rows[index], symbol, self._recordings[symbol].timeframe
            )
            self._parsed[key] = parsed if isinstance(parsed, Bar) else None
            self._parsed.pop((symbol, index - 8), None)  # only the last few are asked for
        return self._parsed[key]

    async def close(self) -> None:
        return None


class RecordingsRequestError(ValueError):
    """The files and symbols asked for do not pair up (a usage error, not bad data)."""


def read_recordings(
    files: Sequence[Path],
    symbols: Sequence[str] | None = None,
    options: ReadOptions = AS_WRITTEN,
) -> list[Recording]:
    """One recording per file (a directory: each of its bar files, in name order), named by
    the symbols given in order, else by each file's name or instrument column; several from
    one file of several instruments given several symbols (or `options.tickers`); never two
    recordings of one symbol."""
    listed = bar_files(files)
    tickers = options.tickers
    if symbols and tickers and len(symbols) != len(tickers):
        raise RecordingsRequestError("give as many --symbol as --ticker, or only one of the two")
    asked = len(symbols or tickers)
    if asked and asked != len(listed):
        if len(listed) != 1:
            raise RecordingsRequestError(
                f"give one symbol per file ({len(listed)} files), or none, or several for one "
                "file of several instruments"
            )
        listed = listed * asked
    recordings = []
    for i, item in enumerate(listed):
        one = replace(options, tickers=(tickers[i],) if tickers else ())
        recording = read_recording(item.path, symbols[i] if symbols else None, options=one)
        if item.left_out:
            recording = replace(recording, notes=(*recording.notes, item.left_out))
        recordings.append(recording)
    names = [r.symbol for r in recordings]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise RecordingsRequestError(f"more than one file for {', '.join(duplicated)}")
    return recordings


def first_bar_time(recordings: Mapping[str, Recording]) -> datetime:
    return from_epoch_ms(min(rec.rows[0][0] for rec in recordings.values() if rec.rows))
