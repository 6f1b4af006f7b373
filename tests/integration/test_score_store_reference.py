"""A ledger kept before the naive reference was probabilistic: its scores (whose `skill` is
against the no-change point) stay counted, but never rebuild a rolling skill window, where
they would flatter it. The real SQLite ledger, migrated as the daemon opens it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from trader.ledger.database import Database
from trader.ledger.scores import ScoreRow, ScoreStore
from trader.skill.live import SCORED

pytestmark = pytest.mark.integration

T0 = datetime(2024, 1, 1, tzinfo=UTC)
# A score as the daemon wrote it before: figures against the no-change point only.
OLD = {"crps": [0.02, 1.0], "crps_naive": [0.025, 1.0], "skill": [0.02, 0.025]}
NEW = OLD | {"crps_naive": [0.02, 1.0], "skill": [0.02, 0.02], "crps_no_change": [0.025, 1.0],
             "skill_no_change": [0.02, 0.025]}  # fmt: skip


def row(hour: int, sums: dict[str, list[float]]) -> ScoreRow:
    at = T0 + timedelta(hours=hour)
    return ScoreRow("SOL/USDT", "toto", at, at + timedelta(hours=1), 1, SCORED, sums, sums)


def test_scores_against_the_point_forecast_rebuild_no_window(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[ScoreRow], dict[tuple[str, str, str], int]]:
        database = await Database.open(tmp_path / "ledger.sqlite3")
        store = ScoreStore(database)
        try:
            written = await store.record([row(0, OLD), row(1, OLD), row(2, NEW), row(3, NEW)])
            assert written == [True] * 4
            return await store.latest(3, SCORED), await store.counts()
        finally:
            await database.close()

    latest, counts = asyncio.run(scenario())
    assert [r.as_of for r in latest] == [T0 + timedelta(hours=2), T0 + timedelta(hours=3)]
    assert all("skill_no_change" in r.sums for r in latest)
    assert counts == {("toto", "SOL/USDT", SCORED): 4}  # every score still counted
