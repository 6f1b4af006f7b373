"""Epoch milliseconds to and from datetimes: UTC instants, and wall-clock times in a zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from numpy.typing import ArrayLike

from trader.market.calendars.units import DAY_MS, Int64s

_WALL_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001  # wall-clock: a zone is attached per use


def utc_ms(at: datetime) -> int:
    """Epoch ms of an aware datetime, to the second."""
    return int(at.timestamp()) * 1000


def utc_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def wall_to_utc(wall_ms: ArrayLike, zone: str) -> Int64s:
    """Naive wall-clock times in `zone` (epoch ms as if UTC) as true UTC epoch ms.

    One zone lookup per distinct day, and per quarter hour (every offset change falls on one)
    only inside days where the offset changes. A repeated hour at the end of summer time reads
    as its first occurrence; a skipped one as if the clock had not changed yet."""
    times = np.asarray(wall_ms, dtype=np.int64).reshape(-1)
    if zone == "UTC" or times.size == 0:
        return times.copy()
    tz = ZoneInfo(zone)
    days, day_of = np.unique(times // DAY_MS, return_inverse=True)
    day_of = day_of.reshape(-1)
    at_start = np.array([_offset_ms(int(d) * DAY_MS, tz) for d in days], dtype=np.int64)
    at_end = np.array([_offset_ms((int(d) + 1) * DAY_MS, tz) for d in days], dtype=np.int64)
    offsets = at_start[day_of]
    changing = np.isin(day_of, np.flatnonzero(at_start != at_end))
    if changing.any():
        quarter = 15 * 60_000
        quarters, quarter_of = np.unique(times[changing] // quarter, return_inverse=True)
        exact = np.array([_offset_ms(int(q) * quarter, tz) for q in quarters], dtype=np.int64)
        offsets[changing] = exact[quarter_of.reshape(-1)]
    return (times - offsets).astype(np.int64)


def _offset_ms(wall_ms: int, zone: ZoneInfo) -> int:
    wall = _WALL_EPOCH + timedelta(milliseconds=wall_ms)
    offset = wall.replace(tzinfo=zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset // timedelta(milliseconds=1)
