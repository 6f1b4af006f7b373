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

A long run's statements go to the file while it runs: every `CHUNK_ROWS` rows are handed to a
writer process (`writer.WriterProcess`), which writes them on another core, chunk after chunk,
each chunk grouped as above. The rows and their order per table are the same as one
transaction's: a row that keeps one row per key is written again in a later chunk, in place.
What is left at the end is written here, once the writer has written all it was sent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from trader.ledger.database import Database, LedgerError, Statements, transaction
from trader.ledger.trading import LATEST_ONLY
from trader.ledger.writer import Chunk, WriterFailed, WriterProcess

T = TypeVar("T")

# Rows handed to the writer process at a time: a few megabytes, a few dozen chunks for a long
# run, each small beside the run (tests make it small, so that the writer writes their runs).
CHUNK_ROWS = 20_000


class StatementBuffer:
    """Statements and their parameters, grouped by statement in the order first made.
    `latest_only`: statements that keep one row per key (their function of the parameters),
    updated in place, whose earlier writes of a key the last one makes moot."""

    def __init__(
        self, latest_only: Mapping[str, Callable[[Sequence[Any]], object]] | None = None
    ) -> None:
        self.groups: dict[str, list[Any] | dict[object, Any]] = {}
        self._keys = dict(latest_only or {})
        self.rows = 0  # kept, of every statement

    def execute(self, sql: str, parameters: Any = (), /) -> None:
        self.executemany(sql, (parameters,))

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> None:
        group = self.groups.get(sql)
        if group is None:
            group = self.groups[sql] = {} if sql in self._keys else []
        before = len(group)
        if isinstance(group, list):
            group.extend(parameters)
        else:
            key = self._keys[sql]
            for row in parameters:
                group[key(row)] = row  # a key keeps its first place, takes the last row
        self.rows += len(group) - before

    def take(self) -> Chunk:
        """Every statement kept, with its rows, in the order to run them; the buffer is then
        empty."""
        chunk = [
            (sql, rows if isinstance(rows, list) else list(rows.values()))
            for sql, rows in self.groups.items()
        ]
        self.groups, self.rows = {}, 0
        return chunk

    def write_to(self, connection: sqlite3.Connection) -> None:
        """Every statement kept, in one transaction; the buffer is then empty."""
        if not self.groups:
            return
        with transaction(connection):
            for sql, rows in self.take():
                connection.executemany(sql, rows)


class BufferedDatabase(Database):
    """`Database` whose writes wait in memory until something reads the ledger (`run`) or it
    closes. Never durable: it is a backtest's."""

    def __init__(self, path: Path, durable: bool = False) -> None:
        super().__init__(path, durable=False)
        self.pending = StatementBuffer(LATEST_ONLY)
        self._writer: WriterProcess | None = None  # started by the first full chunk

    async def write(self, work: Callable[[Statements], object], *, durable: bool = True) -> None:
        work(self.pending)
        if self.pending.rows >= CHUNK_ROWS:
            if self._writer is None:
                self._writer = WriterProcess(str(self.path))
            self._writer.send(self.pending.take())

    async def run(self, work: Callable[[sqlite3.Connection], T], *, durable: bool = True) -> T:
        await super().run(self._write_pending)
        return await super().run(work)

    async def close(self) -> None:
        try:
            if self._connection is not None:
                await super().run(self._write_pending)
        finally:
            if self._writer is not None:  # the run failed before its ledger was written
                self._writer.stop()
                self._writer = None
            await super().close()

    def _write_pending(self, connection: sqlite3.Connection) -> None:
        """What the writer was sent, then the statements still kept, with the rollback
        journal in memory while they are written: the rows go straight into the file instead
        of through the write-ahead log and again into the file (a failed write still rolls
        back; the run then fails)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.finish()
            except WriterFailed as error:
                raise LedgerError(f"ledger {self.path}: {error}") from None
        if not self.pending.groups:
            return
        connection.execute("PRAGMA journal_mode=MEMORY")
        try:
            self.pending.write_to(connection)
        finally:
            connection.execute("PRAGMA journal_mode=WAL")  # the ledger's own, as it was
