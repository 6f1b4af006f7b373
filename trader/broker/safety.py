"""Live trading's guards: the instance locks and the capital cap (the explicit opt-ins are the
settings' own: `config.strict.config_refusal`).

"Another running instance holds a symbol" means: a live process on this host holds the
lock of (venue, account, symbol) in `broker.lock_dir`, or holds this ledger. Both are
`flock` locks on small files: the kernel drops them when the process ends however it ends
(SIGKILL included), so a crash never leaves a stale lock and a running daemon can never be
overtaken. The account is named by an HMAC of the API key keyed with the lock folder's own
random salt (made once, 0600), so a lock's name says nothing about the key, not even to
someone who guesses keys. The lock folder must be this user's and closed to others (0700
when the daemon makes it), and a lock file is opened without following a symbolic link:
a planted link, hard link or FIFO, or another user's file, is refused, never written through.
Daemons on different hosts sharing one account cannot see each other's locks; reconciliation
catches that case instead (orders and trades the ledger does not know, balances that moved:
trading halts).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import IO

from trader.config.schema import Settings
from trader.domain import decimal_from_float
from trader.private_files import UnsafePath, open_private, owned_folder, private_folder


class StartRefused(Exception):
    """Live trading must not start; the message says why and what to do."""


def account_name(settings: Settings) -> str:
    """A short, stable name of the account behind the API key: an HMAC of the key keyed with
    the lock folder's salt, so the same on every daemon that shares the folder and telling
    nothing about the key."""
    key = settings.exchange.api_key
    text = key.get_secret_value() if key is not None else ""
    salt = _salt(settings.broker.lock_dir)
    return hmac.new(salt, text.encode(), hashlib.sha256).hexdigest()[:12]


SALT_FILE = "account-salt"
SALT_CHARS = 64


def _salt(lock_dir: Path) -> bytes:
    """The lock folder's salt, made on first use (by whichever daemon comes first)."""
    try:
        owned_folder(lock_dir, "broker.lock_dir")
    except UnsafePath as error:
        raise StartRefused(str(error)) from None
    path = lock_dir / SALT_FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:
        return _read_salt(path)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(descriptor, 0o600)
        handle.write(secrets.token_hex(SALT_CHARS // 2))
        handle.flush()
        os.fsync(descriptor)
    return _read_salt(path)


def _read_salt(path: Path) -> bytes:
    # Another daemon may have made the file a moment ago and still be writing it.
    for _ in range(100):
        try:
            with os.fdopen(open_private(path, create=False)) as handle:
                text = handle.read()
        except UnsafePath as error:
            raise StartRefused(f"the lock folder's salt: {error}") from None
        if len(text) == SALT_CHARS:
            return text.encode()
        time.sleep(0.01)
    raise StartRefused(
        f"{path} is not a salt of {SALT_CHARS} characters: stop every daemon that uses this "
        "lock folder, then delete it (it is made again)"
    )


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
        private_folder(path.parent)
        try:
            handle = os.fdopen(open_private(path), "r+")
        except UnsafePath as error:
            raise StartRefused(f"the lock of {what}: {error}") from None
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
    name = f"{settings.exchange.id}-{account_name(settings)}-{safe}.lock"
    return settings.broker.lock_dir / name


def ledger_lock_path(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + ".lock")


def ledger_holder(ledger: Path) -> str | None:
    """Who holds `ledger` now, or None when nobody does (checked without keeping a lock)."""
    path = ledger_lock_path(ledger)
    try:
        handle = os.fdopen(open_private(path, create=False), "r+")
    except FileNotFoundError:
        return None
    except UnsafePath as error:
        return f"nobody it can name: {error}"
    with handle:
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
            what = f"{symbol} on {settings.exchange.id} (account {account_name(settings)})"
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
