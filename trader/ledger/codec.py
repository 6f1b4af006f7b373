"""How domain values are written to SQLite: exact decimals as text, UTC times of one width."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from trader.domain import ensure_utc

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def time_text(value: datetime) -> str:
    """2024-01-31T12:00:00.000000Z: one width, so text order is time order."""
    if value.tzinfo is not UTC:
        value = ensure_utc(value, "time")
    return value.isoformat(timespec="microseconds")[:-6] + "Z"


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC)


def optional_time(text: str | None) -> datetime | None:
    return parse_time(text) if text is not None else None


def money_text(value: Decimal) -> str:
    return str(value)


def optional_money(text: str | None) -> Decimal | None:
    return Decimal(text) if text is not None else None
