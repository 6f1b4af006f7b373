"""What a reader of a bar file is told, and the error it raises.

Only the standard library: the CLI builds ReadOptions from its arguments before (and without)
loading pyarrow.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import datetime

PRICES = ("adjusted", "raw")  # what --prices takes; the first is the default


class ReplayDataError(ValueError):
    """A recording that cannot be replayed as it is; the message says what to do."""


@dataclass(frozen=True)
class ReadOptions:
    """What a file cannot say about itself: which column holds the times, their strptime
    format, the zone of naive times (IANA name; default UTC) and whether to refuse, rather than
    repair, an unsorted file or a time repeated with different values. `tickers`: the values
    of a file's instrument column to read (one per file, or several of one file); `now`: the
    time after which (plus one bar) a row is refused (None: the wall clock's when read)."""

    time_column: str | None = None
    date_format: str | None = None
    timezone: str | None = None
    strict: bool = False
    tickers: tuple[str, ...] = ()
    now: datetime | None = None
    # Where a file has an adjusted close: trade the adjusted prices (splits and dividends
    # folded in, as most backtesters do) or the raw ones as written (see files/adjust.py).
    prices: str = "adjusted"

    def __post_init__(self) -> None:
        if self.prices not in PRICES:
            raise ValueError(f"prices must be one of {', '.join(PRICES)}, not {self.prices!r}")
        if self.now is not None and self.now.tzinfo is None:
            raise ValueError("ReadOptions.now must be an aware time")
        if self.timezone is not None:
            try:
                zoneinfo.ZoneInfo(self.timezone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {self.timezone!r}: give an IANA name such as "
                    "Asia/Shanghai or America/New_York"
                ) from None


AS_WRITTEN = ReadOptions()
