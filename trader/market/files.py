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

import bisect
import csv
import math
import zoneinfo
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from trader.domain import from_epoch_ms

Row = tuple[int, float, float, float, float, float, float | None]
Ints = npt.NDArray[np.int64]

TIME_COLUMNS = ("timestamps", "timestamp", "datetime", "date", "time", "open_time")
PRICE_COLUMNS = ("open", "high", "low", "close", "volume")
QUOTE_VOLUME_COLUMNS = ("amount", "quote_volume", "quote_asset_volume")
# What pandas and pyarrow call an index written without a name: first in a CSV, anywhere
# (last, in fact) in a Parquet file.
_INDEX_NAMES = ("", "unnamed: 0")
_PANDAS_INDEX = "__index_level_0__"
_PARQUET_SUFFIXES = (".parquet", ".pq")
_MAGIC = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a ZIP archive (an Excel workbook? export it as CSV)",
    b"\xd0\xcf\x11\xe0": "an old Office file (an Excel workbook? export it as CSV)",
}
_HEAD_BYTES = 64 * 1024
# pyarrow's missing-value spellings less its NaNs: a NaN in the file stays NaN in the row.
_MISSING = ("", "#N/A", "#N/A N/A", "#NA", "N/A", "NA", "NULL", "n/a", "null")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIME_DIRECTIVES = ("%H", "%I", "%M", "%S", "%s", "%T", "%X", "%c", "%R")
# Multiply, then floor-divide, to get milliseconds.
_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
_DAY_MS = 86_400_000
# Epoch numbers below this (about 1973 in seconds) are row numbers or dates, not times.
_SMALLEST_EPOCH = 10**8
# Each unit up to the magnitude where the next would mean a year before 5000.
_EPOCH_UNITS = (("s", 1e11), ("ms", 1e14), ("us", 1e17), ("ns", float("inf")))
_TIME_OF_DAY = ("", " %H:%M", " %H:%M:%S", "T%H:%M", "T%H:%M:%S", " %I:%M %p", " %I:%M:%S %p")
_FIELDS_FIRST = r"^\s*(?P<first>\d{1,2})(?P<sep>[/.-])(?P<second>\d{1,2})[/.-]\d{4}"
_YEAR_FIRST = r"^\s*\d{4}(?P<sep>[/.])\d{1,2}[/.]\d{1,2}"
_ZONED = r"\d:\d\d(:\d\d(\.\d+)?)?\s*(Z|[+-]\d\d:?\d\d)$"

AWARE = "times with offsets converted to UTC"
NAIVE_AS_UTC = "naive times read as UTC"
DATES_AS_UTC = "dates read as 00:00 UTC"
EPOCH_UTC = "epoch times are UTC"
_QUIET_ZONES = (AWARE, DATES_AS_UTC, EPOCH_UTC)
_NOT_APPLIED = "; --timezone not applied"


class ReplayDataError(ValueError):
    """A recording that cannot be replayed as it is; the message says what to do."""


@dataclass(frozen=True)
class ReadOptions:
    """What a file cannot say about itself: which column holds the times, their strptime
    format, the zone of naive times (IANA name; default UTC) and whether to refuse, rather than
    repair, an unsorted file or a time repeated with different values."""

    time_column: str | None = None
    date_format: str | None = None
    timezone: str | None = None
    strict: bool = False

    def __post_init__(self) -> None:
        if self.timezone is not None:
            try:
                zoneinfo.ZoneInfo(self.timezone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {self.timezone!r}: give an IANA name such as "
                    "Asia/Shanghai or America/New_York"
                ) from None


AS_WRITTEN = ReadOptions()


@dataclass(frozen=True)
class Conflict:
    """The first time written twice with different values: the row kept and a row dropped."""

    start_ms: int
    kept: Row
    dropped: Row


