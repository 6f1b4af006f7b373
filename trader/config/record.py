"""Settings as the ledger records them at each daemon start: every setting by its dotted key,
secrets left out (not masked: a masked value would read back as a password of ten stars),
with a digest, and read back into `Settings` for a replay of what the daemon did."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic_core import to_jsonable_python

from trader.config.fields import leaves
from trader.config.schema import Settings


def _plain(value: Any) -> Any:
    """JSON values that read back as the setting was: decimals as exact text, the rest
    (times, paths, dates) as pydantic writes them."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return to_jsonable_python(value)


def recorded_settings(settings: Settings) -> dict[str, Any]:
    """Every setting but the secrets, by dotted key."""
    return {
        leaf.key: _plain(leaf.read(settings)) for leaf in leaves().values() if not leaf.is_secret
    }


def settings_text(recorded: Mapping[str, Any]) -> str:
    """The canonical text of recorded settings: keys sorted, no spaces (the digest's input)."""
    return json.dumps(dict(recorded), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def settings_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def settings_from_record(recorded: Mapping[str, Any]) -> Settings:
    """The settings a record describes (secrets absent: their defaults). Keys this version
    does not know are dropped, as a newer daemon's may be; ValueError for values it refuses."""
    known = {leaf.key for leaf in leaves().values() if not leaf.is_secret}
    nested: dict[str, Any] = {}
    for key, value in recorded.items():
        if key not in known:
            continue
        *sections, name = key.split(".")
        table = nested
        for section in sections:
            table = table.setdefault(section, {})
        table[name] = value
    return Settings.model_validate(nested)


def differences(
    recorded: Mapping[str, Any], other: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(key, recorded value, other value) for each setting that differs, by key."""
    keys = sorted(set(recorded) | set(other))
    return [(k, recorded.get(k), other.get(k)) for k in keys if recorded.get(k) != other.get(k)]
