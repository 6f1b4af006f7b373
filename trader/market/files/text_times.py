"""Times written as text: ISO 8601, dates with numeric fields in the order the values show
(US or European), or a given strptime format."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.arrow_numpy import to_arrow, to_numpy
from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import shown
from trader.market.files.zones import Times, clock_times, dates_zone

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIME_DIRECTIVES = ("%H", "%I", "%M", "%S", "%s", "%T", "%X", "%c", "%R")
_TIME_OF_DAY = ("", " %H:%M", " %H:%M:%S", "T%H:%M", "T%H:%M:%S", " %I:%M %p", " %I:%M:%S %p")
_FIELDS_FIRST = r"^\s*(?P<first>\d{1,2})(?P<sep>[/.-])(?P<second>\d{1,2})[/.-]\d{4}"
_YEAR_FIRST = r"^\s*\d{4}(?P<sep>[/.])\d{1,2}[/.]\d{1,2}"
_ZONED = r"\d:\d\d(:\d\d(\.\d+)?)?\s*(Z|[+-]\d\d:?\d\d)$"


def string_times(values: pa.Array, name: str, options: ReadOptions, path: Path) -> Times:
    """ISO 8601 text (pyarrow reads it at C speed), else dates with numeric fields."""
    values = pc.utf8_trim_whitespace(values)
    for target in (pa.timestamp("us", "UTC"), pa.timestamp("us")):
        try:
            parsed = pc.cast(values, target)
        except pa.ArrowInvalid:
            continue
        return clock_times(parsed, options, "datetime", "iso", path)
    zoned = pc.match_substring_regex(values, _ZONED)
    if pc.any(zoned).as_py() and not pc.all(zoned).as_py():
        raise ReplayDataError(
            f"{path}: column {shown(name)} mixes times with and without a zone (e.g. "
            f"{_first(values, zoned)!r} and {_first(values, pc.invert(zoned))!r}); write all "
            "with offsets or all in one zone (then say which with --timezone)"
        )
    formats, order = _numeric_date_formats(values, name, path)
    return text_times(values, formats, order, options, path)


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
            f"{path}: column {shown(name)}: cannot read {unreadable!r} as a time; give its "
            "format with --date-format (a strptime format such as '%d.%m.%Y %H:%M')"
        )
    first, second = (pc.cast(fields.field(f), pa.int32()) for f in ("first", "second"))
    day_first, month_first = pc.greater(first, 12), pc.greater(second, 12)
    if pc.any(day_first).as_py() and pc.any(month_first).as_py():
        raise ReplayDataError(
            f"{path}: column {shown(name)} has dates day-first ({_first(values, day_first)!r}) "
            f"and month-first ({_first(values, month_first)!r}); write one order and say which "
            "with --date-format (e.g. %d/%m/%Y or %m/%d/%Y)"
        )
    if not pc.any(day_first).as_py() and not pc.any(month_first).as_py():
        raise ReplayDataError(
            f"{path}: column {shown(name)} has dates such as {values[0].as_py()!r} that read "
            "as month/day or day/month alike (no field above 12); say which with --date-format "
            "(e.g. %m/%d/%Y or %d/%m/%Y)"
        )
    sep = fields.field("sep")[0].as_py()
    if pc.any(day_first).as_py():
        return tuple(f"%d{sep}%m{sep}%Y{t}" for t in _TIME_OF_DAY), "day-first"
    return tuple(f"%m{sep}%d{sep}%Y{t}" for t in _TIME_OF_DAY), "month-first"


def text_times(
    values: pa.Array, formats: Sequence[str], order: str, options: ReadOptions, path: Path
) -> Times:
    """Text in strptime formats: pyarrow for the whole column, Python's strptime only for the
    rows pyarrow cannot read (%f, %p and the like)."""
    parsed, used = _arrow_strptime(values, formats)
    if parsed is None:
        ms, unread = np.zeros(len(values), np.int64), np.arange(len(values))
    else:
        ms = to_numpy(pc.fill_null(pc.cast(parsed, pa.int64()), 0), np.int64).copy()
        unread = np.array(pc.indices_nonzero(pc.is_null(parsed)).to_pylist(), np.int64)
    for row in unread.tolist():
        ms[row], fmt = _python_time(str(values[row].as_py()), formats, row, path)
        used.add(fmt)
    kind = "text " + " or ".join(f for f in formats if f in used)
    if not any(d in f for f in used for d in _TIME_DIRECTIVES):
        return Times(ms, kind, dates_zone(options), order)
    aware = any("%z" in f for f in used)
    stamps = to_arrow(ms, pa.timestamp("ms", "UTC" if aware else None))
    return clock_times(stamps, options, kind, order, path)


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
