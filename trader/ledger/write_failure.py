"""A write the disk refused, told apart from every other error: a full disk (SQLite's "database or
disk is full", ENOSPC, EDQUOT, EFBIG), a failing one ("disk I/O error", EIO) or one that has
become read-only (EROFS, "attempt to write a readonly database"). Such a failure changes nothing
in the ledger (its transaction rolls back) and says nothing about the money: the engine halts
until a write succeeds again, where any other error is a bug to be logged with its traceback."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trader.ledger.database import LedgerError

# SQLite's primary result codes for a write the file or the disk refused (sqlite3.h).
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL = 8, 10, 13
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


class LedgerWriteFailed(LedgerError):
    """The ledger's disk refused a write; the message says which ledger and why. One argument,
    so that it crosses from a backtest's worker process whole."""


def write_failure(error: BaseException) -> str | None:
    """Why the disk refused the write that raised `error` (or what caused it), else None."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, LedgerWriteFailed):
            return str(seen).rpartition("cannot be written: ")[2] or str(seen)
        if isinstance(seen, sqlite3.Error):
            code = getattr(seen, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL):
                return str(seen)
        elif isinstance(seen, OSError) and seen.errno in _DISK_ERRNOS:
            return os.strerror(seen.errno)
        seen = seen.__cause__
    return None


def cannot_write(path: Path, reason: str) -> LedgerWriteFailed:
    return LedgerWriteFailed(f"the ledger {path} cannot be written: {reason}")


@contextmanager
def refused_writes(path: Path) -> Iterator[None]:
    """A write the disk refuses inside the block comes out as `LedgerWriteFailed`."""
    try:
        yield
    except (sqlite3.Error, OSError) as error:
        reason = write_failure(error)
        if reason is None:
            raise
        raise cannot_write(path, reason) from error
