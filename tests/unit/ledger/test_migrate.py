"""Two connections migrating one ledger at once (a replay's verdict opening the ledger while
the daemon it stopped still finishes its start-up): each migration is applied once, and the
second connection finds the file current instead of failing on "duplicate column name"."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from trader.ledger.database import migrate
from trader.ledger.migrations import MIGRATIONS


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA busy_timeout=10000")
    connection.execute("PRAGMA journal_mode=WAL")
    return connection


def test_a_second_connection_waiting_on_the_first_finds_the_ledger_migrated(tmp_path: Path):
    path = tmp_path / "ledger.db"
    first, second = _connect(path), _connect(path)
    first.execute("BEGIN IMMEDIATE")  # the first is mid-migration: it holds the write lock
    outcome: list[object] = []

    def migrate_second() -> None:
        try:
            outcome.append(migrate(second))
        except Exception as error:  # what the test reports, not a crash of the thread
            outcome.append(error)

    thread = threading.Thread(target=migrate_second)
    thread.start()
    time.sleep(0.5)  # the second has looked at the file and waits for the lock
    for script in MIGRATIONS:
        for statement in filter(str.strip, script.split(";")):
            first.execute(statement)
    first.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
    first.execute("COMMIT")
    thread.join(timeout=30)
    assert outcome == [len(MIGRATIONS)]
    assert second.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)


def test_migrating_a_new_ledger_applies_every_migration_and_a_second_call_none(tmp_path: Path):
    connection = _connect(tmp_path / "ledger.db")
    assert migrate(connection) == len(MIGRATIONS)
    tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    assert migrate(connection) == len(MIGRATIONS)
    assert connection.execute("SELECT count(*) FROM sqlite_master").fetchone() == tables
