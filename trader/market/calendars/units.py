"""The units of calendar arithmetic: integer epoch milliseconds, the weekly grid's origin, and
times as messages show them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np
from numpy.typing import NDArray

Anchor = Literal["clock", "session"]
Int64s = NDArray[np.int64]

DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
# Timeframe.floor's weekly grid starts on Monday 1969-12-29, three days before the epoch.
WEEK_ORIGIN_MS = -3 * DAY_MS
YEAR_DAYS = 365.25
# Sessions are built this far past a calendar's span, so bars at its edges are right.
BUILD_PAD = timedelta(days=7)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
