"""The replay source reads the recordings exactly and serves them as time passes, no sooner."""

from __future__ import annotations

import csv
import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.recorded import SOLUSD_15M, SOLUSDT_1H, SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.clock import SimulatedClock
from trader.config.market_settings import MarketSettings
from trader.domain import QuoteSource, Timeframe, from_epoch_ms
from trader.market.hygiene import parse_row
from trader.market.quotes import FixedSpread
from trader.market.replay import (
    RecordingsRequestError,
    ReplayDataError,
    ReplayMarketData,
    read_recording,
    read_recordings,
    symbol_from_name,
)
from trader.market.step import MarketDataStep

FILES = {
    SOLUSDT_1H: ("SOL/USDT", "1h", "timestamps", "amount"),
    SOLUSDT_1H_2022: ("SOL/USDT", "1h", "timestamps", "amount"),
    SOLUSD_15M: ("SOL/USD", "15m", "datetime", None),
    XSHG_600977_5MIN: ("600977/CNY", "5m", "timestamps", "amount"),
}


def text_rows(path: Path, time_column: str, quote_column: str | None) -> list[tuple]:
    """The oracle: Python's csv module and float(), independent of pyarrow."""
    with gzip.open(path, "rt", newline="") as handle:
        return [
            (
                int(datetime.fromisoformat(r[time_column]).replace(tzinfo=UTC).timestamp() * 1000),
                *(float(r[k]) for k in ("open", "high", "low", "close", "volume")),
                float(r[quote_column]) if quote_column else None,
            )
            for r in csv.DictReader(handle)
        ]


@pytest.mark.parametrize("path", sorted(FILES), ids=lambda path: path.name)
def test_every_recording_is_reproduced_exactly(path):
    symbol, timeframe, time_column, quote_column = FILES[path]
    recording = read_recording(path, None if path.name.startswith("SOL") else symbol)
    assert recording.symbol == symbol
    assert recording.timeframe == Timeframe(timeframe)
    expected = text_rows(path, time_column, quote_column)
    assert len(recording.rows) == len(expected)
    assert recording.rows == expected  # exact float equality, every field of every row


def test_the_recorded_bars_are_valid_bars():
    for path, (symbol, *_rest) in FILES.items():
        recording = read_recording(path, symbol)
        bars = [parse_row(row, symbol, recording.timeframe) for row in recording.rows]
        assert all(not isinstance(bar, str) for bar in bars), path.name


def test_a_symbol_is_read_from_the_file_name_or_must_be_given(tmp_path):
    assert symbol_from_name(Path("SOLUSDT_1h.csv")) == "SOL/USDT"
    assert symbol_from_name(Path("btcusd-15m.parquet")) == "BTC/USD"
    assert symbol_from_name(Path("XSHG_600977_5min.csv")) is None
    path = tmp_path / "XSHG_600977_5min.csv"
    path.write_text("timestamps,open,high,low,close,volume\n2024-01-01 00:00:00,1,1,1,1,1\n")
    with pytest.raises(ReplayDataError, match="cannot tell the symbol"):
        read_recording(path)


def test_files_and_symbols_pair_up_one_file_per_symbol(tmp_path):
    row = "timestamps,open,high,low,close,volume\n" + "".join(
        f"2024-01-01 0{h}:00:00,1,1,1,1,1\n" for h in range(3)
    )
    a, b = tmp_path / "SOLUSDT_1h.csv", tmp_path / "sol-usdt-copy_1h.csv"
    a.write_text(row)
    b.write_text(row)
    assert [r.symbol for r in read_recordings([a, b], ["SOL/USDT", "BTC/USDT"])] == [
        "SOL/USDT",
        "BTC/USDT",
    ]
    with pytest.raises(RecordingsRequestError, match="one symbol per file"):
        read_recordings([a, b], ["SOL/USDT"])
    with pytest.raises(RecordingsRequestError, match="more than one file for SOL/USDT"):
        read_recordings([a, a])
    with pytest.raises(RecordingsRequestError, match="more than one file for ETH/USDT"):
        read_recordings([a, b], ["ETH/USDT", "ETH/USDT"])