@dataclass(frozen=True)
class FileReport:
    """How a file was read. `time_column_found`: "named", "first column" (unnamed), "pandas
    index" (Parquet's __index_level_0__) or "given";
    `time_kind`: datetime, date, epoch_s/ms/us/ns or "text <strptime format>"; `date_order`:
    iso, month-first, day-first, format (given) or epoch."""

    path: Path
    rows_read: int
    time_column: str
    time_column_found: str
    time_kind: str
    zone: str
    date_order: str
    ignored_columns: tuple[str, ...] = ()
    reversed: bool = False
    moved_rows: int = 0
    identical_duplicates: int = 0
    conflicting_duplicates: int = 0
    first_conflict: Conflict | None = None

    @property
    def rows_kept(self) -> int:
        return self.rows_read - self.identical_duplicates - self.conflicting_duplicates

    @property
    def naive_times(self) -> bool:
        """The times had no zone and none was given: they were read as UTC."""
        return self.zone == NAIVE_AS_UTC

    @property
    def repaired(self) -> bool:
        """Rows were moved or dropped (a reversed file alone is not a repair)."""
        return self.rows_kept != self.rows_read or self.moved_rows > 0

    def notes(self) -> list[str]:
        """What a reader of the data should know; nothing for a clean file with zoned times."""
        notes = [] if self.zone in _QUIET_ZONES else [self.zone]
        if self.date_order in ("month-first", "day-first"):
            notes.append(f"dates read {self.date_order}, as the file's values show")
        if self.ignored_columns:
            notes.append(f"ignored columns: {', '.join(map(_shown, self.ignored_columns))}")
        if self.reversed:
            notes.append("newest-first rows reversed")
        if self.moved_rows:
            notes.append(f"{self.moved_rows} rows out of time order moved into place")
        if self.identical_duplicates:
            notes.append(
                f"{self.identical_duplicates} repeated rows (same time and values) dropped"
            )
        if self.first_conflict is not None:
            first = self.first_conflict
            notes.append(
                f"{self.conflicting_duplicates} rows repeat a time with other values: the first"
                f" row of each time kept, the others dropped (first at {_when(first.start_ms)}:"
                f" kept {first.kept[1:]}, dropped {first.dropped[1:]})"
            )
        return notes

    def log_fields(self) -> dict[str, Any]:
        """The report as structured log fields."""
        return {
            "path": str(self.path),
            "rows_read": self.rows_read,
            "rows": self.rows_kept,
            "time_column": _shown(self.time_column),
            "time_column_found": self.time_column_found,
            "time_kind": self.time_kind,
            "zone": self.zone,
            "date_order": self.date_order,
            "ignored_columns": list(self.ignored_columns),
            "reversed": self.reversed,
            "moved_rows": self.moved_rows,
            "identical_duplicates": self.identical_duplicates,
            "conflicting_duplicates": self.conflicting_duplicates,
            "notes": self.notes(),
        }


@dataclass(frozen=True)
class BarFile:
    """A file's rows (start ms, open, high, low, close, volume, quote volume or None), in time
    order with one row per time, and the report of how they were read."""

    rows: list[Row]
    report: FileReport


def read_bar_file(path: Path, options: ReadOptions = AS_WRITTEN) -> BarFile:
    """The bars of a CSV (optionally compressed) or Parquet file; ReplayDataError if the file
    cannot be read with confidence."""
    table = _read_table(path, options)
    if table.num_rows == 0:
        raise ReplayDataError(f"{path}: has a header but no rows of bars")
    with _arrow_errors(path, "cannot be read as bars", "check its columns and values"):
        names = [str(name) for name in table.column_names]
        time_names, found = _time_columns(names, options, path)
        times = _read_times(_time_values(table, time_names), " + ".join(time_names), options, path)
        values, ignored = _value_columns(table, time_names, path)
        order = _order(times.ms, options.strict, path)
        dupes = _duplicates(times.ms, values, order.positions, options.strict, path)
        rows = _rows(times.ms, values, order.positions, dupes.keep)
    report = FileReport(
        path=path,
        rows_read=table.num_rows,
        time_column=" + ".join(time_names),
        time_column_found=found,
        time_kind=times.kind,
        zone=times.zone,
        date_order=times.order,
        ignored_columns=ignored,
        reversed=order.reversed,
        moved_rows=order.moved,
        identical_duplicates=dupes.identical,
        conflicting_duplicates=dupes.conflicting,
        first_conflict=dupes.first_conflict,
    )
    return BarFile(rows, report)


# --- the file itself -----------------------------------------------------------------------


