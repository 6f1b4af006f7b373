"""How domain values are written to SQLite: exact decimals as text, UTC times of one width."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from trader.domain import ensure_utc

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def time_text(value: datetime) -> str:
    return ensure_utc(value, "time").strftime(_FORMAT)


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC)


def optional_time(text: str | None) -> datetime | None:
    return parse_time(text) if text is not None else None


def money_text(value: Decimal) -> str:
    return str(value)


def optional_money(text: str | None) -> Decimal | None:
    return Decimal(text) if text is not None else None
