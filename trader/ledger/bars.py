"""The rolling window of recent bars per symbol, kept in the ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from trader.domain import Bar, DomainError, Timeframe, from_epoch_ms
from trader.ledger.database import Database, transaction


def _ms(bar: Bar) -> int:
    return int(bar.start.timestamp() * 1000)


class BarStore:
    def __init__(self, database: Database, keep: int, retention_days: int = 0) -> None:
        self._db = database
        self.keep = keep  # newest bars kept per symbol and timeframe, at least
        # And every bar this many days back from the newest: `trader shortfall` replays a
        # daemon's period on the bars it decided on, not only the last windows'. Days, not a
        # count, because that is how a comparison's period is asked for; bounded all the same
        # (a month of 1-minute bars is some 45,000 rows, a few MB, per symbol).
        self.retention_ms = retention_days * 86_400_000

    async def save(self, bars: Sequence[Bar]) -> None:
        """Upsert `bars` (any symbols) and keep only the newest `keep` of each series."""
        if not bars:
            return
        rows = [
            (b.symbol, b.timeframe.text, _ms(b), b.open, b.high, b.low, b.close, b.volume,
             b.quote_volume)
            for b in bars
        ]  # fmt: skip
        series = sorted({(b.symbol, b.timeframe.text) for b in bars})

        def write(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.executemany(
                    """INSERT INTO bars VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (symbol, timeframe, start_ms) DO UPDATE SET
                       open = excluded.open, high = excluded.high, low = excluded.low,
                       close = excluded.close, volume = excluded.volume,
                       quote_volume = excluded.quote_volume""",
                    rows,
                )
                # Older than both the `keep`-th newest and the retention (fewer than `keep`
                # bars: min() is NULL and nothing goes).
                connection.executemany(
                    """DELETE FROM bars WHERE symbol = ? AND timeframe = ? AND start_ms < min(
                         (SELECT start_ms FROM bars WHERE symbol = ? AND timeframe = ?
                          ORDER BY start_ms DESC LIMIT 1 OFFSET ?),
                         (SELECT max(start_ms) FROM bars WHERE symbol = ? AND timeframe = ?)
                          - ?)""",
                    [(s, tf, s, tf, self.keep - 1, s, tf, self.retention_ms) for s, tf in series],
                )

        # Bars can always be fetched again: their writes need not wait for the disk.
        await self._db.run(write, durable=False)

    async def load(self, symbol: str, timeframe: Timeframe, count: int) -> list[Bar]:
        """The newest `count` bars, oldest first. A row that no longer validates ends the
        window there: what follows it is kept, what precedes it is dropped."""

        def read(connection: sqlite3.Connection) -> list[tuple[object, ...]]:
            return connection.execute(
                """SELECT start_ms, open, high, low, close, volume, quote_volume FROM bars
                   WHERE symbol = ? AND timeframe = ? ORDER BY start_ms DESC LIMIT ?""",
                (symbol, timeframe.text, count),
            ).fetchall()

        bars: list[Bar] = []
        for start_ms, *values in await self._db.run(read):
            try:
                bars.append(Bar(symbol, timeframe, from_epoch_ms(start_ms), *values))  # type: ignore[arg-type]
            except DomainError:
                break
        bars.reverse()
        return bars