def test_epoch_milliseconds_and_other_spellings_are_read(tmp_path):
    path = tmp_path / "ETHUSDT_1m.csv"
    path.write_text(
        "open_time,Open,High,Low,Close,Volume,quote_volume\n"
        "1700000040000,10,11,9,10.5,3,31.5\n1700000100000,10.5,11,10,10.75,2,21.5\n"
    )
    recording = read_recording(path)
    assert recording.timeframe == Timeframe("1m")
    assert recording.rows[0] == (1700000040000, 10.0, 11.0, 9.0, 10.5, 3.0, 31.5)


def test_parquet_with_utc_timestamps_is_read(tmp_path):
    path = tmp_path / "SOLUSDT_1h.parquet"
    starts = [datetime(2024, 1, 1, h, tzinfo=UTC) for h in range(3)]
    table = pa.table(
        {
            "timestamp": pa.array(starts, pa.timestamp("ms", tz="UTC")),
            "open": [1.0, 2.0, 3.0], "high": [2.0, 3.0, 4.0], "low": [0.5, 1.5, 2.5],
            "close": [2.0, 3.0, 3.5], "volume": [1.0, 1.0, 1.0],
        }
    )  # fmt: skip
    pq.write_table(table, path)
    recording = read_recording(path)
    assert [from_epoch_ms(row[0]) for row in recording.rows] == starts
    assert recording.rows[2][4] == 3.5
    assert recording.rows[0][6] is None


def test_a_recording_without_its_columns_is_refused(tmp_path):
    path = tmp_path / "SOLUSDT_1h.csv"
    path.write_text("when,open,high,low,close,volume\n2024-01-01,1,1,1,1,1\n")
    with pytest.raises(ReplayDataError, match="no column among timestamps"):
        read_recording(path)


async def test_replay_serves_bars_only_once_they_have_opened():
    recording = read_recording(SOLUSDT_1H)
    start = from_epoch_ms(recording.rows[100][0])
    clock = SimulatedClock(start + timedelta(minutes=30))
    feed = ReplayMarketData({"SOL/USDT": recording}, clock, FixedSpread(4))
    rows = await feed.ohlcv("SOL/USDT", recording.timeframe, None, 10)
    assert rows[-1] == recording.rows[100]  # the forming bar, as an exchange shows it
    later = await feed.ohlcv("SOL/USDT", recording.timeframe, start - timedelta(hours=2), 1000)
    assert later == recording.rows[98:101]
    quotes = await feed.top_of_book(["SOL/USDT"])
    quote = quotes["SOL/USDT"]
    assert quote.source is QuoteSource.MODELLED
    assert quote.exchange_time == start  # the last closed bar's end
    with pytest.raises(ReplayDataError, match="holds 1h bars"):
        await feed.ohlcv("SOL/USDT", Timeframe("4h"), None, 10)


async def test_the_data_step_on_replay_never_looks_ahead():
    recording = read_recording(SOLUSDT_1H)
    context = 64
    first = from_epoch_ms(recording.rows[context][0])
    clock = SimulatedClock(first)
    feed = ReplayMarketData({"SOL/USDT": recording}, clock, FixedSpread(4))
    settings = MarketSettings(symbols=["SOL/USDT"], context_bars=context)
    step = MarketDataStep(feed, settings)
    await step.start(clock.now())
    for i in range(context, context + 200):
        tick = from_epoch_ms(recording.rows[i][0])  # bar i-1 has just closed
        await clock.sleep_until(tick)
        data = await step.run(clock.now())
        assert data.skipped == {}
        bars = data.ready["SOL/USDT"].bars
        assert len(bars) == context
        assert bars[-1].end == tick
        assert all(bar.end <= tick for bar in bars)
        assert [b.close for b in bars] == [row[4] for row in recording.rows[i - context : i]]
        assert data.ready["SOL/USDT"].quote.at == tick
    assert not step.skips.counts


def test_a_simulated_clock_runs_forward_only():
    clock = SimulatedClock(datetime(2024, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="forward"):
        clock.advance_to(datetime(2023, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="positive"):
        SimulatedClock(datetime(2024, 1, 1, tzinfo=UTC), speed=0)


async def test_a_simulated_clock_can_run_at_a_multiple_of_real_time(monkeypatch):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("trader.clock.asyncio.sleep", sleep)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    clock = SimulatedClock(start, speed=3600)
    await clock.sleep_until(start + timedelta(hours=2))
    assert slept == [2.0]  # two simulated hours in two real seconds
    assert clock.now() == start + timedelta(hours=2)
    fast = SimulatedClock(start)
    await fast.sleep_until(start + timedelta(days=30))
    assert fast.now() == start + timedelta(days=30)
