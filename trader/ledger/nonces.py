"""The nonces of signed operator commands, kept in the ledger for as long as their command could
pass the freshness check: a captured command replayed after a restart is refused like one
replayed a second later.

Their window is measured on a clock that cannot go back: the latest time a command was admitted
at, kept in the ledger with them. Nonces expire by it, and a command whose window closed before
it is stale whatever the wall clock says now. Without it, a clock stepped ahead (expiring every
nonce on the next command) and then back would reopen a captured command's window. The cost: a
command signed on a clock that had jumped ahead holds later commands off until the real time
catches up with it (the refusal says until when)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Literal

from trader.ledger.codec import parse_time, time_text
from trader.ledger.database import Database, transaction

Claim = Literal["new", "used", "full", "stale"]


def _text(unix_seconds: float) -> str:
    return time_text(datetime.fromtimestamp(unix_seconds, UTC))


class CommandNonces:
    def __init__(self, database: Database, limit: int) -> None:
        self.database = database
        self.limit = limit  # nonces kept at most: beyond, commands are refused until some expire

    async def claim(self, nonce: str, command: str, *, now: float, fresh_until: float) -> Claim:
        """Record `nonce` until `fresh_until` (Unix seconds), in one transaction with the
        check: "new", "used" when it is recorded already, "full" at the limit, "stale" when
        its window closed before the latest time a command was admitted at."""

        def work(connection: sqlite3.Connection) -> Claim:
            with transaction(connection):
                row = connection.execute("SELECT latest FROM command_clock").fetchone()
                latest = max(_text(now), row[0]) if row is not None else _text(now)
                connection.execute(
                    "INSERT INTO command_clock VALUES (1, ?) "
                    "ON CONFLICT (id) DO UPDATE SET latest = excluded.latest",
                    (latest,),
                )
                if _text(fresh_until) < latest:
                    return "stale"
                connection.execute("DELETE FROM command_nonces WHERE fresh_until < ?", (latest,))
                seen = connection.execute(
                    "SELECT 1 FROM command_nonces WHERE nonce = ?", (nonce,)
                ).fetchone()
                if seen is not None:
                    return "used"
                (count,) = connection.execute("SELECT count(*) FROM command_nonces").fetchone()
                if count >= self.limit:
                    return "full"
                connection.execute(
                    "INSERT INTO command_nonces VALUES (?, ?, ?, ?)",
                    (nonce, command, _text(now), _text(fresh_until)),
                )
                return "new"

        return await self.database.run(work)

    async def latest(self) -> datetime | None:
        """The latest time a command was admitted at, if any was."""
        row = await self.database.run(
            lambda c: c.execute("SELECT latest FROM command_clock").fetchone()
        )
        return None if row is None else parse_time(row[0])

    async def count(self) -> int:
        """How many nonces are kept now."""
        return int(
            await self.database.run(
                lambda c: c.execute("SELECT count(*) FROM command_nonces").fetchone()[0]
            )
        )
