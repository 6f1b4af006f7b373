"""A ledger a backtest writes once: the same statements as the daemon's ledger, kept in memory
and written to the file in one transaction when something reads it or it closes.

A backtest's ledger is rebuilt by running it again, so nothing in it needs to wait for the
disk tick by tick (the daemon's own ledger commits every tick durably; see `database`). The
file ends up with the same schema (every migration applied) and the same rows as if each
tick had been committed as it ended: each kind of statement runs in the order it was made.
Statements of different kinds run grouped by kind, which is the same because the ledger's
statements of different tables never read each other's rows (only the foreign keys of order
events and fills name orders, and a tick writes its orders before their events and fills).
Of the statements that keep one row per key in place (the market cursor, the trading
state, an order's upsert: `trading.LATEST_ONLY`) only each key's last write is kept, at the
place of its first.
A write the file refuses (a bug, or a full disk) therefore shows when it is written, not at
the tick that made it: the run then fails as a whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from trader.ledger.database import Database, LedgerError, Statements, transaction
from trader.ledger.trading import LATEST_ONLY
from trader.ledger.write_failure import cannot_write, refused_writes, write_failure

T = TypeVar("T")


class StatementBuffer:
    """Statements and their parameters, grouped by statement in the order first made.
    `latest_only`: statements that keep one row per key (their function of the parameters),
    updated in place, whose earlier writes of a key the last one makes moot."""

    def __init__(
        self, latest_only: Mapping[str, Callable[[Sequence[Any]], object]] | None = None
    ) -> None:
        self.groups: dict[str, list[Any] | dict[object, Any]] = {}
        self._keys = dict(latest_only or {})

    def execute(self, sql: str, parameters: Any = (), /) -> None:
        self.executemany(sql, (parameters,))

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> None:
        group = self.groups.get(sql)
        if group is None:
            group = self.groups[sql] = {} if sql in self._keys else []
        if isinstance(group, list):
            group.extend(parameters)
        else:
            key = self._keys[sql]
            for row in parameters:
                group[key(row)] = row  # a key keeps its first place, takes the last row

    def write_to(self, connection: sqlite3.Connection) -> None:
        """Every statement kept, in one transaction; the buffer is then empty."""
        if not self.groups:
            return
        with transaction(connection):
            for sql, rows in self.groups.items():
                connection.executemany(sql, rows if isinstance(rows, list) else rows.values())
        self.groups = {}


class BufferedDatabase(Database):
    """`Database` whose writes wait in memory until something reads the ledger (`run`) or it
    closes. Never durable: it is a backtest's."""

    def __init__(self, path: Path, durable: bool = False) -> None:
        super().__init__(path, durable=False)
        self.pending = StatementBuffer(LATEST_ONLY)

    @classmethod
    async def open(cls, path: Path, *, durable: bool = False) -> Database:
        """As `Database.open`; a new ledger the disk has no room for is `LedgerWriteFailed`."""
        try:
            return await super().open(path, durable=durable)
        except LedgerError as error:
            reason = write_failure(error)
            if reason is None:
                raise
            raise cannot_write(path, reason) from error

    async def write(self, work: Callable[[Statements], object], *, durable: bool = True) -> None:
        work(self.pending)

    async def run(self, work: Callable[[sqlite3.Connection], T], *, durable: bool = True) -> T:
        await super().run(self._write_pending)
        return await super().run(work)

    async def close(self) -> None:
        try:
            if self._connection is not None:
                await super().run(self._write_pending)
        finally:  # closed even when the disk refused the rows (the run fails with that)
            await super().close()

    def _write_pending(self, connection: sqlite3.Connection) -> None:
        """The statements kept, with the rollback journal in memory while they are written:
        the whole run's rows go straight into the file instead of through the write-ahead log
        and again into the file (a failed write still rolls back; the run then fails, with
        `LedgerWriteFailed` where the disk refused it). Written once: a refused buffer is
        dropped, not tried again at close."""
        if not self.pending.groups:
            return
        with refused_writes(self.path):
            connection.execute("PRAGMA journal_mode=MEMORY")
            try:
                self.pending.write_to(connection)
            finally:
                self.pending.groups = {}
                connection.execute("PRAGMA journal_mode=WAL")  # the ledger's own, as it was
