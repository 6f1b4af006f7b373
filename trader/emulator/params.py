"""A signed request's parameters (spot and futures), with Binance's refusals for bad ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from trader.emulator.venue import VenueError


def required(params: Mapping[str, str], name: str) -> str:
    value = params.get(name)
    if not value:
        raise VenueError(
            -1102, f"Mandatory parameter '{name}' was not sent, was empty/null, or malformed."
        )
    return value


def decimal_param(params: Mapping[str, str], name: str) -> Decimal:
    text = required(params, name)
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise VenueError(-1100, f"Illegal characters found in parameter '{name}'.") from None
    if not value.is_finite():
        raise VenueError(-1100, f"Illegal characters found in parameter '{name}'.")
    return value


def limit_param(params: Mapping[str, str], default: int, most: int) -> int:
    try:
        limit = int(params.get("limit", default))
    except ValueError:
        raise VenueError(-1100, "Illegal characters found in parameter 'limit'.") from None
    if not 1 <= limit <= most:
        raise VenueError(-1130, "Data sent for parameter 'limit' is not valid.")
    return limit


def span(rows: list[Any], params: Mapping[str, str], stamp: Callable[[Any], int]) -> list[Any]:
    try:
        start = int(params["startTime"]) if "startTime" in params else None
        end = int(params["endTime"]) if "endTime" in params else None
    except ValueError:
        raise VenueError(-1100, "Illegal characters found in a time parameter.") from None
    return [
        r for r in rows if (start is None or stamp(r) >= start) and (end is None or stamp(r) <= end)
    ]
