"""What a reader of a bar file is told, and the error it raises.

Only the standard library: the CLI builds ReadOptions from its arguments before (and without)
loading pyarrow.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass


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