def _read_table(path: Path, options: ReadOptions) -> pa.Table:
    if not path.exists():
        raise ReplayDataError(f"{path}: no such file")
    if not path.is_file():
        raise ReplayDataError(f"{path}: is not a file; give a CSV or Parquet file of bars")
    if path.stat().st_size == 0:
        raise ReplayDataError(f"{path}: is empty (0 bytes); it needs a header row and bars")
    with path.open("rb") as handle:
        magic = handle.read(8)
    for prefix, what in _MAGIC.items():
        if magic.startswith(prefix):
            raise ReplayDataError(f"{path}: is {what}, not a CSV or Parquet file of bars")
    if magic.startswith(b"PAR1") or path.suffix.lower() in _PARQUET_SUFFIXES:
        with _arrow_errors(path, "is not a readable Parquet file", "write or download it again"):
            return pq.read_table(path)
    # Compression is told by the name (.gz, .bz2, .zst) or, for gzip, by its first bytes.
    return _read_csv(path, "gzip" if magic.startswith(b"\x1f\x8b") else "detect", options)


def _read_csv(path: Path, compression: str, options: ReadOptions) -> pa.Table:
    header = _csv_header(path, compression)
    delimiter = _delimiter(header)
    names = next(csv.reader([header], delimiter=delimiter))
    # Values as float64 whatever the first block looks like: "100" in the first megabyte must
    # not make a column integer and "100.5" further down an error.
    numeric = PRICE_COLUMNS + QUOTE_VOLUME_COLUMNS
    types = {name: pa.float64() for name in names if name.strip().lower() in numeric}
    if options.date_format is not None:
        # Times in a stated format stay text as written, not as pyarrow would rewrite them.
        types |= {name: pa.string() for name in _time_columns(names, options, path)[0]}
    remedy = "every row needs the header's columns, with numbers for prices and volumes"
    with _arrow_errors(path, "is not a CSV file of bars", remedy):
        return pa_csv.read_csv(
            pa.input_stream(str(path), compression=compression),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter),
            convert_options=pa_csv.ConvertOptions(column_types=types, null_values=_MISSING),
        )


def _csv_header(path: Path, compression: str) -> str:
    """The first line, once the file is known to be text."""
    with (
        _arrow_errors(path, "cannot be decompressed", "write or download it again"),
        pa.input_stream(str(path), compression=compression) as stream,
    ):
        head: bytes = stream.read(_HEAD_BYTES)
    codes = np.frombuffer(head, np.uint8)
    controls = int(np.count_nonzero((codes < 9) | ((codes > 13) & (codes < 32))))
    if b"\x00" in head or controls > len(head) // 10:
        raise ReplayDataError(f"{path}: is binary, not a CSV or Parquet file of bars")
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if not text.strip():
        raise ReplayDataError(f"{path}: is empty (no header row); it needs a header row and bars")
    first: str = next(line for line in text.splitlines() if line.strip())
    return first


def _delimiter(header: str) -> str:
    """Commas, else the separator spreadsheets in some locales write."""
    if "," in header:
        return ","
    return next((d for d in (";", "\t", "|") if d in header), ",")


@contextmanager
def _arrow_errors(path: Path, problem: str, remedy: str) -> Iterator[None]:
    """pyarrow's errors as ReplayDataError: the file, what is wrong (in pyarrow's words too)
    and what to do."""
    try:
        yield
    except ReplayDataError:
        raise
    except UnicodeDecodeError:
        raise ReplayDataError(f"{path}: is not UTF-8 text; save it as UTF-8") from None
    except (pa.ArrowException, OSError) as error:
        text = str(error).strip()
        detail = text.splitlines()[0] if text else type(error).__name__
        if "UTF8" in detail or "UTF-8" in detail:
            raise ReplayDataError(f"{path}: is not UTF-8 text; save it as UTF-8") from None
        raise ReplayDataError(f"{path}: {problem} ({detail}); {remedy}") from None


# --- which columns -------------------------------------------------------------------------


def _by_lowered(names: Sequence[str]) -> dict[str, list[str]]:
    lowered: dict[str, list[str]] = {}
    for name in names:
        lowered.setdefault(name.strip().lower(), []).append(name)
    return lowered


