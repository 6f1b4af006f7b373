"""A perpetual's funding and mark-price recordings, in folders beside its bars.

For the bars in `DIR/SOLUSDT_USDT_1h.parquet` (`trader download` names them so):
- `DIR/funding/SOLUSDT_USDT_1h.parquet` (or `.csv`): a row per funding time, in the columns
  of Binance's `GET /fapi/v1/fundingRate` answer (developers.binance.com, USDⓈ-M futures,
  "Get Funding Rate History"): `fundingTime` (epoch ms, as the exchange stamped it: never
  rounded to an assumed 8h grid), `fundingRate` (decimal text) and `markPrice` (decimal text,
  "mark price associated with a particular funding fee charge"; empty where the exchange does
  not give it, as Aster's `/fapi/v3/fundingRate` does not).
- `DIR/mark/SOLUSDT_USDT_1h.parquet` (or `.csv`): the mark-price candles at the bars'
  length, as ccxt's `fetch_ohlcv(..., params={"price": "mark"})` returns them (Binance's
  `/fapi/v1/markPriceKlines`): `timestamp` (the candle's open, epoch ms), open, high, low, close.

Rates and mark prices stay decimal text on disk and `Decimal` in memory: a funding payment is
money.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from trader.private_files import replacing

FUNDING_FOLDER = "funding"
MARK_FOLDER = "mark"
_BAR_SUFFIX = re.compile(r"\.(csv|tsv|txt|parquet|pq)(\.(gz|bz2|zst|lz4))?$", re.IGNORECASE)
_SUFFIXES = (".parquet", ".csv", ".csv.gz")
_PRICES = ("open", "high", "low", "close")

FUNDING_SCHEMA = pa.schema(
    [("fundingTime", pa.int64()), ("fundingRate", pa.string()), ("markPrice", pa.string())]
)
MARK_SCHEMA = pa.schema(
    [
        ("timestamp", pa.int64()),
        ("open", pa.float64()),
        ("high", pa.float64()),
        ("low", pa.float64()),
        ("close", pa.float64()),
    ]
)


class PerpDataError(ValueError):
    """A funding or mark-price recording that cannot be read as one."""


@dataclass(frozen=True)
class FundingRate:
    """One funding time: the rate settled then, and the mark price the exchange paid it on
    (None where it did not say)."""

    at_ms: int
    rate: Decimal
    mark: Decimal | None = None


@dataclass(frozen=True)
class MarkCandle:
    open_ms: int
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal


@dataclass(frozen=True)
class MarkPrices:
    """Mark-price candles of one length, in time order."""

    candles: tuple[MarkCandle, ...]
    length_ms: int

    @cached_property
    def _ends(self) -> list[int]:
        return [c.open_ms + self.length_ms for c in self.candles]

    def last_at(self, at_ms: int) -> Decimal | None:
        """The mark price known at `at_ms`: the close of the last candle closed by then
        (None before the first)."""
        index = bisect.bisect_right(self._ends, at_ms) - 1
        return self.candles[index].close if index >= 0 else None


def bar_stem(bars: Path) -> str:
    """SOLUSDT_USDT_1h.parquet, SOLUSDT_1h.csv.gz -> SOLUSDT_USDT_1h, SOLUSDT_1h."""
    return _BAR_SUFFIX.sub("", bars.name)


def funding_path(bars: Path, suffix: str = ".parquet") -> Path:
    return bars.parent / FUNDING_FOLDER / f"{bar_stem(bars)}{suffix}"


def mark_path(bars: Path, suffix: str = ".parquet") -> Path:
    return bars.parent / MARK_FOLDER / f"{bar_stem(bars)}{suffix}"


def find_funding(bars: Path) -> Path | None:
    """The funding recording beside `bars`, if there is one."""
    return next((p for s in _SUFFIXES if (p := funding_path(bars, s)).is_file()), None)


def find_marks(bars: Path) -> Path | None:
    return next((p for s in _SUFFIXES if (p := mark_path(bars, s)).is_file()), None)


def _decimal(text: object, what: str, path: Path, row: int) -> Decimal:
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        raise PerpDataError(f"{path}: row {row + 1}: {what} {text!r} is not a number") from None
    if not value.is_finite():
        raise PerpDataError(f"{path}: row {row + 1}: {what} {text!r} is not a number")
    return value


def _table(path: Path, schema: pa.Schema) -> pa.Table:
    names = [field.name for field in schema]
    try:
        if path.name.lower().endswith((".csv", ".csv.gz")):
            types = {field.name: field.type for field in schema}
            options = pacsv.ConvertOptions(  # empty is missing; "NaN" is a bad number, said
                column_types=types, strings_can_be_null=True, null_values=[""]
            )
            table = pacsv.read_csv(path, convert_options=options)
        else:
            table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise PerpDataError(f"{path}: cannot be read: {error}") from None
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise PerpDataError(
            f"{path}: has no column {', '.join(missing)} (it holds {', '.join(table.column_names)})"
        )
    return table.select(names)


def read_funding(path: Path) -> list[FundingRate]:
    """The funding times in `path`, in time order; PerpDataError for a file that is not one
    (a rate or mark that is not a number, a mark that is not positive, a time twice)."""
    table = _table(path, FUNDING_SCHEMA)
    rates: list[FundingRate] = []
    columns = [table.column(n).to_pylist() for n in ("fundingTime", "fundingRate", "markPrice")]
    for row, (at, rate, mark) in enumerate(zip(*columns, strict=True)):
        if at is None or rate is None:
            raise PerpDataError(f"{path}: row {row + 1}: no fundingTime or fundingRate")
        price = None if mark in (None, "") else _decimal(mark, "markPrice", path, row)
        if price is not None and price <= 0:
            raise PerpDataError(f"{path}: row {row + 1}: markPrice {mark!r} is not positive")
        rates.append(FundingRate(int(at), _decimal(rate, "fundingRate", path, row), price))
    rates.sort(key=lambda r: r.at_ms)
    twice = sorted({a.at_ms for a, b in itertools.pairwise(rates) if a.at_ms == b.at_ms})
    if twice:
        raise PerpDataError(f"{path}: funding time {twice[0]} (epoch ms) is there twice")
    return rates


def read_marks(path: Path, length_ms: int) -> MarkPrices:
    """The mark-price candles in `path` (`length_ms` long each), in time order."""
    table = _table(path, MARK_SCHEMA)
    candles = []
    columns = [table.column(f.name).to_pylist() for f in MARK_SCHEMA]
    for row, (at, *prices) in enumerate(zip(*columns, strict=True)):
        values = [_decimal(repr(p), "price", path, row) for p in prices]
        if at is None or min(values) <= 0:
            raise PerpDataError(f"{path}: row {row + 1}: no time, or a price that is not positive")
        candles.append(MarkCandle(int(at), *values))
    candles.sort(key=lambda c: c.open_ms)
    return MarkPrices(tuple(candles), length_ms)


def write_funding(path: Path, rates: Sequence[FundingRate]) -> None:
    table = pa.table(
        {
            "fundingTime": [r.at_ms for r in rates],
            "fundingRate": [str(r.rate) for r in rates],
            "markPrice": [None if r.mark is None else str(r.mark) for r in rates],
        },
        schema=FUNDING_SCHEMA,
    )
    # Whole or not at all, as the bars are written; public prices (0644).
    with replacing(path, what="the data folder", mode=0o644) as handle:
        pq.write_table(table, handle)


def write_marks(path: Path, candles: Sequence[MarkCandle]) -> None:
    table = pa.table(
        {
            "timestamp": [c.open_ms for c in candles],
            **{n: [float(getattr(c, n)) for c in candles] for n in _PRICES},
        },
        schema=MARK_SCHEMA,
    )
    with replacing(path, what="the data folder", mode=0o644) as handle:
        pq.write_table(table, handle)
