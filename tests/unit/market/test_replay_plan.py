"""A backtest's data step works its ticks out ahead (`replay_plan`) and replays them
(`PlannedDataStep`): tick by tick it must hand the engine what the data step itself does, and
keep the same windows, counts and statuses, on data with everything wrong with it: a missing
candle, bad rows of each kind (the newest one too, and in the first fill), a market with
sessions and a lunch break, a stock on trading days, FX on weekdays beside crypto (its
quotes stale at crypto's weekend ticks), synthetic and locked quotes. Real recorded bars
(tests/data and the files `backtesting` ships)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import backtesting
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.recorded import SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.clock import SimulatedClock
from trader.config.schema import Settings
from trader.domain import Instrument, from_epoch_ms, to_epoch_ms
from trader.market.planned_step import PlannedDataStep
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.market.replay_calendars import replay_calendars
from trader.market.replay_plan import plan_replay
from trader.market.replay_plan_rows import epoch_us, ms_as_read
from trader.market.step import MarketDataStep
from trader.runner import replay_settings, spread_model, tick_times

PACKAGED = Path(backtesting.__file__).parent / "test"
CONTEXT = 48


def sol(rows: slice = slice(0, 700)) -> Recording:
    recording = read_recording(SOLUSDT_1H_2022)
    return replace(recording, rows=recording.rows[rows])


def broken(recording: Recording) -> Recording:
    """A candle removed; a NaN close; a high below its low; a negative volume; a zero price;
    a bad row among the first window's bars; the last row bad."""
    rows = list(recording.rows)
    rows[30] = (*rows[30][:4], math.nan, *rows[30][5:])  # in the first fill
    rows[200] = (*rows[200][:4], math.nan, *rows[200][5:])
    t, o, h, lo, c, v, q = rows[300]
    rows[300] = (t, o, lo * 0.99, h, c, v, q)
    rows[320] = (*rows[320][:5], -1.0, rows[320][6])
    rows[410] = (rows[410][0], 0.0, *rows[410][2:])
    t, o, h, lo, c, v, q = rows[-1]
    rows[-1] = (t, o, lo * 0.99, h, c, v, q)
    del rows[250]
    del rows[251:254]
    return replace(recording, rows=rows)


def shifted_fx(onto_ms: int, rows: slice) -> Recording:
    """The packaged EUR/USD hours moved on by whole weeks (weekdays kept) to begin near
    `onto_ms`, the first of another file's bars."""
    eurusd = read_recording(PACKAGED / "EURUSD.csv", "EUR/USDT")  # one account currency
    week = 7 * 24 * 3_600_000
    taken = eurusd.rows[rows]
    weeks = round((onto_ms - taken[0][0]) / week)
    moved = [(r[0] + weeks * week, *r[1:]) for r in taken]
    return replace(eurusd, rows=moved, naive_times=False)


async def compare(
    recordings: Mapping[str, Recording], first: int = 0, stride: int = 1, **market: object
) -> dict[str, int]:
    """Both steps over the replay's ticks from the `first`-th (a backtest's --from: the first
    window fills from the bars before it), every `stride`-th (several bars close at each);
    the skips of the planned one, by reason, and how many ticks were plain."""
    values = {"context_bars": CONTEXT, "min_contiguous_bars": 12}
    whole = replay_settings(Settings(market=values | market), recordings)
    settings, spread = whole.market, spread_model(whole)
    replay = replay_calendars(settings, recordings)
    times = tick_times(replay.recordings, CONTEXT, replay.calendars)[first::stride]
    plan = plan_replay(replay.recordings, replay.calendars, settings, spread, times)
    assert plan is not None
    clock = SimulatedClock(times[0])
    rules = Instrument(next(iter(recordings)), Decimal("0.01"), Decimal("0.001"))
    feed = ReplayMarketData(replay.recordings, clock, spread, rules)
    real = MarketDataStep(feed, settings, calendars=replay.calendars)
    planned = PlannedDataStep(feed, settings, plan, replay.calendars)
    # A quiet stretch's way: `advance` at each plain tick (without the TickData), else `run`.
    advanced = PlannedDataStep(feed, settings, plan, replay.calendars)
    await real.start(times[0])
    await planned.start(times[0])
    await advanced.start(times[0])
    plain_ticks = 0
    for at in times:
        await clock.sleep_until(at)
        index = advanced.index_of(at)
        assert index is not None
        plain = advanced.plain(index)
        bounds = plain and {
            s: advanced.windows[s].bounds_after([bar for bar, _ in tick.added]) for s, tick in plain
        }
        want, got = await real.run(at), await planned.run(at)
        assert got == want, f"tick {at}"
        if plain:
            plain_ticks += 1
            advanced.advance(index, at)
            # Plain: every symbol priced with its planned quote, nothing skipped.
            assert not want.skipped
            assert list(want.ready) == [s for s, _ in plain]
            assert {s: t.quote for s, t in plain} == {s: d.quote for s, d in want.ready.items()}
            assert bounds == {
                s: (d.bars[0], d.bars[-1], len(d.bars)) for s, d in want.ready.items()
            }
        else:
            await advanced.run(at)
        for step in (planned, advanced):
            for symbol, window in real.windows.items():
                mine = step.windows[symbol]
                assert mine.snapshot() == window.snapshot(), f"{symbol} window at {at}"
                assert (mine.contiguous, mine.hole_before) == (
                    window.contiguous, window.hole_before
                )  # fmt: skip
            assert (step.judged, step.status) == (real.judged, real.status)
            assert (step.missing, step.skips.counts) == (real.missing, real.skips.counts)
        for symbol, data in want.ready.items():  # the quotes' every value, as written too
            mine, theirs = got.ready[symbol].quote, data.quote
            assert (repr(mine), mine.mid.as_tuple(), mine.spread_bps) == (
                repr(theirs),
                theirs.mid.as_tuple(),
                theirs.spread_bps,
            )
    assert planned.missing == real.missing
    assert planned.skips.counts == real.skips.counts
    return {str(k): v for k, v in planned.skips.counts.items()} | {"(plain ticks)": plain_ticks}


