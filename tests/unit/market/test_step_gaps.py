"""The data step on data with holes in it: a candle the venue dropped, a bar with a NaN or a
high below its low, a market with sessions. Each is counted and worked around, never a wall,
and no tick re-reads what an earlier tick judged. Real recorded bars (tests/data), changed
here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import pytest

from tests.recorded import SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.clock import SimulatedClock
from trader.config.market_settings import MarketSettings
from trader.domain import Timeframe, from_epoch_ms
from trader.market.hygiene import Row, SkipReason
from trader.market.quotes import FixedSpread
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.market.replay_calendars import replay_calendars
from trader.market.step import MarketDataStep

CONTEXT = 64


def sol() -> Recording:
    return read_recording(SOLUSDT_1H_2022)


class CountingFeed(ReplayMarketData):
    """The replay source, counting the rows each call hands back."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rows_served = 0
        self.calls = 0

    async def ohlcv(
        self, symbol: str, timeframe: Timeframe, since: datetime | None, limit: int
    ) -> list[Row]:
        rows = await super().ohlcv(symbol, timeframe, since, limit)
        self.calls += 1
        self.rows_served += len(rows)
        return rows


async def walk(
    recording: Recording, settings: MarketSettings, ticks: Sequence[int]
) -> tuple[MarketDataStep, CountingFeed, list[dict[str, SkipReason]], list[tuple[int, int]]]:
    """The step over `ticks` (bar closes, epoch ms): what each tick skipped, and the rows and
    calls each tick cost."""
    replay = replay_calendars(settings, {recording.symbol: recording})
    recording = replay.recordings[recording.symbol]
    clock = SimulatedClock(from_epoch_ms(ticks[0]))
    feed = CountingFeed({recording.symbol: recording}, clock, FixedSpread(4))
    step = MarketDataStep(feed, settings, calendars=replay.calendars)
    await step.start(clock.now())
    skipped, costs = [], []
    for tick in ticks:
        await clock.sleep_until(from_epoch_ms(tick))
        rows, calls = feed.rows_served, feed.calls
        data = await step.run(clock.now())
        skipped.append(dict(data.skipped))
        costs.append((feed.rows_served - rows, feed.calls - calls))
    return step, feed, skipped, costs


def ends(recording: Recording) -> list[int]:
    step = recording.timeframe.seconds * 1000
    return [row[0] + step for row in recording.rows]


def settings(**overrides: object) -> MarketSettings:
    values = {"symbols": ["SOL/USDT"], "context_bars": CONTEXT, "min_contiguous_bars": 16}
    return MarketSettings(**(values | overrides))


