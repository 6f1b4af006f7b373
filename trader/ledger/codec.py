"""How domain values are written to SQLite: exact decimals as text, UTC times of one width."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _quoted

from trader.domain import ensure_utc

_WIDTH = len("2024-01-31T12:00:00.000000Z")
# json.dumps builds an encoder per call when given options: one of each, made once.
COMPACT = json.JSONEncoder(separators=(",", ":"))
SORTED = json.JSONEncoder(sort_keys=True)


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


def compact_json(values: Mapping[str, object]) -> str:
    """`COMPACT.encode(values)`. A tick's few words and finite numbers (a decision's inputs)
    are written at once, as json writes them: its set-up for each call costs more than the
    text. Anything else goes to json."""
    parts = []
    for key, value in values.items():
        if type(key) is not str:
            return COMPACT.encode(dict(values))
        if type(value) is str:
            parts.append(f"{_quoted(key)}:{_quoted(value)}")
        elif type(value) is int or (type(value) is float and math.isfinite(value)):
            parts.append(f"{_quoted(key)}:{value!r}")
        else:
            return COMPACT.encode(dict(values))
    return "{" + ",".join(parts) + "}"


def sorted_seconds_json(seconds: Mapping[str, float]) -> str:
    """A tick's stage timings (plain names, finite seconds) as JSON, by name, each to the
    microsecond: finer is noise, and the shortest exact text of a float costs twice as much."""
    return "{" + ", ".join([f"{_quoted(k)}: {seconds[k]:.6f}" for k in sorted(seconds)]) + "}"