def run(
    recordings: Mapping[str, Recording], first: int = 0, stride: int = 1, **market: object
) -> dict[str, int]:
    return asyncio.run(compare(recordings, first, stride, **market))


@pytest.mark.parametrize("policy", ["skip", "bridge"])
def test_crypto_with_holes_and_bad_rows_of_every_kind(policy):
    skips = run({"SOL/USDT": broken(sol())}, gap_policy=policy)
    run({"SOL/USDT": broken(sol())}, first=140, gap_policy=policy)  # a period begun later
    for reason in ("invalid_bar", "inconsistent_bar", "negative_volume", "non_positive_price"):
        assert skips[reason] >= 1, reason  # the test met each kind of bad row
    assert skips["missing_bar"] == 4
    assert skips["(plain ticks)"] > 100  # advanced at those, run at the others
    assert ("gap" in skips) == (policy == "skip")


def test_a_market_with_sessions_and_a_lunch_break():
    xshg = read_recording(XSHG_600977_5MIN, "600977/CNY")
    rows = list(xshg.rows[:600])
    del rows[300]  # a bar missing in a session
    rows[400] = (*rows[400][:4], math.nan, *rows[400][5:])
    assert run({"600977/CNY": replace(xshg, rows=rows)})["(plain ticks)"] > 100


def test_a_stock_on_trading_days_and_fx_beside_crypto():
    goog = read_recording(PACKAGED / "GOOG.csv", "GOOG/USD")
    run({"GOOG/USD": replace(goog, rows=goog.rows[:300])}, replay_spread="high_low")
    crypto = broken(sol(slice(0, 900)))
    fx = shifted_fx(crypto.rows[0][0], slice(3450, 4150))  # November 2017 onto SOL's dates
    skips = run({"SOL/USDT": crypto, "EUR/USDT": fx})
    # At crypto's weekend ticks the FX window is full, but its quote is Friday's: stale.
    assert skips["stale_quote"] > 24


def test_synthetic_locked_and_invalid_quotes():
    run({"SOL/USDT": broken(sol())}, add_latest=False)
    assert run({"SOL/USDT": sol(slice(0, 200))}, replay_spread_bps=0.0)["crossed_quote"] > 0
    # A spread of 100% or more: a bid of zero or below.
    assert run({"SOL/USDT": sol(slice(0, 120))}, replay_spread_bps=2e4)["invalid_quote"] > 0


@pytest.mark.parametrize("first", [0, 1, 2])
def test_several_bars_closing_at_one_tick(first):
    """Every third tick: three rows judged at once, a bad one among them or the newest (the
    offsets put each bad row of `broken` in each place), holes inside a tick's rows."""
    skips = run({"SOL/USDT": broken(sol())}, first=first, stride=3)
    assert skips["missing_bar"] == 4
    assert skips["(plain ticks)"] > 100  # advanced at those, run at the others
    xshg = read_recording(XSHG_600977_5MIN, "600977/CNY")
    rows = list(xshg.rows[:400])
    del rows[300]
    rows[301] = (*rows[301][:4], math.nan, *rows[301][5:])  # a hole, then a bad row
    run({"600977/CNY": replace(xshg, rows=rows)}, first=first, stride=5)  # over lunch too


@given(st.integers(-(10**15), 4 * 10**15))
def test_times_in_bulk_are_read_as_one_by_one(us):
    """The walk's times in bulk: a datetime's epoch microseconds, and `to_epoch_ms` of it
    (through a float timestamp: a whole millisecond can read as the one before)."""
    at = from_epoch_ms(0) + timedelta(microseconds=us)
    assert epoch_us(at) == us
    assert ms_as_read(np.array([us], dtype=np.int64)).tolist() == [to_epoch_ms(at)]
    whole = us // 1000 * 1000  # a bar's start or end
    assert ms_as_read(np.array([whole])).tolist() == [to_epoch_ms(from_epoch_ms(whole // 1000))]
