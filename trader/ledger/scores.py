"""Forecast scores in the ledger: which recorded forecasts still wait for their horizon to
close, each score written once (the key is the forecast's symbol, model and origin, so a
restart that scores a forecast again writes nothing), and the latest scores per model and
symbol, from which a restarted daemon rebuilds its rolling skill window.

Scores written before the naive reference was probabilistic (their sums have no
`skill_no_change`: their `skill` and `naive` are against the no-change point forecast) stay in
the ledger and in the counts, but never rebuild a window: mixed in, they would flatter it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from trader.domain import Forecast, Timeframe
from trader.ledger.codec import parse_time, time_text
from trader.ledger.database import Database, transaction
from trader.ledger.forecast_rows import read_forecast

Sums = Mapping[str, Sequence[float]]
# A figure only scores made against the probabilistic naive reference carry.
REFERENCE_MARK = "skill_no_change"


@dataclass(frozen=True)
class ScoreRow:
    symbol: str
    model: str
    as_of: datetime
    scored_at: datetime
    steps: int
    outcome: str  # "scored", or why it could not be
    sums: Sums  # figure -> (numerator, denominator); empty when not scored
    naive: Sums


def _json(sums: Sums) -> str:
    return json.dumps({k: list(v) for k, v in sums.items()}, separators=(",", ":"))


class ScoreStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def pending(self, since: datetime, timeframe: Timeframe) -> list[Forecast]:
        """Forecasts made at or after `since` that have no score yet, oldest first (a tick
        re-run after a crash recorded the same forecast again: it counts once)."""

        def read(c: sqlite3.Connection) -> list[Forecast]:
            rows = c.execute(
                "SELECT symbol, model, as_of, steps, fields, levels, quantiles, mean "
                "FROM forecasts f WHERE as_of >= ? AND NOT EXISTS (SELECT 1 FROM "
                "forecast_scores s WHERE s.symbol = f.symbol AND s.model = f.model AND "
                "s.as_of = f.as_of) GROUP BY symbol, model, as_of ORDER BY as_of",
                (time_text(since),),
            ).fetchall()
            return [read_forecast(row, timeframe) for row in rows]

        return await self._db.run(read)

    async def record(self, rows: Sequence[ScoreRow]) -> list[bool]:
        """Write the scores in one transaction; for each, whether it was new."""

        def write(c: sqlite3.Connection) -> list[bool]:
            added = []
            with transaction(c):
                for r in rows:
                    cursor = c.execute(
                        "INSERT OR IGNORE INTO forecast_scores VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (r.symbol, r.model, time_text(r.as_of), time_text(r.scored_at), r.steps,
                         r.outcome, _json(r.sums), _json(r.naive)),
                    )  # fmt: skip
                    added.append(cursor.rowcount == 1)
            return added

        return await self._db.run(write) if rows else []

    async def latest(self, window: int, outcome: str) -> list[ScoreRow]:
        """The last `window` forecasts of each model and symbol with `outcome` (scored) and
        scored against the probabilistic naive reference, oldest first."""

        def read(c: sqlite3.Connection) -> list[ScoreRow]:
            rows = c.execute(
                "SELECT symbol, model, as_of, scored_at, steps, outcome, sums, naive FROM ("
                "SELECT *, row_number() OVER (PARTITION BY symbol, model ORDER BY as_of DESC) "
                "AS n FROM forecast_scores WHERE outcome = ? AND json_type(sums, ?) IS NOT NULL) "
                "WHERE n <= ? ORDER BY as_of",
                (outcome, f"$.{REFERENCE_MARK}", window),
            ).fetchall()
            return [
                ScoreRow(s, m, parse_time(a), parse_time(t), steps, o, json.loads(x),
                         json.loads(y))
                for s, m, a, t, steps, o, x, y in rows
            ]  # fmt: skip

        return await self._db.run(read)

    async def counts(self) -> dict[tuple[str, str, str], int]:
        """Scores kept so far by (model, symbol, outcome): counters resume from them."""

        def read(c: sqlite3.Connection) -> dict[tuple[str, str, str], int]:
            rows = c.execute(
                "SELECT model, symbol, outcome, count(*) FROM forecast_scores "
                "GROUP BY model, symbol, outcome"
            ).fetchall()
            return {(m, s, o): n for m, s, o, n in rows}

        return await self._db.run(read)
