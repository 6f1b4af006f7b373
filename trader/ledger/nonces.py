"""The nonces of signed operator commands, kept in the ledger for as long as their command could
pass the freshness check: a captured command replayed after a restart is refused like one
replayed a second later. Older nonces are deleted as new ones arrive."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Literal

from trader.ledger.codec import time_text
from trader.ledger.database import Database, transaction

Claim = Literal["new", "used", "full"]


def _text(unix_seconds: float) -> str:
    return time_text(datetime.fromtimestamp(unix_seconds, UTC))


class CommandNonces:
    def __init__(self, database: Database, limit: int) -> None:
        self.database = database
        self.limit = limit  # nonces kept at most: beyond, commands are refused until some expire

    async def claim(self, nonce: str, command: str, *, now: float, fresh_until: float) -> Claim:
        """Record `nonce` until `fresh_until` (Unix seconds), in one transaction with the
        check: "new", "used" when it is recorded already, "full" at the limit."""

        def work(connection: sqlite3.Connection) -> Claim:
            with transaction(connection):
                connection.execute(
                    "DELETE FROM command_nonces WHERE fresh_until < ?", (_text(now),)
                )
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

    async def count(self) -> int:
        """How many nonces are kept now."""
        return int(
            await self.database.run(
                lambda c: c.execute("SELECT count(*) FROM command_nonces").fetchone()[0]
            )
        )
