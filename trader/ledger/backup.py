"""An online backup of the ledger: SQLite's backup API copies every page in one step, inside one
read transaction, so the copy is the ledger as one commit left it, while the daemon goes on
writing (WAL mode: a reader never blocks the writer, nor the writer the reader).

The copy is written to a private temporary file beside the destination (0600 in a folder of
ours that others cannot write to), switched to a rollback journal so that it is one
self-contained file, checked with `PRAGMA integrity_check`, flushed to the disk and only then
renamed onto the destination: a backup at DEST is always whole and checked. Restoring is
README's "Backups and restore" (`integrity.restore_steps`).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from trader.ledger.database import LedgerError, make_private
from trader.ledger.integrity import verdict_of
from trader.private_files import UnsafePath, open_private, owned_folder


class BackupFailed(Exception):
    """The backup could not be written where asked (a destination problem, not the ledger's)."""


@dataclass(frozen=True)
class Backup:
    path: Path
    pages: int
    size: int
    last_tick: str | None  # the last tick the copy holds: where a daemon started on it resumes

    def line(self, ledger: Path) -> str:
        after = self.last_tick or "no tick yet"
        return (
            f"backup of {ledger} written to {self.path}: {self.pages} pages, {self.size} bytes, "
            f"integrity_check ok, last tick {after}"
        )


def destination(
    ledger: Path, dest: Path, folder: bool = False, now: datetime | None = None
) -> Path:
    """`dest`, or in a folder `dest` (one there, or `folder`: one to make) a file named after
    the ledger and the time (UTC)."""
    if not (folder or dest.is_dir()):
        return dest
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return dest / f"{ledger.stem}-{stamp}{ledger.suffix or '.sqlite3'}"


def backup(ledger: Path, dest: Path, *, folder: bool = False) -> Backup:
    """Copy the ledger at `ledger` to `dest` (a file, or a folder to put one in; `folder`: it
    is one, made where missing), online. LedgerError when the ledger is missing, unsafe or
    damaged; BackupFailed when `dest` is."""
    target = destination(ledger, dest, folder)
    source = _open_source(ledger)
    try:
        if _same_file(ledger, target):
            raise BackupFailed(f"{target} is the ledger itself: give another destination")
        partial = _partial(target)
        try:
            copy = _copy(source, partial, ledger)
            _flush(partial)
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    finally:
        source.close()
    _flush(target.parent)
    return Backup(target, copy.pages, target.stat().st_size, copy.last_tick)


def _open_source(ledger: Path) -> sqlite3.Connection:
    if not os.path.lexists(ledger):
        raise LedgerError(f"no ledger at {ledger}")
    try:
        make_private(ledger)  # the checks of every open: no links, our folder, 0600
    except UnsafePath as error:
        raise LedgerError(f"ledger {ledger}: {error}") from None
    uri = f"file:{quote(str(ledger.resolve()))}?mode=rw"  # never creates one
    try:
        connection = sqlite3.connect(uri, uri=True, isolation_level=None)
        connection.execute("PRAGMA busy_timeout=10000")
    except sqlite3.Error as error:
        raise LedgerError(f"ledger {ledger}: {error}") from None
    return connection


def _same_file(ledger: Path, target: Path) -> bool:
    try:
        return os.path.samefile(ledger, target)
    except OSError:  # nothing there yet, or a path through a file: said when written
        return False


def _partial(target: Path) -> Path:
    """A new private file beside `target`, for the copy until it is whole and checked."""
    try:
        owned_folder(target.parent, "the backup's folder")
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        partial.unlink(missing_ok=True)  # a link or a leftover of a killed run: never followed
        os.close(open_private(partial))
    except (UnsafePath, OSError) as error:
        raise BackupFailed(f"cannot write the backup at {target}: {error}") from None
    return partial


@dataclass(frozen=True)
class _Copied:
    pages: int
    last_tick: str | None


def _copy(source: sqlite3.Connection, partial: Path, ledger: Path) -> _Copied:
    copy = sqlite3.connect(partial, isolation_level=None)
    try:
        try:
            source.backup(copy)  # every page in one step: one consistent snapshot
        except sqlite3.DatabaseError as error:
            raise LedgerError(f"ledger {ledger} could not be read for a backup: {error}") from None
        copy.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
        verdict = verdict_of(copy, partial, full=True)
        if not verdict.ok:
            raise LedgerError(
                f"the backup of {ledger} fails integrity_check ({'; '.join(verdict.problems[:5])})"
                f": the ledger itself is likely damaged; no backup was written"
            )
        (pages,) = copy.execute("PRAGMA page_count").fetchone()
        last = copy.execute("SELECT max(at) FROM ticks").fetchone() if _has_ticks(copy) else None
        return _Copied(int(pages), last[0] if last else None)
    finally:
        copy.close()


def _has_ticks(connection: sqlite3.Connection) -> bool:
    found = connection.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'ticks'"
    ).fetchone()
    return found is not None


def _flush(path: Path) -> None:
    """The file's bytes (or a folder's new name) on the disk before anyone relies on them."""
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
