"""Rows dated after now: a bar that has not started cannot have been recorded. One such row
would otherwise stretch the replay into the future with thousands of "missing" bars. Rows dated
before the year 1000 are no recording either (a damaged date or epoch number), and times
that far out are beyond what the program's clocks can hold."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import when

Ints = npt.NDArray[np.int64]

# Naive times were read as UTC but may be any zone's wall clock: the furthest ahead of UTC
# (Kiribati, UTC+14) must not make a fresh download's last bar look like the future.
_WIDEST_OFFSET_MS = 14 * 3_600_000
# 1000-01-01 00:00 UTC: far from datetime's first day, so a replay's context before the
# first bar can still be counted back from it.
_EARLIEST_MS = -30_610_224_000_000


def refuse_rows_ahead(
    ms: Ints, naive: bool, options: ReadOptions, path: Path, file_rows: Ints | None = None
) -> None:
    """ReplayDataError naming the first row (in file order) that starts after now plus one
    bar (the median step between the file's times). `file_rows`: each time's data row index
    in the file, when `ms` holds only some of its rows."""
    if not len(ms):
        return
    early = np.flatnonzero(ms < _EARLIEST_MS)
    if len(early):
        first = int(early[0])
        row = (first if file_rows is None else int(file_rows[first])) + 1
        raise ReplayDataError(
            f"{path}: data row {row} is dated {when(int(ms[first]))}, before the year 1000: "
            "not a recorded time; correct or remove it"
        )
    now = options.now or datetime.now(UTC)
    now_ms = int(now.timestamp() * 1000)
    # At most the largest int64: a file of wild times has a wild median step.
    late_bound = min(
        now_ms + _bar_ms(ms) + (_WIDEST_OFFSET_MS if naive else 0), int(np.iinfo(np.int64).max)
    )
    late = np.flatnonzero(ms > late_bound)
    if not len(late):
        return
    first = int(late[0])
    row = (first if file_rows is None else int(file_rows[first])) + 1
    others = (
        f" ({len(late)} rows are, the latest {when(int(ms[late].max()))})" if len(late) > 1 else ""
    )
    raise ReplayDataError(
        f"{path}: data row {row} is dated {when(int(ms[first]))}, after now "
        f"({when(now_ms)}) plus one bar{others}; correct or remove it"
    )


def _bar_ms(ms: Ints) -> int:
    """The median step between distinct times (0 with fewer than two)."""
    distinct = np.unique(ms)
    return int(np.median(np.diff(distinct))) if len(distinct) > 1 else 0
