"""One SQLite connection, owned by one thread: callers `await db.run(fn)` and the event loop
never waits on the disk. WAL mode with synchronous=FULL: a committed write survives a crash.

The ledger holds the account, so only its user may read it: its folder is created 0700 and the
file 0600 before SQLite opens it (SQLite gives the -wal and -shm files the database's mode),
whatever the umask; files an older version or a looser umask left readable are tightened. A
path another user could have planted is refused, as the lock files' are: a link at the ledger or
its side files, a folder of another user's or one others may write to (`private_files`).

Before anything is read, SQLite checks the file (`integrity`): a damaged ledger, or an empty
file where a ledger was, is refused with how to restore it, never traded on."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from trader.ledger.integrity import damaged_refusal, empty_refusal, is_empty, verdict_of
from trader.ledger.migrations import MIGRATIONS
from trader.private_files import UnsafePath, check_private_by_name, open_private, owned_folder

T = TypeVar("T")


class LedgerError(Exception):
    """The ledger cannot be used as it is (newer schema, unreadable file)."""


class LedgerDamaged(LedgerError):
    """The ledger's file failed SQLite's check, or is empty: refused before anything was read
    (a data error, exit 65); the message says how to restore it."""


class Statements(Protocol):
    """What a write needs of its connection: a sqlite3.Connection, or a buffer that keeps the
    statements for later (`trader.ledger.buffered`)."""

    def execute(self, sql: str, parameters: Any = (), /) -> object: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> object: ...


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """All of the block's writes, or none. The connection is in autocommit mode (so nothing
    is ever left open by accident), which is why every multi-statement write needs this."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


@contextmanager
def reading(path: Path, timeout_s: float = 5) -> Iterator[sqlite3.Connection]:
    """A connection that only reads a ledger (a daemon may be writing it), closed on leaving.
    Read-write with `query_only` where the file allows, so that the last connection to close
    removes the -wal and -shm files as a writer's does (a `mode=ro` one cannot, and leaves
    them beside the ledger); `mode=ro` where the file is read-only. sqlite3.Error else."""
    uri = path.resolve().as_uri()  # escapes '?' and '#' in a name
    try:
        connection = sqlite3.connect(f"{uri}?mode=rw", uri=True, timeout=timeout_s)
    except sqlite3.OperationalError:
        connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout_s)
    try:
        connection.execute("PRAGMA query_only = ON")
        yield connection
    finally:
        connection.close()


SIDE_FILES = ("-wal", "-shm", "-journal")


def make_private(path: Path) -> None:
    """The ledger's folder ours and closed to others (created 0700 where missing), the ledger
    (created where missing) and its side files 0600, none of them a link: UnsafePath else."""
    owned_folder(path.parent, "the ledger's folder")
    if not os.path.lexists(path):
        os.close(open_private(path))
    # Checked by name: the folder is ours and closed to others, so nobody can swap a name
    # after its check.
    for file in (path, *(path.with_name(path.name + side) for side in SIDE_FILES)):
        check_private_by_name(file)


def _connect(path: Path, durable: bool = True, new: bool = False) -> sqlite3.Connection:
    """The connection, once the file has passed its check; `new`: an empty file is the new
    ledger the user asked for (a file this call makes always is)."""
    existed = os.path.lexists(path)
    make_private(path)
    if existed and not new and is_empty(path):
        raise LedgerDamaged(empty_refusal(path))
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("PRAGMA busy_timeout=5000")  # a writer's lock is not damage
        verdict = verdict_of(connection, path)
    except BaseException:
        connection.close()
        raise
    if not verdict.ok:
        connection.close()
        raise LedgerDamaged(damaged_refusal(path, verdict))
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
    connection.execute("PRAGMA foreign_keys=ON")
    return connection


def migrate(connection: sqlite3.Connection) -> int:
    """Apply the migrations this file does not have yet; return the schema version. The
    version is read under the write lock, one migration at a time: another connection that
    migrated the file meanwhile (a replay's verdict opening the ledger while the daemon it
    stopped still finishes its own start) leaves nothing to apply twice."""
    while True:
        with transaction(connection):
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            if version > len(MIGRATIONS):
                raise LedgerError(
                    f"the ledger has schema version {version}, newer than this trader "
                    f"({len(MIGRATIONS)}): upgrade trader or point ledger.path elsewhere"
                )
            if version == len(MIGRATIONS):
                return len(MIGRATIONS)
            for statement in filter(str.strip, MIGRATIONS[version].split(";")):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {version + 1}")


class Database:
    def __init__(self, path: Path, durable: bool = True) -> None:
        self.path = path
        # False: a ledger a re-run rebuilds (a backtest's): nothing waits for the disk, and
        # the work runs on the caller's thread (a hop to the ledger's thread per write would
        # cost a backtest more than the write; nothing else waits on its loop).
        self.durable = durable
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self._connection: sqlite3.Connection | None = None

    @classmethod
    async def open(cls, path: Path, *, durable: bool = True) -> Database:
        """The ledger at `path`, made where nothing is; LedgerDamaged for a damaged or empty
        file (`new_ledger` is how a user asks for a new one there)."""
        database = cls(path, durable)
        try:
            database._connection = await database._submit(lambda: _connect(path, durable))
            await database.run(migrate)
        except LedgerDamaged:
            await database.close()
            raise
        except (sqlite3.DatabaseError, OSError, UnsafePath) as error:
            await database.close()
            raise LedgerError(f"ledger {path}: {error}") from error
        return database

    async def _submit(self, work: Callable[[], T]) -> T:
        if not self.durable:
            return work()
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def run(self, work: Callable[[sqlite3.Connection], T], *, durable: bool = True) -> T:
        """Run `work` with the connection on the ledger's thread. `durable=False` skips the
        fsync of its commits: for data that can be fetched again (bars), never for money."""
        connection = self._connection
        if connection is None:
            raise LedgerError("the ledger is closed")
        if durable or not self.durable:
            return await self._submit(lambda: work(connection))

        def relaxed() -> T:
            connection.execute("PRAGMA synchronous=NORMAL")
            try:
                return work(connection)
            finally:
                connection.execute("PRAGMA synchronous=FULL")

        return await self._submit(relaxed)

    async def write(self, work: Callable[[Statements], object], *, durable: bool = True) -> None:
        """Run `work`'s statements as one transaction (`durable` as for `run`)."""

        def transact(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                work(connection)

        await self.run(transact, durable=durable)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._submit(connection.close)
        self._executor.shutdown(wait=True)


def new_ledger(path: Path) -> None:
    """A new ledger at `path`, where there is nothing or an empty file: what the user asks for
    when `Database.open` refuses an empty file. LedgerError for a file with anything in it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and not is_empty(path):
        raise LedgerError(
            f"ledger {path} is not empty: refused; `trader ledger new` makes a ledger only "
            "where there is nothing or an empty file (move this one aside first)"
        )
    try:
        connection = _connect(path, new=True)
        try:
            migrate(connection)
        finally:
            connection.close()
    except (sqlite3.DatabaseError, OSError, UnsafePath) as error:
        raise LedgerError(f"ledger {path}: {error}") from error