@pytest.mark.parametrize("policy", ["skip", "bridge"])
async def test_a_dropped_candle_is_counted_and_the_symbol_trades_again(policy):
    full = sol()
    hole = 300
    recording = replace(full, rows=full.rows[:hole] + full.rows[hole + 1 :])
    # Ticks at every hour the market had, the dropped one's close included.
    ticks = ends(full)[CONTEXT:340]
    step, _, skipped, costs = await walk(recording, settings(gap_policy=policy), ticks)
    at = {tick: s.get("SOL/USDT") for tick, s in zip(ticks, skipped, strict=True)}
    dropped_close = ends(full)[hole]
    assert at[dropped_close] is SkipReason.STALE_BARS  # the bar that should have closed is absent
    after = [at[t] for t in ticks if t > dropped_close]
    if policy == "skip":
        # The next bar brings the hole to light; 16 bars in a row later the symbol trades.
        assert after[:15] == [SkipReason.GAP] * 15
        assert after[15:] == [None] * (len(after) - 15)
    else:
        assert after == [None] * len(after)
    assert [t for t in ticks if at[t] is not None and t < dropped_close] == []
    assert step.missing["SOL/USDT"] == 1
    assert step.skips.counts[SkipReason.MISSING_BAR] == 1
    # The window closes the hole up: it holds the bars there were, in order.
    last = 340 - 2  # `recording`'s row of the bar closing at the last tick
    expected = recording.rows[last - CONTEXT + 1 : last + 1]
    window = step.windows["SOL/USDT"].snapshot()
    assert [b.start for b in window] == [from_epoch_ms(row[0]) for row in expected]
    # Cost per tick, the first fill aside: one call for the bar that closed (and the one
    # forming), however long ago the hole was; one more call, once, to ask for the hole again.
    steady = costs[1:]
    assert set(steady[:100]) == set(steady[-20:]) == {(2, 1)}
    assert sum(calls for _, calls in steady) == len(steady) + 1


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (lambda row: (*row[:4], math.nan, *row[5:]), SkipReason.INVALID_BAR),
        (
            lambda row: (row[0], row[1], row[3] * 0.99, row[2], *row[4:]),
            SkipReason.INCONSISTENT_BAR,
        ),
    ],
)
async def test_a_bad_bar_is_dropped_and_counted_never_a_wall(corrupt, reason):
    full = sol()
    bad = 250
    rows = list(full.rows)
    rows[bad] = corrupt(rows[bad])
    recording = replace(full, rows=rows)
    ticks = ends(full)[CONTEXT:600]
    step, _, skipped, costs = await walk(recording, settings(), ticks)
    at = {tick: s.get("SOL/USDT") for tick, s in zip(ticks, skipped, strict=True)}
    bad_close = ends(full)[bad]
    assert at[bad_close] is reason  # the tick says why its newest bar is not there
    later = [at[t] for t in ticks if t > bad_close]
    assert later[:15] == [SkipReason.GAP] * 15
    assert later[15:] == [None] * (len(later) - 15)
    assert step.skips.counts[reason] == 1
    assert step.missing["SOL/USDT"] == 0  # the venue had it: it was bad, not missing
    # 600 - 64 ticks: skipped 1 + 15, never the rest of the run.
    assert sum(1 for s in skipped if s) == 16
    # One call a tick; the bad bar asked for again once, at its own tick.
    assert sorted(set(costs[1:])) == [(2, 1), (4, 2)]
    assert costs.count((4, 2)) == 1


async def test_a_bar_the_venue_is_slow_to_publish_is_asked_for_again_not_counted_missing():
    full = sol()
    late = 200

    class SlowVenue(CountingFeed):
        """Leaves out bar `late` the first time it is asked for."""

        hidden = True

        async def ohlcv(
            self, symbol: str, timeframe: Timeframe, since: datetime | None, limit: int
        ) -> list[Row]:
            rows = await super().ohlcv(symbol, timeframe, since, limit)
            if self.hidden and any(row[0] == full.rows[late][0] for row in rows):
                self.hidden = False
                return [row for row in rows if row[0] != full.rows[late][0]]
            return rows

    replay = replay_calendars(settings(), {"SOL/USDT": full})
    ticks = ends(full)[CONTEXT:260]
    clock = SimulatedClock(from_epoch_ms(ticks[0]))
    feed = SlowVenue({"SOL/USDT": full}, clock, FixedSpread(4))
    step = MarketDataStep(feed, settings(), calendars=replay.calendars)
    await step.start(clock.now())
    # Two bars close between these ticks, so the one left out is a hole among fetched rows.
    for tick in [*ticks[: late - CONTEXT], *ticks[late - CONTEXT + 1 :]]:
        await clock.sleep_until(from_epoch_ms(tick))
        data = await step.run(clock.now())
        assert data.skipped == {}, tick
    assert step.missing["SOL/USDT"] == 0
    assert [b.start for b in step.windows["SOL/USDT"].snapshot()][-CONTEXT:] == [
        from_epoch_ms(row[0]) for row in full.rows[260 - CONTEXT : 260]
    ]


async def test_a_market_with_a_lunch_break_is_traded_every_session_bar_and_never_gapped():
    recording = read_recording(XSHG_600977_5MIN, "600977/CNY")
    market = MarketSettings(
        symbols=["600977/CNY"], timeframe="5m", context_bars=CONTEXT, min_contiguous_bars=16
    )
    replay = replay_calendars(market, {"600977/CNY": recording})
    assert replay.calendars["600977/CNY"].name == "XSHG"
    restamped = replay.recordings["600977/CNY"]
    ticks = ends(restamped)[CONTEXT - 1 :]
    step, _, skipped, costs = await walk(recording, market, ticks)
    assert skipped == [{}] * len(ticks)  # no lunch, night or weekend is a gap
    assert step.missing["600977/CNY"] == 0
    assert not step.skips.counts
    assert max(calls for _, calls in costs[1:]) == 1
