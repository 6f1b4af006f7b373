"""A file of bars (CSV, compressed CSV or Parquet) -> clean, time-ordered rows and a report of
what was done to get them.

Files come from many tools: pandas (an unnamed index column), spreadsheets (US or European
dates), exchanges (epoch numbers), newest-first exports, appended downloads with repeated bars.
The times are made UTC milliseconds and put in order; values are kept exactly as read (hygiene
downstream drops and counts bad bars). Anything repaired or guessed is in the report, and
anything that cannot be read with confidence is refused with a message that names the file,
what is wrong and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trader.market.files.adjust import adjust, kept_splits
from trader.market.files.ahead import refuse_rows_ahead
from trader.market.files.columns import time_columns, time_values, value_columns
from trader.market.files.instruments import Wanted, select_instrument
from trader.market.files.options import AS_WRITTEN, ReadOptions, ReplayDataError
from trader.market.files.order import duplicates, order, rows
from trader.market.files.report import NAIVE_AS_UTC, FileReport, Row
from trader.market.files.table import arrow_errors, read_table
from trader.market.files.times import read_times


@dataclass(frozen=True)
class BarFile:
    """A file's rows (start ms, open, high, low, close, volume, quote volume or None), in time
    order with one row per time, and the report of how they were read."""

    rows: list[Row]
    report: FileReport


def read_bar_file(
    path: Path, options: ReadOptions = AS_WRITTEN, wanted: Wanted | None = None
) -> BarFile:
    """The bars of a CSV (optionally compressed) or Parquet file (of the instrument `wanted`
    where its rows name several); ReplayDataError if it cannot be read with confidence."""
    table = read_table(path, options)
    if table.num_rows == 0:
        raise ReplayDataError(f"{path}: has a header but no rows of bars")
    with arrow_errors(path, "cannot be read as bars", "check its columns and values"):
        names = [str(name) for name in table.column_names]
        time_names, found = time_columns(names, options, path)
        times = read_times(
            time_values(table, time_names, path), " + ".join(time_names), options, path
        )
        one = select_instrument(table, times, wanted, path)
        table, times = one.table, one.times
        refuse_rows_ahead(times.ms, times.zone == NAIVE_AS_UTC, options, path, one.file_rows)
        columns = value_columns(table, time_names, path)
        values, adjustment = adjust(columns, options.prices)
        ordered = order(times.ms, options.strict, path, one.file_rows)
        dupes = duplicates(times.ms, values, ordered.positions, options.strict, path)
        kept = rows(times.ms, values, ordered.positions, dupes.keep)
        splits = kept_splits(times.ms, columns, kept)
    report = FileReport(
        path=path,
        rows_read=table.num_rows,
        time_column=" + ".join(time_names),
        time_column_found=found,
        time_kind=times.kind,
        zone=times.zone,
        date_order=times.order,
        ignored_columns=columns.ignored,
        reversed=ordered.reversed,
        moved_rows=ordered.moved,
        identical_duplicates=dupes.identical,
        conflicting_duplicates=dupes.conflicting,
        first_conflict=dupes.first_conflict,
        adjustment=adjustment,
        volume_known=columns.volume_known,
        splits=splits,
        instrument=one.picked,
    )
    return BarFile(kept, report)
