"""What the ledger keeps for `trader shortfall` (real SQLite): the bars of a stated number of
days beyond the windows' own, and each daemon start with the settings it ran with, secrets
left out, read back as the same settings."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from tests.integration.emulated import recorded_bars
from trader.config.record import (
    differences,
    recorded_settings,
    settings_digest,
    settings_from_record,
    settings_text,
)
from trader.config.schema import Settings
from trader.domain import Timeframe
from trader.ledger import BarStore, Database
from trader.ledger.codec import time_text
from trader.ledger.runs import (
    LateTick,
    read_late,
    read_runs,
    read_settings,
    record_late,
    record_reload,
    record_start,
    record_stop,
)

pytestmark = pytest.mark.integration
TF = Timeframe("1h")


async def test_bars_are_kept_for_the_retention_in_days_and_no_longer(tmp_path):
    bars = recorded_bars(300)  # hourly: 12.5 days
    database = await Database.open(tmp_path / "ledger.sqlite3")
    store = BarStore(database, keep=100, retention_days=5)
    for start in range(0, 300, 30):  # a tick's worth at a time, as the daemon saves them
        await store.save(bars[start : start + 30])
    loaded = await store.load("SOL/USDT", TF, 1000)
    await database.close()
    # The newest bar and the 5 days (120 hours) before it: more than the 100 kept anyway.
    assert loaded == bars[300 - 121 :]


async def test_the_windows_keep_wins_over_a_shorter_retention(tmp_path):
    bars = recorded_bars(300)
    database = await Database.open(tmp_path / "ledger.sqlite3")
    store = BarStore(database, keep=100, retention_days=1)
    await store.save(bars)
    loaded = await store.load("SOL/USDT", TF, 1000)
    await database.close()
    assert loaded == bars[200:]


def _with_secrets() -> Settings:
    return Settings.model_validate(
        {
            "exchange": {
                "api_key": SecretStr("k-123456789"),
                "api_secret": SecretStr("s-98765"),
                "api_base_url": "http://127.0.0.1:8999",  # a sandbox's shifted clock needs it
                "clock": {
                    "origin": "2024-01-02T14:30:00+00:00",
                    "wall_origin": "2026-11-29T02:00:00+00:00",
                    "speed": 60,
                },
            },
            "broker": {"taker_fee_bps": "7.5"},
            "market": {"symbols": ["ETH/USDT", "SOL/USDT"], "calendars": {"ETH/USDT": "XNYS"}},
        }
    )


def test_recorded_settings_leave_the_secrets_out_and_read_back_the_same():
    settings = _with_secrets()
    text = settings_text(recorded_settings(settings))
    assert "k-123456789" not in text
    assert "s-98765" not in text
    assert "exchange.api_key" not in json.loads(text)
    again = settings_from_record(json.loads(text))
    assert again.exchange.api_key is None  # absent, not ten stars
    assert again.model_copy(update={"exchange": settings.exchange}) == settings
    assert settings_digest(settings_text(recorded_settings(again))) == settings_digest(text)


def test_differences_name_each_changed_setting():
    recorded = recorded_settings(Settings())
    changed = recorded | {"broker.taker_fee_bps": "40", "strategy.name": "simple"}
    assert differences(recorded, changed) == [
        ("broker.taker_fee_bps", recorded["broker.taker_fee_bps"], "40"),
        ("strategy.name", recorded["strategy.name"], "simple"),
    ]


async def test_each_start_is_a_run_and_each_settings_a_row_once(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    first = settings_text(recorded_settings(Settings()))
    other = settings_text(recorded_settings(_with_secrets()))
    at = datetime(2024, 1, 31, 12, tzinfo=UTC)
    ids = []
    for i, text in enumerate((first, first, other)):
        ids.append(
            await record_start(
                database, settings_text=text, digest=settings_digest(text),
                started_at=at + timedelta(hours=i), wall_started_at=at, version="1.2.3",
                broker="paper", venue="ccxt:binance",
            )
        )  # fmt: skip
        await record_stop(database, at + timedelta(hours=i, minutes=30))  # the latest run's
    runs = await database.run(read_runs)
    stored = await database.run(read_settings)
    await database.close()
    assert [r.id for r in runs] == ids
    assert [r.stopped_at for r in runs] == [at + timedelta(hours=i, minutes=30) for i in range(3)]
    assert {r.began_by for r in runs} == {"start"}
    assert [r.settings_digest for r in runs] == [
        settings_digest(first), settings_digest(first), settings_digest(other),
    ]  # fmt: skip
    assert stored == {settings_digest(first): first, settings_digest(other): other}
    assert {(r.version, r.broker, r.venue) for r in runs} == {("1.2.3", "paper", "ccxt:binance")}


async def test_late_and_missed_ticks_are_kept_with_how_late(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    at = datetime(2024, 1, 31, 12, tzinfo=UTC)
    late = [LateTick(at, 2.5, False), LateTick(at + timedelta(hours=1), 4000.0, True)]
    await record_late(database, late)
    await record_late(database, [])  # nothing to write is no write
    assert await database.run(read_late) == late
    await database.close()


async def test_a_reload_ends_the_run_and_begins_one_with_the_new_settings(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    before = settings_text(recorded_settings(Settings()))
    after = settings_text(
        recorded_settings(Settings.model_validate({"risk": {"max_order_notional": "500"}}))
    )
    at = datetime(2024, 1, 31, 12, tzinfo=UTC)
    assert await record_reload(database, settings_text=after, digest="x", at=at, wall=at) is None
    first = await record_start(
        database, settings_text=before, digest=settings_digest(before), started_at=at,
        wall_started_at=at, version="1.2.3", broker="live", venue="alpaca",
    )  # fmt: skip
    later = at + timedelta(hours=5)
    tick = later - timedelta(minutes=30)  # the last tick booked before the reload
    await database.run(
        lambda c: c.execute(
            "INSERT INTO ticks VALUES (?, ?, 'ok', 1, '{}', '{}')", (time_text(tick),) * 2
        )
    )
    second = await record_reload(
        database, settings_text=after, digest=settings_digest(after), at=later, wall=later
    )
    await record_stop(database, later + timedelta(hours=1))
    runs = await database.run(read_runs)
    await database.close()
    # The new settings are in force from the tick after the last one booked: whatever the
    # clock said when the reload came, no tick ran between.
    begins = tick + timedelta(microseconds=1)
    assert [(r.id, r.began_by, r.started_at, r.stopped_at) for r in runs] == [
        (first, "start", at, begins),
        (second, "reload", begins, later + timedelta(hours=1)),
    ]
    assert runs[1].settings_digest == settings_digest(after)
    assert (runs[1].version, runs[1].broker, runs[1].venue) == ("1.2.3", "live", "alpaca")
