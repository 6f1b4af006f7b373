"""Which columns of a bar file hold the times and the prices, by name, whatever tool wrote it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import listed, shown

TIME_COLUMNS = ("timestamps", "timestamp", "datetime", "date", "time", "open_time")
PRICE_COLUMNS = ("open", "high", "low", "close", "volume")
QUOTE_VOLUME_COLUMNS = ("amount", "quote_volume", "quote_asset_volume")
# An adjusted close as Yahoo, Quandl/WIKI and pandas-datareader name it (case aside).
ADJUSTED_CLOSE_COLUMNS = ("adj close", "adj_close", "adjclose", "adjusted close",
                          "adjusted_close", "adj. close")  # fmt: skip
# What pandas and pyarrow call an index written without a name: first in a CSV, anywhere
# (last, in fact) in a Parquet file.
_INDEX_NAMES = ("", "unnamed: 0")
_PANDAS_INDEX = "__index_level_0__"


def _by_lowered(names: Sequence[str]) -> dict[str, list[str]]:
    lowered: dict[str, list[str]] = {}
    for name in names:
        lowered.setdefault(name.strip().lower(), []).append(name)
    return lowered


def time_columns(names: list[str], options: ReadOptions, path: Path) -> tuple[list[str], str]:
    """The column(s) holding the times, and how they were found."""
    lowered = _by_lowered(names)
    if options.time_column is not None:
        given = options.time_column
        match = [given] if given in names else lowered.get(given.strip().lower(), [])[:1]
        if not match:
            raise ReplayDataError(f"{path}: no column {given!r} (its columns: {listed(names)})")
        return match, "given"
    for candidate in TIME_COLUMNS:
        if candidate in lowered:
            # Date and time of day in two columns, as MetaTrader and many spreadsheets write.
            if candidate == "date" and "time" in lowered:
                return [lowered["date"][0], lowered["time"][0]], "named"
            return [lowered[candidate][0]], "named"
    if names and names[0].strip().lower() in _INDEX_NAMES:
        return [names[0]], "first column"
    if _PANDAS_INDEX in names:
        return [_PANDAS_INDEX], "pandas index"
    raise ReplayDataError(
        f"{path}: no column among {', '.join(TIME_COLUMNS)} and no unnamed index column (its "
        f"columns: {listed(names)}); say which holds the times with --time-column NAME"
    )


def column(table: pa.Table, name: str, path: Path) -> pa.ChunkedArray:
    """The column `name`; ReplayDataError where two columns have that name (pyarrow finds a
    column by name only where the name is unique, and which of them holds the data is a guess)."""
    count = table.column_names.count(name)
    if count > 1:
        raise ReplayDataError(
            f"{path}: {count} columns are named {shown(name)}; rename or remove all but one"
        )
    return table.column(name)


def time_values(table: pa.Table, names: list[str], path: Path) -> pa.Array:
    """The times as one array: a date and a time of day in two columns joined by a space."""
    if len(names) == 1:
        return column(table, names[0], path).combine_chunks()
    parts = [pc.cast(column(table, name, path), pa.string()) for name in names]
    return pc.binary_join_element_wise(*parts, " ").combine_chunks()


@dataclass(frozen=True)
class ValueColumns:
    """A file's numbers as float64: open, high, low, close, volume (0 throughout where the file
    has none: `volume_known` False) and the quote volume if there is one; its adjusted close."""

    values: list[pa.Array]
    ignored: tuple[str, ...]  # columns read for nothing
    adjusted_close: pa.Array | None = None
    adjusted_name: str | None = None
    volume_known: bool = True


def value_columns(table: pa.Table, time_names: list[str], path: Path) -> ValueColumns:
    """The price and volume columns, by name. Names match exactly but for case: "Adj Close"
    is never the close, it is the adjusted close. A file without volume (an index) is read
    with its volume unknown, for the report to say so; only the prices are required."""
    names = [str(name) for name in table.column_names]
    lowered = _by_lowered(names)
    missing = [name for name in PRICE_COLUMNS[:4] if name not in lowered]
    if missing:
        raise ReplayDataError(
            f"{path}: no {', '.join(missing)} column (its columns: {listed(names)})"
        )
    twice = [lowered[name] for name in (*PRICE_COLUMNS, *ADJUSTED_CLOSE_COLUMNS)
             if len(lowered.get(name, ())) > 1]  # fmt: skip
    if twice:
        raise ReplayDataError(f"{path}: columns {listed(twice[0])} differ only in case")
    chosen = [lowered[name][0] for name in PRICE_COLUMNS if name in lowered]
    quote = next((lowered[n][0] for n in QUOTE_VOLUME_COLUMNS if n in lowered), None)
    chosen += [quote] if quote is not None else []
    adjusted = next((lowered[n][0] for n in ADJUSTED_CLOSE_COLUMNS if n in lowered), None)
    used = [*chosen, *([adjusted] if adjusted is not None else [])]
    ignored = tuple(n for n in names if n not in used and n not in time_names)
    values = [_numbers(table, name, path) for name in chosen]
    known = "volume" in lowered
    if not known:  # 0, as Kronos's reference fills a missing volume; the report says unknown
        values.insert(4, pa.array(np.zeros(table.num_rows)))
    return ValueColumns(
        values, ignored,
        _numbers(table, adjusted, path) if adjusted is not None else None, adjusted, known,
    )  # fmt: skip


def _numbers(table: pa.Table, name: str, path: Path) -> pa.Array:
    try:
        return pc.cast(column(table, name, path), pa.float64()).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ReplayDataError(
            f"{path}: column {name} does not hold numbers ({str(error).splitlines()[0]})"
        ) from None