def _time_columns(names: list[str], options: ReadOptions, path: Path) -> tuple[list[str], str]:
    """The column(s) holding the times, and how they were found."""
    lowered = _by_lowered(names)
    if options.time_column is not None:
        given = options.time_column
        match = [given] if given in names else lowered.get(given.strip().lower(), [])[:1]
        if not match:
            raise ReplayDataError(f"{path}: no column {given!r} (its columns: {_listed(names)})")
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
        f"columns: {_listed(names)}); say which holds the times with --time-column NAME"
    )


def _time_values(table: pa.Table, names: list[str]) -> pa.Array:
    if len(names) == 1:
        return table.column(names[0]).combine_chunks()
    parts = [pc.cast(table.column(name), pa.string()) for name in names]
    return pc.binary_join_element_wise(*parts, " ").combine_chunks()


def _value_columns(
    table: pa.Table, time_names: list[str], path: Path
) -> tuple[list[pa.Array], tuple[str, ...]]:
    """open, high, low, close, volume (and the quote volume if there is one) as float64, and
    the columns ignored. Names match exactly but for case: "Adj Close" is never the close."""
    names = [str(name) for name in table.column_names]
    lowered = _by_lowered(names)
    missing = [name for name in PRICE_COLUMNS if name not in lowered]
    if missing:
        raise ReplayDataError(
            f"{path}: no {', '.join(missing)} column (its columns: {_listed(names)})"
        )
    twice = [lowered[name] for name in PRICE_COLUMNS if len(lowered[name]) > 1]
    if twice:
        raise ReplayDataError(f"{path}: columns {_listed(twice[0])} differ only in case")
    chosen = [lowered[name][0] for name in PRICE_COLUMNS]
    quote = next((lowered[n][0] for n in QUOTE_VOLUME_COLUMNS if n in lowered), None)
    chosen += [quote] if quote is not None else []
    ignored = tuple(n for n in names if n not in chosen and n not in time_names)
    return [_numbers(table, name, path) for name in chosen], ignored


def _numbers(table: pa.Table, name: str, path: Path) -> pa.Array:
    try:
        return pc.cast(table.column(name), pa.float64()).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ReplayDataError(
            f"{path}: column {name} does not hold numbers ({str(error).splitlines()[0]})"
        ) from None


def _shown(name: str) -> str:
    return name if name.strip() else "(unnamed)"


def _listed(names: Sequence[str]) -> str:
    return ", ".join(map(_shown, names))


def _when(ms: int) -> str:
    return from_epoch_ms(ms).strftime("%Y-%m-%d %H:%M:%S UTC")


# --- times -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Times:
    ms: Ints
    kind: str
    zone: str
    order: str


def _read_times(values: pa.Array, name: str, options: ReadOptions, path: Path) -> _Times:
    if values.null_count:
        row = int(pc.index(pc.is_null(values), True).as_py()) + 1
        raise ReplayDataError(f"{path}: data row {row} has no time in column {_shown(name)}")
    kind = values.type
    if options.date_format is not None:
        text = pc.cast(values, pa.string())
        return _text_times(text, (options.date_format,), "format", options, path)
    if pa.types.is_timestamp(kind):
        return _clock_times(values, options, "datetime", "iso", path)
    if pa.types.is_date(kind):
        days = _numpy(pc.cast(pc.cast(values, pa.date32()), pa.int32()), np.int32)
        return _Times(days.astype(np.int64) * _DAY_MS, "date", _dates_zone(options), "iso")
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return _epoch_times(values, name, options, path)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _string_times(values, name, options, path)
    raise ReplayDataError(f"{path}: column {_shown(name)} holds {kind} values, not times")


def _dates_zone(options: ReadOptions) -> str:
    # A date names a day, not an instant in a zone: its bar starts at 00:00 UTC of that day.
    return DATES_AS_UTC + (_NOT_APPLIED if options.timezone else "")


def _clock_times(
    values: pa.Array, options: ReadOptions, kind: str, order: str, path: Path
) -> _Times:
    """Timestamps, aware (converted to UTC) or naive (in --timezone, else UTC)."""
    if values.type.tz is not None:
        zone = AWARE + (_NOT_APPLIED if options.timezone else "")
    elif options.timezone is not None:
        values = _assume_zone(values, options.timezone, path)
        zone = f"naive times read in {options.timezone} and converted to UTC"
    else:
        zone = NAIVE_AS_UTC
    multiply, divide = _TO_MS[values.type.unit]
    ms = _numpy(pc.cast(values, pa.int64()), np.int64) * multiply // divide
    return _Times(ms, kind, zone, order)


