"""What the settings refuse beyond the schema: a `.env` line that cannot be parsed, a secret
with control characters or of an unlikely length, and live trading without every explicit
opt-in or with exchange keys written into a config file (secrets in config files are noted
even where another source overrides them). Problems name the setting and where it was found,
never the value."""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from dotenv.parser import parse_stream

from trader.config.fields import KeyPath, leaves
from trader.config.schema import Settings

# No key, secret or token of any venue comes near this; a longer value is a wrong file.
MAX_SECRET_CHARS = 4096
# Controls (C0, DEL, C1 such as U+0085), formats (zero-width, byte-order mark, bidi marks) and
# the line and paragraph separators U+2028/U+2029: each splits or hides a value in some tool.
CONTROLS = frozenset({"Cc", "Cf", "Zl", "Zp"})


def dotenv_problems(path: Path, text: str) -> list[str]:
    """The lines of a `.env` file that cannot be parsed (python-dotenv would drop them with a
    warning and go on without them), by number: the line itself may hold a secret."""
    return [
        f".env file {path}: line {binding.original.line} cannot be parsed "
        "(expected NAME=value; quote values with spaces or '#')"
        for binding in parse_stream(io.StringIO(text))
        if binding.error
    ]


def secret_problem(text: str) -> str | None:
    """Why `text` cannot be a secret, or None."""
    if len(text) > MAX_SECRET_CHARS:
        return f"is longer than {MAX_SECRET_CHARS} characters"
    if any(unicodedata.category(c) in CONTROLS for c in text):
        return "has control characters (a newline, a tab, an escape, a Unicode line separator)"
    return None


def secret_problems(values: Mapping[KeyPath, tuple[object, object]]) -> list[str]:
    """Every secret setting in `values` whose value cannot be one, named with its origin."""
    problems = []
    for path, (value, origin) in values.items():
        leaf = leaves().get(path)
        if leaf is None or not leaf.is_secret or not isinstance(value, str):
            continue
        problem = secret_problem(value)
        if problem is not None:
            problems.append(f"{leaf.key} (from {origin}) {problem}: refused")
    return problems


def secrets_in(values: Mapping[KeyPath, tuple[object, object]], where: str) -> dict[str, str]:
    """The secret settings a config file sets, by key: noted even when another source
    overrides them, since the file still holds the secret."""
    return {
        leaf.key: where
        for path in values
        if (leaf := leaves().get(path)) is not None and leaf.is_secret
    }


def secrets_in_files_warning(found: Mapping[str, str]) -> list[str]:
    """`config check`'s warning lines for secrets written into config files."""
    return [
        f"warning: {key} is set in config file {where}: keep secrets in the secrets directory "
        "or the environment (live trading refuses exchange keys in a config file)"
        for key, where in sorted(found.items())
    ]


def config_refusal(
    settings: Settings, origins: Mapping[str, object], in_files: Mapping[str, str] = {}
) -> str | None:
    """Why the settings forbid live trading (every reason at once), or None. Three explicit
    opt-ins: the mode, the confirmation, and keys that come from the secrets directory or the
    environment; an exchange key written in a config file is refused even where another
    source overrides it (`in_files`: the loader's `secrets_in_files`). On Alpaca, its live
    environment (`exchange.alpaca.paper = false`, the seed's PAPER=0) never enables live
    trading by itself, and orders to its paper account need the opt-ins too: they leave this
    process."""
    exchange, broker = settings.exchange, settings.broker
    alpaca = exchange.venue == "alpaca"
    opted_in = broker.mode == "live" and broker.live_confirmation
    reasons = []
    if alpaca and not exchange.alpaca.paper and not opted_in:
        reasons.append(
            "exchange.alpaca.paper = false (PAPER=0) picks Alpaca's live environment, which "
            "trades real money: that needs broker.mode = live and broker.live_confirmation = "
            "true as well; PAPER=0 alone never enables live trading (PAPER=1: the paper account)"
        )
    if broker.mode != "live":
        return "; ".join(reasons) or None
    if not broker.live_confirmation:
        reasons.append(
            "broker.mode = live needs broker.live_confirmation = true as well: live trading "
            "spends real money, so it is never switched on by one setting"
            + (" (on Alpaca's paper account too: the orders leave this process)" if alpaca else "")
        )
    if alpaca:
        keys: tuple[str, ...] = exchange.alpaca.key_names()
    else:
        keys = ("exchange.api_key", "exchange.api_secret", "exchange.api_password")
        missing = [
            f"exchange.{name}"
            for name, value in (("api_key", exchange.api_key), ("api_secret", exchange.api_secret))
            if value is None
        ]
        if missing:
            reasons.append(
                f"broker.mode = live needs {' and '.join(missing)}, from the secrets directory "
                "(TRADER_EXCHANGE__API_KEY, TRADER_EXCHANGE__API_SECRET files) or the environment"
            )
    written = {key: f"file {where}" for key, where in in_files.items()}
    for key in keys:
        origin = written.get(key) or str(origins.get(key, ""))
        if origin.startswith("file"):
            reasons.append(
                f"{key} is in a config file ({origin}): keep keys out of config files, even "
                "where another source overrides them; put them in the secrets directory or "
                "the environment"
            )
    return "; ".join(reasons) or None
