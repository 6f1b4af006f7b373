"""Recorded bars as a market-data source: CSV or Parquet, on a simulated clock.

Bars appear as time passes (the forming bar too, as on an exchange); quotes come from a stated
spread model and are labelled MODELLED.
"""

from __future__ import annotations

import bisect
import itertools
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from trader.clock import Clock
from trader.domain import Bar, Instrument, Timeframe, from_epoch_ms
from trader.market.feed import UnknownSymbols
from trader.market.hygiene import RawQuote, Row, parse_row
from trader.market.quotes import SpreadModel, modelled_quote

TIME_COLUMNS = ("timestamps", "timestamp", "datetime", "date", "time", "open_time")
QUOTE_VOLUME_COLUMNS = ("amount", "quote_volume", "quote_asset_volume")
PRICE_COLUMNS = ("open", "high", "low", "close", "volume")
# Quote currencies recognised in file names such as SOLUSDT_1h.csv.
_QUOTES = ("USDT", "USDC", "FDUSD", "BUSD", "TUSD", "USD", "EUR", "GBP", "BTC", "ETH", "BNB")


class ReplayDataError(ValueError):
    """A recording that cannot be replayed as it is; the message says what to do."""


@dataclass(frozen=True)
class Recording:
    """One symbol's recorded bars: rows (start ms, open, high, low, close, volume, quote
    volume or None), in time order."""

    symbol: str
    timeframe: Timeframe
    rows: list[tuple[int, float, float, float, float, float, float | None]]
    path: Path

    @property
    def starts(self) -> list[int]:
        return [row[0] for row in self.rows]


def symbol_from_name(path: Path) -> str | None:
    """SOLUSDT_1h.csv -> SOL/USDT; None when the name does not say."""
    stem = re.split(r"[_\-. ]", path.stem)[0].upper()
    for quote in _QUOTES:
        if stem.endswith(quote) and len(stem) > len(quote):
            return f"{stem[: -len(quote)]}/{quote}"
    return None


def _column(table: pa.Table, names: Sequence[str], path: Path, required: bool = True) -> str | None:
    lowered = {name.lower(): name for name in table.column_names}
    for name in names:
        if name in lowered:
            return str(lowered[name])
    if required:
        raise ReplayDataError(f"{path}: no column among {', '.join(names)}")
    return None


def _epoch_ms(table: pa.Table, column: str, path: Path) -> list[int]:
    values = table.column(column)
    if pa.types.is_timestamp(values.type):
        # Naive timestamps in the recordings are UTC.
        return pc.cast(pc.cast(values, pa.timestamp("ms")), pa.int64()).to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_integer(values.type):
        raw = values.to_pylist()
        # Seconds or milliseconds since the epoch, told apart by magnitude.
        return [v * 1000 if v is not None and v < 10**11 else v for v in raw]
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        try:
            parsed = [datetime.fromisoformat(v) for v in values.to_pylist()]
        except (TypeError, ValueError) as error:
            raise ReplayDataError(f"{path}: column {column}: {error}") from None
        return [int((d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp() * 1000) for d in parsed]
    raise ReplayDataError(f"{path}: column {column} of type {values.type} is not a time")


def read_recording(
    path: Path, symbol: str | None = None, timeframe: Timeframe | None = None
) -> Recording:
    """Bars from a CSV or Parquet file exactly as recorded (no cleaning: hygiene is downstream)."""
    if not path.is_file():
        raise ReplayDataError(f"{path}: no such file")
    if path.suffix.lower() in {".parquet", ".pq"}:
        table = pq.read_table(path)
    else:
        # Floats parse correctly rounded, as Python's float() does; times stay as written.
        table = pa_csv.read_csv(path)
    symbol = symbol or symbol_from_name(path)
    if symbol is None:
        raise ReplayDataError(
            f"{path}: cannot tell the symbol from the name; give it, e.g. ABC/USDT"
        )
    starts = _epoch_ms(table, str(_column(table, TIME_COLUMNS, path)), path)
    columns = [
        table.column(str(_column(table, (name,), path))).to_pylist() for name in PRICE_COLUMNS
    ]
    quote_column = _column(table, QUOTE_VOLUME_COLUMNS, path, required=False)
    quote_volume = table.column(quote_column).to_pylist() if quote_column else [None] * len(starts)
    rows = list(zip(starts, *columns, quote_volume, strict=True))
    if timeframe is None:
        steps = [b - a for a, b in itertools.pairwise(starts) if b > a]
        if not steps:
            raise ReplayDataError(f"{path}: too few bars to tell the timeframe; give it")
        timeframe = _timeframe_of(int(statistics.median(steps)), path)
    return Recording(symbol, timeframe, rows, path)


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


def read_recordings(files: Sequence[Path], symbols: Sequence[str] | None = None) -> list[Recording]:
    """One recording per file, with one symbol per file (or each file's own name), and never
    two files for one symbol."""
    if symbols and len(symbols) != len(files):
        raise RecordingsRequestError("give one symbol per file, or none")
    recordings = [
        read_recording(path, symbols[i] if symbols else None) for i, path in enumerate(files)
    ]
    names = [r.symbol for r in recordings]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise RecordingsRequestError(f"more than one file for {', '.join(duplicated)}")
    return recordings


def first_bar_time(recordings: Mapping[str, Recording]) -> datetime:
    return from_epoch_ms(min(rec.rows[0][0] for rec in recordings.values() if rec.rows))
