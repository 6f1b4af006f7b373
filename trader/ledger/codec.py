"""How domain values are written to SQLite: exact decimals as text, UTC times of one width."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

from trader.domain import ensure_utc

_WIDTH = len("2024-01-31T12:00:00.000000Z")


@lru_cache(maxsize=256)  # a tick writes its own time (and the trading state's) many times
def time_text(value: datetime) -> str:
    """2024-01-31T12:00:00.000000Z: one width, so text order is time order."""
    if value.tzinfo is not UTC:
        value = ensure_utc(value, "time")
    return value.isoformat(timespec="microseconds")[:-6] + "Z"


def parse_time(text: str) -> datetime:
    """What `time_text` wrote (fromisoformat: strptime costs fifty times as much)."""
    if len(text) != _WIDTH or text[-1] != "Z" or text[10] != "T":
        raise ValueError(f"{text!r} is not a ledger time such as 2024-01-31T12:00:00.000000Z")
    return datetime.fromisoformat(text)


def optional_time(text: str | None) -> datetime | None:
    return parse_time(text) if text is not None else None


def money_text(value: Decimal) -> str:
    return str(value)


def optional_money(text: str | None) -> Decimal | None:
    return Decimal(text) if text is not None else None
