"""Whether a ledger file can be trusted, asked of SQLite before anything is read from it.

`PRAGMA integrity_check` reads every page and checks every index against its table;
`quick_check` skips the index contents and UNIQUE constraints, at about half the time. Measured
on a replay's ledger of tests/data/SOLUSDT_1h.csv.gz (3,489 hourly ticks, 21 MB): quick_check
14 ms, integrity_check 24 ms; the same ledger grown to 56,000 ticks (90 MB): 115 ms and 250 ms
(warm page cache, two shared cores). So the full check runs up to `FULL_CHECK_BYTES` (about
0.7 s) and the quick one above, where a start-up would otherwise wait seconds.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

FULL_CHECK_BYTES = 256 * 2**20
SHOWN = 5  # problems said in the refusal; SQLite lists up to 20
# What SQLite calls a file it cannot read as a database (any other error, "database is
# locked" say, is not damage and is left to the caller).
DAMAGE = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}


@dataclass(frozen=True)
class Verdict:
    check: str  # the PRAGMA that was run
    problems: tuple[str, ...]  # empty when the file passed

    @property
    def ok(self) -> bool:
        return not self.problems


def verdict_of(connection: sqlite3.Connection, path: Path, full: bool | None = None) -> Verdict:
    """What `path`'s own check finds, open on `connection` (nothing read from it before);
    `full`: integrity_check (True) or quick_check (False), by the file's size when None."""
    if full is None:
        full = _size(path) <= FULL_CHECK_BYTES
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = connection.execute(f"PRAGMA {pragma}(20)").fetchall()
    except sqlite3.DatabaseError as error:
        if getattr(error, "sqlite_errorname", None) not in DAMAGE:
            raise
        return Verdict(pragma, (str(error),))
    found = tuple(str(row[0]).replace("\n", " ") for row in rows)
    return Verdict(pragma, () if found == ("ok",) else found)


def _size(path: Path) -> int:
    """The file and its write-ahead log, whose pages the check reads too."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def restore_steps(path: Path) -> str:
    """How to put a backup in place of the ledger at `path` (README: Backups and restore)."""
    return (
        f"to restore: stop every process using it; move {path} and its {path.name}-wal and "
        f"{path.name}-shm aside together (keep them: the -wal may hold the latest commits, and "
        f"sqlite3's `.recover` can save rows from a damaged file); copy the latest backup (made by "
        f"`trader ledger backup {path} DEST` while the daemon runs) to {path}; start again"
    )


def damaged_refusal(path: Path, verdict: Verdict) -> str:
    """The refusal of a ledger that failed its check: where, what, and how to restore."""
    shown = "; ".join(verdict.problems[:SHOWN])
    more = len(verdict.problems) - SHOWN
    if more > 0:
        shown += f"; and {more} more"
    return (
        f"ledger {path} is damaged (PRAGMA {verdict.check}: {shown}): refused before anything "
        f"was read from it; {restore_steps(path)}"
    )


def unreadable_refusal(path: Path, error: Exception) -> str:
    """The refusal of a ledger whose pages are sound but a value in them cannot be read (a
    byte flipped inside a stored JSON document passes SQLite's own check)."""
    return (
        f"ledger {path} holds a value that cannot be read ({type(error).__name__}: {error}): "
        f"refused before trading on it; {restore_steps(path)}"
    )


def empty_refusal(path: Path) -> str:
    """The refusal of a 0-byte ledger: a ledger lost to a full disk or a bad copy looks so too."""
    return (
        f"ledger {path} is an empty file (0 bytes): refused, since a ledger that a full disk or "
        f"a bad copy emptied looks the same and trading would start a new account on it; "
        f"{restore_steps(path)}; or, to start a new ledger there, `trader ledger new {path}`"
    )


def is_empty(path: Path) -> bool:
    """A 0-byte file with no write-ahead log that could hold its pages."""
    wal = path.with_name(path.name + "-wal")
    return os.path.getsize(path) == 0 and not (wal.exists() and wal.stat().st_size > 0)