def _assume_zone(values: pa.Array, zone: str, path: Path) -> pa.Array:
    try:
        return pc.assume_timezone(values, zone, ambiguous="raise", nonexistent="raise")
    except pa.ArrowInvalid as error:
        # A wall-clock time repeated or skipped by a DST change cannot be placed by guessing.
        detail = str(error).split(".")[0]
        raise ReplayDataError(
            f"{path}: {detail} (times read in {zone}); write the times in UTC or with offsets"
        ) from None


def _epoch_times(values: pa.Array, name: str, options: ReadOptions, path: Path) -> _Times:
    """Seconds, milliseconds, microseconds or nanoseconds since 1970, told by magnitude."""
    integers = pa.types.is_integer(values.type)
    if integers:
        numbers = _numpy(pc.cast(values, pa.int64()), np.int64)
    else:
        numbers = _numpy(pc.cast(values, pa.float64()), np.float64)
    if not integers and np.isnan(numbers).any():
        row = int(np.flatnonzero(np.isnan(numbers))[0]) + 1
        raise ReplayDataError(f"{path}: data row {row} has no time in column {_shown(name)}")
    magnitude = float(np.median(np.abs(numbers)))
    if magnitude < _SMALLEST_EPOCH:
        raise ReplayDataError(
            f"{path}: column {_shown(name)} holds numbers such as {numbers[0]}, too small for "
            "epoch times (a row number? a date like 20240131?); say which column holds the "
            "times with --time-column NAME, or their format with --date-format (e.g. %Y%m%d)"
        )
    unit = next(u for u, bound in _EPOCH_UNITS if magnitude < bound)
    multiply, divide = _TO_MS[unit]
    if integers:
        ms = numbers.astype(np.int64) * multiply // divide
    else:
        ms = np.rint(numbers * multiply / divide)
    zone = EPOCH_UTC + (_NOT_APPLIED if options.timezone else "")
    return _Times(ms.astype(np.int64), f"epoch_{unit}", zone, "epoch")


def _string_times(values: pa.Array, name: str, options: ReadOptions, path: Path) -> _Times:
    """ISO 8601 text (pyarrow reads it at C speed), else dates with numeric fields."""
    values = pc.utf8_trim_whitespace(values)
    for target in (pa.timestamp("us", "UTC"), pa.timestamp("us")):
        try:
            parsed = pc.cast(values, target)
        except pa.ArrowInvalid:
            continue
        return _clock_times(parsed, options, "datetime", "iso", path)
    zoned = pc.match_substring_regex(values, _ZONED)
    if pc.any(zoned).as_py() and not pc.all(zoned).as_py():
        raise ReplayDataError(
            f"{path}: column {_shown(name)} mixes times with and without a zone (e.g. "
            f"{_first(values, zoned)!r} and {_first(values, pc.invert(zoned))!r}); write all "
            "with offsets or all in one zone (then say which with --timezone)"
        )
    formats, order = _numeric_date_formats(values, name, path)
    return _text_times(values, formats, order, options, path)


def _first(values: pa.Array, mask: pa.Array) -> str:
    return str(values.filter(mask)[0].as_py())


def _numeric_date_formats(values: pa.Array, name: str, path: Path) -> tuple[tuple[str, ...], str]:
    """strptime formats for dates such as 2020.08.11, 08/11/2020 or 11.08.2020 (with or
    without a time of day). Month-first or day-first only when the file's values say so."""
    year_first = pc.extract_regex(values, _YEAR_FIRST)
    if year_first.null_count == 0:
        sep = year_first.field("sep")[0].as_py()
        return tuple(f"%Y{sep}%m{sep}%d{t}" for t in _TIME_OF_DAY), "iso"
    fields = pc.extract_regex(values, _FIELDS_FIRST)
    if fields.null_count:
        unreadable = _first(values, pc.is_null(fields))
        raise ReplayDataError(
            f"{path}: column {_shown(name)}: cannot read {unreadable!r} as a time; give its "
            "format with --date-format (a strptime format such as '%d.%m.%Y %H:%M')"
        )
    first, second = (pc.cast(fields.field(f), pa.int32()) for f in ("first", "second"))
    day_first, month_first = pc.greater(first, 12), pc.greater(second, 12)
    if pc.any(day_first).as_py() and pc.any(month_first).as_py():
        raise ReplayDataError(
            f"{path}: column {_shown(name)} has dates day-first ({_first(values, day_first)!r}) "
            f"and month-first ({_first(values, month_first)!r}); write one order and say which "
            "with --date-format (e.g. %d/%m/%Y or %m/%d/%Y)"
        )
    if not pc.any(day_first).as_py() and not pc.any(month_first).as_py():
        raise ReplayDataError(
            f"{path}: column {_shown(name)} has dates such as {values[0].as_py()!r} that read "
            "as month/day or day/month alike (no field above 12); say which with --date-format "
            "(e.g. %m/%d/%Y or %d/%m/%Y)"
        )
    sep = fields.field("sep")[0].as_py()
    if pc.any(day_first).as_py():
        return tuple(f"%d{sep}%m{sep}%Y{t}" for t in _TIME_OF_DAY), "day-first"
    return tuple(f"%m{sep}%d{sep}%Y{t}" for t in _TIME_OF_DAY), "month-first"


