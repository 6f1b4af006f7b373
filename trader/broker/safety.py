"""Live trading's guards: the explicit opt-ins, the instance locks, the capital cap.

"Another running instance holds a symbol" means: a live process on this host holds the
lock of (venue, account, symbol) in `broker.lock_dir`, or holds this ledger. Both are
`flock` locks on small files: the kernel drops them when the process ends however it ends
(SIGKILL included), so a crash never leaves a stale lock and a running daemon can never be
overtaken. The account is named by a short hash of the API key, never the key itself.
Daemons on different hosts sharing one account cannot see each other's locks; reconciliation
catches that case instead (orders and trades the ledger does not know, balances that moved:
trading halts).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import IO

from trader.config.schema import Settings
from trader.domain import decimal_from_float


class StartRefused(Exception):
    """Live trading must not start; the message says why and what to do."""


def config_refusal(settings: Settings, origins: Mapping[str, object]) -> str | None:
    """Why the settings forbid live trading, or None. Three explicit opt-ins: the mode, the
    confirmation, and keys that come from the secrets directory or the environment."""
    alpaca = alpaca_refusal(settings, origins)
    if alpaca is not None or settings.exchange.venue == "alpaca":
        return alpaca
    if settings.broker.mode != "live":
        return None
    if not settings.broker.live_confirmation:
        return (
            "broker.mode = live needs broker.live_confirmation = true as well: live trading "
            "spends real money, so it is never switched on by one setting"
        )
    if settings.exchange.api_key is None or settings.exchange.api_secret is None:
        return (
            "broker.mode = live needs exchange.api_key and exchange.api_secret, from the "
            "secrets directory (TRADER_EXCHANGE__API_KEY, TRADER_EXCHANGE__API_SECRET files) "
            "or the environment"
        )
    return _keys_in_a_file(("exchange.api_key", "exchange.api_secret"), origins)


def alpaca_refusal(settings: Settings, origins: Mapping[str, object]) -> str | None:
    """Alpaca's opt-ins: its live environment (`exchange.alpaca.paper = false`, the seed's
    PAPER=0) only with broker.mode = live and the confirmation, never by itself; orders on
    its paper account with broker.mode = live and the confirmation too (they leave this
    process); and keys of the chosen environment from the secrets directory or the
    environment, never a config file."""
    exchange, broker = settings.exchange, settings.broker
    if exchange.venue != "alpaca":
        return None
    alpaca = exchange.alpaca
    if not alpaca.paper and not (broker.mode == "live" and broker.live_confirmation):
        return (
            "exchange.alpaca.paper = false (PAPER=0) picks Alpaca's live environment, which "
            "trades real money: that needs broker.mode = live and broker.live_confirmation = "
            "true as well; PAPER=0 alone never enables live trading (PAPER=1: the paper account)"
        )
    if broker.mode != "live":
        return None
    if not broker.live_confirmation:
        return (
            "broker.mode = live sends orders to Alpaca and needs broker.live_confirmation = "
            "true as well (on the paper account too: the orders leave this process)"
        )
    return _keys_in_a_file(alpaca.key_names(), origins)


def _keys_in_a_file(keys: Iterable[str], origins: Mapping[str, object]) -> str | None:
    for key in keys:
        origin = str(origins.get(key, ""))
        if origin.startswith("file"):
            return (
                f"{key} comes from the config file ({origin}): keep keys out of config files, "
                "put them in the secrets directory or the environment"
            )
    return None


def account_name(settings: Settings) -> str:
    """A short, stable name of the account behind the API key (a hash, not the key)."""
    exchange = settings.exchange
    key = exchange.alpaca.credentials()[0] if exchange.venue == "alpaca" else exchange.api_key
    text = key.get_secret_value() if key is not None else ""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    return (
        f"instance {info.get('instance', '?')!r} (pid {info.get('pid', '?')} on "
        f"{info.get('host', '?')}, ledger {info.get('ledger', '?')}, since "
        f"{info.get('since', '?')})"
    )


@dataclass
class InstanceLocks:
    """flock locks held for as long as this object lives (or until `release`)."""

    files: list[IO[str]] = field(default_factory=list)

    def take(self, path: Path, what: str, holder: dict[str, object]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StartRefused(
                f"{what} is held by {_holder(path)}: stop that daemon first, or trade "
                "something else"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(holder))
        handle.flush()
        self.files.append(handle)

    def release(self) -> None:
        for handle in self.files:
            handle.close()  # closing the file drops its lock
        self.files.clear()


def lock_path(settings: Settings, symbol: str) -> Path:
    safe = symbol.replace("/", "_").replace(":", "_")
    name = f"{settings.exchange.name}-{account_name(settings)}-{safe}.lock"
    return settings.broker.lock_dir / name


def ledger_lock_path(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + ".lock")


def ledger_holder(ledger: Path) -> str | None:
    """Who holds `ledger` now, or None when nobody does (checked without keeping a lock)."""
    path = ledger_lock_path(ledger)
    if not path.exists():
        return None
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(path)
    return None


def take_live_locks(settings: Settings, symbols: Iterable[str], now: datetime) -> InstanceLocks:
    """The ledger's lock and one per symbol; StartRefused naming the holder of any taken."""
    holder: dict[str, object] = {
        "instance": settings.instance,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "ledger": str(settings.ledger.path.resolve()),
        "since": now.isoformat(),
    }
    locks = InstanceLocks()
    try:
        locks.take(ledger_lock_path(settings.ledger.path), f"ledger {settings.ledger.path}", holder)
        for symbol in symbols:
            what = f"{symbol} on {settings.exchange.name} (account {account_name(settings)})"
            locks.take(lock_path(settings, symbol), what, holder)
    except BaseException:
        locks.release()
        raise
    return locks


def trading_capital(settings: Settings, cash_balance: Decimal) -> Decimal:
    """What the daemon may trade with: a share of the venue's cash balance when the ledger's
    account is opened, at most `capital_limit`, whatever the balance (to the cent below)."""
    share = cash_balance * decimal_from_float(settings.broker.capital_share)
    limit = settings.broker.capital_limit
    capital = min(share, limit) if limit is not None else share
    return capital.quantize(Decimal("0.01"), ROUND_DOWN)
