"""Times written with different UTC offsets in one column. Each is an instant all the same, but
a file of one market's bars that changes offset was joined from exports in different zones or
had its offsets written wrong, unless they are one zone's winter and summer offsets: refused
unless --timezone names that zone, and then every row's offset must be the zone's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.arrow_numpy import to_arrow, to_numpy
from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import shown
from trader.market.files.zones import Times

Ints = npt.NDArray[np.int64]

# An offset after a time of day (a date's own dashes are not offsets).
_OFFSET = r"\d:\d\d(?::\d\d(?:[.,]\d+)?)?\s*(?P<offset>Z|[+-]\d\d:?\d\d)$"


def check_offsets(
    values: pa.Array, times: Times, name: str, options: ReadOptions, path: Path
) -> Times:
    """`times` (read from the text `values`) as they are when the column has one offset or
    none; ReplayDataError naming the offsets when it has several and no --timezone, or rows
    whose offset is not --timezone's at their time."""
    written = _written_offsets(pc.utf8_trim_whitespace(values))
    counted = pc.value_counts(written.drop_null())
    if len(counted) < 2:
        return times
    rows = dict(
        zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True)
    )
    listed = ", ".join(f"{offset} ({rows[offset]} rows)" for offset in sorted(rows))
    zone = options.timezone
    if zone is None:
        raise ReplayDataError(
            f"{path}: column {shown(name)} mixes UTC offsets: {listed}; if each row's offset "
            "is right, name the zone they come from with --timezone (e.g. America/New_York "
            "writes -05:00 in winter and -04:00 in summer), otherwise correct them"
        )
    local = pc.local_timestamp(to_arrow(times.ms, pa.timestamp("ms", zone)))
    zone_ms = to_numpy(pc.cast(local, pa.int64()), np.int64) - times.ms
    written_ms = _offset_ms(written)
    wrong = np.flatnonzero(zone_ms != written_ms)
    if len(wrong):
        at = int(wrong[0])
        raise ReplayDataError(
            f"{path}: column {shown(name)} mixes UTC offsets ({listed}) and {len(wrong)} rows' "
            f"offsets are not {zone}'s at their time (first at data row {at + 1}: "
            f"{values[at].as_py()!r}, where {zone} is {_offset_text(int(zone_ms[at]))}); "
            "correct them, or name the zone they come from with --timezone"
        )
    return replace(
        times, zone=f"times with offsets {', '.join(sorted(rows))} ({zone}'s) converted to UTC"
    )


def _written_offsets(values: pa.Array) -> pa.Array:
    """Each row's offset as +HH:MM (Z as +00:00), null where none is written."""
    found = pc.struct_field(pc.extract_regex(values, _OFFSET), "offset")
    found = pc.replace_substring_regex(found, r"^Z$", "+00:00")
    return pc.replace_substring_regex(found, r"^([+-]\d\d)(\d\d)$", r"\1:\2")


def _offset_ms(offsets: pa.Array) -> Ints:
    """+HH:MM as signed milliseconds."""
    text = pc.fill_null(offsets, "+00:00")
    negative = np.asarray(pc.starts_with(text, "-").to_numpy(zero_copy_only=False), np.bool_)
    hours = to_numpy(pc.cast(pc.utf8_slice_codeunits(text, 1, 3), pa.int64()), np.int64)
    minutes = to_numpy(pc.cast(pc.utf8_slice_codeunits(text, 4, 6), pa.int64()), np.int64)
    magnitude: Ints = hours * 3_600_000 + minutes * 60_000
    return np.where(negative, -magnitude, magnitude)


def _offset_text(ms: int) -> str:
    sign = "-" if ms < 0 else "+"
    minutes = abs(ms) // 60_000
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