def _text_times(
    values: pa.Array, formats: Sequence[str], order: str, options: ReadOptions, path: Path
) -> _Times:
    """Text in strptime formats: pyarrow for the whole column, Python's strptime only for the
    rows pyarrow cannot read (%f, %p and the like)."""
    parsed, used = _arrow_strptime(values, formats)
    if parsed is None:
        ms, unread = np.zeros(len(values), np.int64), np.arange(len(values))
    else:
        ms = _numpy(pc.fill_null(pc.cast(parsed, pa.int64()), 0), np.int64).copy()
        unread = np.array(pc.indices_nonzero(pc.is_null(parsed)).to_pylist(), np.int64)
    for row in unread.tolist():
        ms[row], fmt = _python_time(str(values[row].as_py()), formats, row, path)
        used.add(fmt)
    kind = "text " + " or ".join(f for f in formats if f in used)
    if not any(d in f for f in used for d in _TIME_DIRECTIVES):
        return _Times(ms, kind, _dates_zone(options), order)
    aware = any("%z" in f for f in used)
    stamps = _arrow(ms, pa.timestamp("ms", "UTC" if aware else None))
    return _clock_times(stamps, options, kind, order, path)


def _arrow_strptime(values: pa.Array, formats: Sequence[str]) -> tuple[pa.Array | None, set[str]]:
    """The column parsed with the first format that reads each row (null where none does)."""
    parsed, used = None, set()
    for fmt in formats:
        try:
            attempt = pc.strptime(values, format=fmt, unit="ms", error_is_null=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue  # a format pyarrow does not know: Python's strptime reads those rows
        if attempt.null_count < len(values):
            used.add(fmt)
            parsed = attempt if parsed is None else pc.coalesce(parsed, attempt)
            if parsed.null_count == 0:
                break
    return parsed, used


def _python_time(text: str, formats: Sequence[str], row: int, path: Path) -> tuple[int, str]:
    """Milliseconds since 1970 of `text` (wall-clock as if UTC when naive) and its format."""
    for fmt in formats:
        try:
            parsed = datetime.strptime(text, fmt)  # noqa: DTZ007 - the caller places naive times
        except ValueError:
            continue
        as_utc = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        return (as_utc - _EPOCH) // timedelta(milliseconds=1), fmt
    raise ReplayDataError(
        f"{path}: data row {row + 1}: cannot read {text!r} as {' or '.join(formats)}; "
        "give the times' format with --date-format"
    )


# --- order and duplicates ------------------------------------------------------------------


@dataclass(frozen=True)
class _Order:
    positions: Ints | None  # the file's rows in time order; None: already in order
    reversed: bool
    moved: int


def _order(ms: Ints, strict: bool, path: Path) -> _Order:
    """Time order, stable: a newest-first file is reversed; otherwise rows out of place are
    moved, counted as the fewest rows that had to move (n minus the longest ordered run)."""
    if _ascending(ms):
        return _Order(None, False, 0)
    everything = np.arange(len(ms), dtype=np.int64)
    if _ascending(ms[::-1]):
        return _Order(everything[::-1], True, 0)
    forward, backward = _longest_ordered(ms.tolist()), _longest_ordered(ms[::-1].tolist())
    reverse = backward > forward
    base = everything[::-1] if reverse else everything
    if strict:
        row = int(base[int(np.flatnonzero(np.diff(ms[base]) < 0)[0]) + 1]) + 1
        raise ReplayDataError(
            f"{path}: rows are not in time order ({len(ms) - max(forward, backward)} rows out "
            f"of place, the first at data row {row}); sort the file, or leave out --strict to "
            "have it sorted"
        )
    positions = base[np.argsort(ms[base], kind="stable")]
    return _Order(positions, reverse, len(ms) - max(forward, backward))


def _ascending(ms: Ints) -> bool:
    return bool(np.all(ms[1:] >= ms[:-1]))


def _longest_ordered(times: list[int]) -> int:
    """Length of the longest non-decreasing subsequence (patience sorting, n log n)."""
    tails: list[int] = []
    for time in times:
        at = bisect.bisect_right(tails, time)
        if at == len(tails):
            tails.append(time)
        else:
            tails[at] = time
    return len(tails)


@dataclass(frozen=True)
class _Duplicates:
    keep: npt.NDArray[np.bool_] | None  # None: no time repeats
    identical: int = 0
    conflicting: int = 0
    first_conflict: Conflict | None = None


def _duplicates(
    ms: Ints, values: list[pa.Array], positions: Ints | None, strict: bool, path: Path
) -> _Duplicates:
    """Of rows sharing a time, the first in time order is kept; a repeat with the same values
    is dropped and counted, one with other values is a conflict (refused if strict)."""
    at_file = np.arange(len(ms)) if positions is None else positions
    ordered = ms[at_file]
    repeat = np.concatenate(([False], ordered[1:] == ordered[:-1]))
    if not repeat.any():
        return _Duplicates(None)
    kept_at = np.maximum.accumulate(np.where(repeat, 0, np.arange(len(ms))))
    columns = [_numpy(pc.fill_null(v, math.nan), np.float64) for v in values]
    matrix = np.column_stack(columns)[at_file]
    kept = matrix[kept_at]
    same = ((matrix == kept) | (np.isnan(matrix) & np.isnan(kept))).all(axis=1)
    conflicts = np.flatnonzero(repeat & ~same)
    first = None
    if len(conflicts):
        at = int(conflicts[0])
        kept_row = _row(ms, values, int(at_file[kept_at[at]]))
        first = Conflict(int(ordered[at]), kept_row, _row(ms, values, int(at_file[at])))
        if strict:
            raise ReplayDataError(
                f"{path}: {len(conflicts)} rows repeat a time with different values (first at "
                f"{_when(first.start_ms)}: {first.kept[1:]} and {first.dropped[1:]}); remove "
                "the wrong rows, or leave out --strict to keep the first of each"
            )
    identical = int((repeat & same).sum())
    return _Duplicates(~repeat, identical, len(conflicts), first)


def _row(ms: Ints, values: list[pa.Array], at: int) -> Row:
    open_, high, low, close, volume, *quote = (v[at].as_py() for v in values)
    return (int(ms[at]), open_, high, low, close, volume, quote[0] if quote else None)


def _rows(
    ms: Ints, values: list[pa.Array], positions: Ints | None, keep: npt.NDArray[np.bool_] | None
) -> list[Row]:
    """The rows at `positions` (all, in file order, if None) that `keep` keeps."""
    if keep is not None:
        positions = (np.arange(len(ms)) if positions is None else positions)[keep]
    if positions is not None:
        ms, taken = ms[positions], _arrow(positions, pa.int64())
        values = [v.take(taken) for v in values]
    columns = [v.to_pylist() for v in values]
    if len(columns) == len(PRICE_COLUMNS):
        columns.append([None] * len(ms))
    return list(zip(ms.tolist(), *columns, strict=True))


# pyarrow's own numpy conversions import pandas (a third of a second the CLI need not spend):
# fixed-width values without nulls go through their buffer instead.


def _numpy(values: pa.Array, dtype: type[np.number[Any]]) -> Any:
    width = np.dtype(dtype).itemsize
    data = values.buffers()[1]
    return np.frombuffer(data, dtype=dtype, count=len(values), offset=values.offset * width)


def _arrow(values: npt.NDArray[Any], kind: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(
        kind, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))]
    )
