"""The column of a bar file that names the instrument (Ticker, symbol, code...) and the rows of
the one instrument asked for. A file of several instruments is never read as one series: the
first row of each time would take prices from any of them in turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.columns import column as named_column
from trader.market.files.options import ReplayDataError
from trader.market.files.report import Picked, shown
from trader.market.files.zones import Times

# Exact names, but for case: what pandas-datareader, Quandl, Kaggle, tushare, Refinitiv and
# exchange exports call the column naming each row's instrument.
INSTRUMENT_COLUMNS = (
    "ticker", "symbol", "code", "name", "instrument", "asset", "security", "secid", "ric",
    "isin", "ts_code", "pair", "tic", "sym",
)  # fmt: skip
EMPTY = "(empty)"
_LISTED = 10  # values named in a message, the rest counted


@dataclass(frozen=True)
class Wanted:
    """The instrument asked for: the option that asked, its value as given, and the values of
    the file's column that mean it (compared without case)."""

    option: str
    given: str
    spellings: tuple[str, ...]


def wanted_ticker(value: str) -> Wanted:
    return Wanted("--ticker", value, (value,))


def wanted_symbol(symbol: str) -> Wanted:
    """AAPL/USD is AAPL, AAPLUSD, AAPL-USD or AAPL_USD in a file's column."""
    base, _, quote = symbol.partition("/")
    quote = quote.split(":", 1)[0]
    joined = (f"{base}{quote}", f"{base}-{quote}", f"{base}_{quote}") if quote else ()
    return Wanted("--symbol", symbol, (symbol, base, *joined))


def instrument_column(names: Sequence[str]) -> str | None:
    lowered = {name.strip().lower(): name for name in reversed(names)}
    return next((lowered[c] for c in INSTRUMENT_COLUMNS if c in lowered), None)


@dataclass(frozen=True)
class Selected:
    """A table and its times cut to one instrument's rows, without the column naming them."""

    table: pa.Table
    times: Times
    file_rows: npt.NDArray[np.int64] | None  # each row's index in the file; None: all rows
    picked: Picked | None


def select_instrument(table: pa.Table, times: Times, wanted: Wanted | None, path: Path) -> Selected:
    """The rows of the instrument asked for (all rows for a file of one, or of none)."""
    mask, picked = pick_instrument(table, wanted, path)
    if picked is not None:
        table = table.drop_columns([picked.column])  # read: not an "ignored" column
    if mask is None:
        return Selected(table, times, None, picked)
    return Selected(
        table.filter(mask), replace(times, ms=times.ms[mask]), np.flatnonzero(mask), picked
    )


def pick_instrument(
    table: pa.Table, wanted: Wanted | None, path: Path
) -> tuple[npt.NDArray[np.bool_] | None, Picked | None]:
    """Which rows to keep (None: all) and what was picked; ReplayDataError for several
    instruments and none asked for, or one asked for that the file does not hold."""
    column = instrument_column([str(name) for name in table.column_names])
    if column is None:
        if wanted is not None and wanted.option == "--ticker":
            raise ReplayDataError(
                f"{path}: --ticker {wanted.given}: the file has no column naming instruments "
                f"({', '.join(INSTRUMENT_COLUMNS)}); leave out --ticker"
            )
        return None, None
    values = _names(named_column(table, column, path))
    counts = _counts(values)
    if wanted is None:
        if len(counts) == 1:
            return None, Picked(column, next(iter(counts)))
        first = next(iter(counts))
        raise ReplayDataError(
            f"{path}: column {shown(column)} names {len(counts)} instruments "
            f"({_listed(counts)}); read one with --symbol {first} (or --ticker {first}), or "
            "give a directory of files, one per instrument, with --data DIR"
        )
    value = _match(counts, wanted, column, path)
    if len(counts) == 1:
        return None, Picked(column, value)
    mask = np.asarray(pc.equal(values, value).to_numpy(zero_copy_only=False), dtype=np.bool_)
    return mask, Picked(column, value, len(mask) - int(mask.sum()), len(counts) - 1)


def _names(column: pa.ChunkedArray) -> pa.Array:
    """The column as trimmed text, a missing value as EMPTY."""
    try:
        text = pc.utf8_trim_whitespace(pc.cast(column.combine_chunks(), pa.string()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        text = pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())
    blank = pc.fill_null(pc.equal(text, ""), True)
    return pc.if_else(blank, EMPTY, text)


def _counts(values: pa.Array) -> dict[str, int]:
    """Rows per value, in the order the values first appear."""
    counted = pc.value_counts(values)
    names, rows = counted.field("values").to_pylist(), counted.field("counts").to_pylist()
    return dict(zip(names, rows, strict=True))


def _match(counts: dict[str, int], wanted: Wanted, column: str, path: Path) -> str:
    """The file's value meaning `wanted`: exact first, then without case; one, or refused."""
    exact = [w for w in wanted.spellings if w in counts]
    if exact:
        return exact[0]
    spelled = {w.upper() for w in wanted.spellings}
    found = [value for value in counts if value.upper() in spelled]
    if len(found) == 1:
        return found[0]
    held = "holds only" if len(counts) == 1 else "holds"
    if found:
        problem = f"{len(found)} values mean {wanted.given}: {', '.join(found)}"
    else:
        problem = f"no rows for {wanted.given}: column {shown(column)} {held} {_listed(counts)}"
    raise ReplayDataError(
        f"{path}: {wanted.option} {wanted.given}: {problem}; give one of the file's values "
        "with --ticker VALUE (and the symbol to call it with --symbol BASE/QUOTE)"
    )


def _listed(counts: dict[str, int]) -> str:
    shown_ = [f"{value}: {rows} rows" for value, rows in list(counts.items())[:_LISTED]]
    more = len(counts) - _LISTED
    return ", ".join(shown_) + (f" and {more} more" if more > 0 else "")
