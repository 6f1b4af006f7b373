"""The daemon's starts and stops, each with the settings it ran with (`config.record`): a
restart with changed settings adds a settings row, one with the same settings only a run.
A run without a stop was killed (or is running): `trader shortfall` says so. And the ticks
its loop ran late or missed."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trader.ledger.codec import optional_time, parse_time, time_text
from trader.ledger.database import Database, transaction

ONE_US = timedelta(microseconds=1)


@dataclass(frozen=True)
class DaemonRun:
    id: int
    began_by: str  # "start", or "reload" (new settings while running)
    started_at: datetime  # on the venue's clock (a replay's simulated one)
    wall_started_at: datetime
    stopped_at: datetime | None  # None: killed, or still running
    settings_digest: str
    version: str
    broker: str  # paper or live
    venue: str  # replay, or the exchange (ccxt:binance, alpaca)


async def record_start(
    database: Database,
    *,
    settings_text: str,
    digest: str,
    started_at: datetime,
    wall_started_at: datetime,
    version: str,
    broker: str,
    venue: str,
) -> int:
    """The new run's id, its settings kept once per digest."""

    def write(c: sqlite3.Connection) -> int:
        with transaction(c):
            return _insert(c, "start", settings_text, digest, started_at, wall_started_at,
                           version, broker, venue)  # fmt: skip

    return await database.run(write)


def _insert(c: sqlite3.Connection, began_by: str, text: str, digest: str, *rest: Any) -> int:
    started_at, wall_started_at, version, broker, venue = rest
    c.execute("INSERT OR IGNORE INTO run_settings VALUES (?, ?)", (digest, text))
    cursor = c.execute(
        "INSERT INTO daemon_runs (began_by, started_at, wall_started_at, stopped_at, "
        "settings_digest, version, broker, venue) VALUES (?, ?, ?, NULL, ?, ?, ?, ?)",
        (began_by, time_text(started_at), time_text(wall_started_at), digest, version, broker,
         venue),
    )  # fmt: skip
    return int(cursor.lastrowid or 0)


async def record_reload(
    database: Database, *, settings_text: str, digest: str, at: datetime, wall: datetime
) -> int | None:
    """New settings in force while running: the latest run ends and a run with them (its
    version, broker and venue) begins, from just after the last tick booked (a reload runs
    between ticks, under the tick lock: the next tick is the first with them, whatever the
    clock said meanwhile), or from `at` before any tick. None when no run is recorded."""

    def write(c: sqlite3.Connection) -> int | None:
        with transaction(c):
            latest = c.execute(
                "SELECT id, version, broker, venue FROM daemon_runs ORDER BY id DESC LIMIT 1"
            ).fetchone()
            if latest is None:
                return None
            run_id, version, broker, venue = latest
            (last,) = c.execute("SELECT max(at) FROM ticks").fetchone()
            begins = parse_time(last) + ONE_US if last is not None else at
            c.execute(
                "UPDATE daemon_runs SET stopped_at = ? WHERE id = ?", (time_text(begins), run_id)
            )
            return _insert(c, "reload", settings_text, digest, begins, wall, version, broker,
                           venue)  # fmt: skip

    return await database.run(write)


async def record_stop(database: Database, at: datetime) -> None:
    """The latest run (this daemon's: one daemon holds a ledger) ends at `at`."""
    await database.run(
        lambda c: c.execute(
            "UPDATE daemon_runs SET stopped_at = ? WHERE id = (SELECT max(id) FROM daemon_runs)",
            (time_text(at),),
        )
    )


def read_runs(c: sqlite3.Connection) -> list[DaemonRun]:
    rows: list[tuple[Any, ...]] = c.execute(
        "SELECT id, began_by, started_at, wall_started_at, stopped_at, settings_digest, "
        "version, broker, venue FROM daemon_runs ORDER BY id"
    ).fetchall()
    return [
        DaemonRun(i, by, parse_time(s), parse_time(w), optional_time(e), d, v, b, n)
        for i, by, s, w, e, d, v, b, n in rows
    ]


def read_settings(c: sqlite3.Connection) -> dict[str, str]:
    """Each recorded settings text, by digest."""
    return {str(d): str(t) for d, t in c.execute("SELECT digest, settings FROM run_settings")}


@dataclass(frozen=True)
class LateTick:
    at: datetime  # the tick's bar close
    lateness_s: float
    missed: bool  # later than the misfire grace: not run at all


async def record_late(database: Database, late: Sequence[LateTick]) -> None:
    """Late and missed ticks; not forced to disk (a lost row costs no money)."""
    rows = [(time_text(t.at), t.lateness_s, int(t.missed)) for t in late]
    if rows:
        await database.write(
            lambda c: c.executemany("INSERT OR REPLACE INTO late_ticks VALUES (?, ?, ?)", rows),
            durable=False,
        )


def read_late(c: sqlite3.Connection) -> list[LateTick]:
    return [
        LateTick(parse_time(at), float(s), bool(m))
        for at, s, m in c.execute("SELECT at, lateness_s, missed FROM late_ticks ORDER BY at")
    ]
