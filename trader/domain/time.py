"""Timestamps (always timezone-aware UTC) and bar timeframes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from trader.domain.errors import DomainError

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TIMEFRAME = re.compile(r"^([1-9][0-9]*)([smhdw])$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# 1970-01-01 was a Thursday; exchanges start weekly bars on Monday.
_WEEK_ORIGIN = _EPOCH - timedelta(days=3)


def ensure_utc(value: datetime, name: str = "timestamp") -> datetime:
    """Return `value` in UTC; refuse naive datetimes, whose meaning is a guess."""
    if value.__class__ is datetime and value.tzinfo is UTC:
        return value  # most are: nothing to convert
    if not isinstance(value, datetime):
        raise DomainError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise DomainError(f"{name} must be timezone-aware (UTC), got naive {value.isoformat()}")
    return value.astimezone(UTC)


def from_epoch_ms(ms: int) -> datetime:
    """Exchange timestamps (milliseconds since the epoch) as UTC datetimes."""
    return _EPOCH + timedelta(milliseconds=ms)


def to_epoch_ms(at: datetime) -> int:
    """A time as exchanges stamp it: whole milliseconds since the epoch."""
    return int(at.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Timeframe:
    """A bar length in ccxt notation ("15m", "1h", "1d"); months are refused (not fixed-length)."""

    text: str
    seconds: int = field(init=False, compare=False, repr=False)
    duration: timedelta = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        match = _TIMEFRAME.match(self.text) if isinstance(self.text, str) else None
        if match is None:
            raise DomainError(
                f"timeframe {self.text!r} is not of the form <n><s|m|h|d|w>, e.g. '15m' or '1h'"
            )
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        object.__setattr__(self, "seconds", seconds)
        object.__setattr__(self, "duration", timedelta(seconds=seconds))

    def floor(self, when: datetime) -> datetime:
        """The start of the bar that contains `when`."""
        when = ensure_utc(when, "when")
        origin = _WEEK_ORIGIN if self.text.endswith("w") else _EPOCH
        elapsed = (when - origin) // timedelta(microseconds=1)
        step = self.seconds * 1_000_000
        return origin + timedelta(microseconds=elapsed - elapsed % step)

    def __str__(self) -> str:
        return self.text
