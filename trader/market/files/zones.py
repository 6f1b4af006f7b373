"""Placing a bar file's times in UTC: aware times converted, naive ones read in --timezone
(else as UTC), dates at 00:00 UTC; and the record of which was done."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.arrow_numpy import to_numpy
from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import AWARE, DATES_AS_UTC, NAIVE_AS_UTC

Ints = npt.NDArray[np.int64]

# Multiply, then floor-divide, to get milliseconds.
TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
NOT_APPLIED = "; --timezone not applied"


@dataclass(frozen=True)
class Times:
    """A time column read: UTC epoch ms, and the report's time_kind, zone and date_order."""

    ms: Ints
    kind: str
    zone: str
    order: str


def dates_zone(options: ReadOptions) -> str:
    # A date names a day, not an instant in a zone: its bar starts at 00:00 UTC of that day.
    return DATES_AS_UTC + (NOT_APPLIED if options.timezone else "")


def clock_times(values: pa.Array, options: ReadOptions, kind: str, order: str, path: Path) -> Times:
    """Timestamps, aware (converted to UTC) or naive (in --timezone, else UTC)."""
    if values.type.tz is not None:
        zone = AWARE + (NOT_APPLIED if options.timezone else "")
    elif options.timezone is not None:
        values = _assume_zone(values, options.timezone, path)
        zone = f"naive times read in {options.timezone} and converted to UTC"
    else:
        zone = NAIVE_AS_UTC
    multiply, divide = TO_MS[values.type.unit]
    ms = to_numpy(pc.cast(values, pa.int64()), np.int64) * multiply // divide
    return Times(ms, kind, zone, order)


def _assume_zone(values: pa.Array, zone: str, path: Path) -> pa.Array:
    try:
        return pc.assume_timezone(values, zone, ambiguous="raise", nonexistent="raise")
    except pa.ArrowInvalid as error:
        # A wall-clock time repeated or skipped by a DST change cannot be placed by guessing.
        detail = str(error).split(".")[0]
        raise ReplayDataError(
            f"{path}: {detail} (times read in {zone}); write the times in UTC or with offsets"
        ) from None
