"""The data step on a sparse feed (Alpaca's IEX: a minute with no IEX trade has no bar): a bar
missing in a session is a bar with no trade, carrying the last close at volume 0, never a gap
that stops the symbol; on any other feed the same hole is still a gap. The bars are the real
Shanghai A-share 600977's 5-minute ones (tests/data/README.md: a market with a lunch break),
with the bars the emulator's IEX rule (`DataPlan.no_iex_trade`, 30 % of them) leaves out
taken out."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from tests.recorded import XSHG_600977_5MIN
from trader.clock import SimulatedClock
from trader.config.market_settings import MarketSettings
from trader.domain import from_epoch_ms
from trader.emulator.alpaca_feeds import DataPlan
from trader.market.calendars.per_symbol import SymbolCalendars
from trader.market.hygiene import SkipReason
from trader.market.no_trade import QUIET_RUN_LIMIT
from trader.market.quotes import FixedSpread
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.market.replay_calendars import replay_calendars
from trader.market.step import MarketDataStep, history_start

SYMBOL = "600977/CNY"
CONTEXT = 64
IEX = DataPlan(iex_sparsity=0.3)


class SparseFeed(ReplayMarketData):
    """The replay source, saying its bars exist only where something traded."""

    def no_trade_feed(self, symbol: str) -> str | None:
        return "iex"


def market() -> MarketSettings:
    # Quotes made from the window's newest bar: the replay's real one is its newest row's,
    # on a sparse feed as old as the last trade (the bars are what is tested here).
    return MarketSettings(
        symbols=[SYMBOL], timeframe="5m", context_bars=CONTEXT, min_contiguous_bars=16,
        add_latest=False,
    )  # fmt: skip


def recorded() -> tuple[Recording, SymbolCalendars]:
    """The A-share's bars on Shanghai's sessions (the calendar inferred from all of them)."""
    replay = replay_calendars(market(), {SYMBOL: read_recording(XSHG_600977_5MIN, SYMBOL)})
    assert replay.calendars[SYMBOL].name == "XSHG"
    return replay.recordings[SYMBOL], replay.calendars


def without(recording: Recording, gone: set[int]) -> Recording:
    return replace(recording, rows=[r for r in recording.rows if r[0] not in gone])


def iex_gone(recording: Recording) -> set[int]:
    """The bar starts IEX would not have (no trade), by the emulator's rule."""
    return {r[0] for r in recording.rows if IEX.no_iex_trade(SYMBOL, from_epoch_ms(r[0]))}


def ends(recording: Recording) -> list[int]:
    step = recording.timeframe.seconds * 1000
    return [row[0] + step for row in recording.rows]


async def walk(
    feed_type: type[ReplayMarketData],
    recording: Recording,
    calendars: SymbolCalendars,
    ticks: Sequence[int],
) -> tuple[MarketDataStep, list[SkipReason | None]]:
    clock = SimulatedClock(from_epoch_ms(ticks[0]))
    feed = feed_type({SYMBOL: recording}, clock, FixedSpread(4))
    step = MarketDataStep(feed, market(), calendars=calendars)
    await step.start(clock.now())
    skipped = []
    for tick in ticks:
        await clock.sleep_until(from_epoch_ms(tick))
        skipped.append((await step.run(clock.now())).skipped.get(SYMBOL))
    return step, skipped


async def test_a_sparse_feed_trades_through_its_no_trade_bars_and_counts_them():
    full, calendars = recorded()
    gone = iex_gone(full)
    sparse = without(full, gone)
    ticks = ends(full)[CONTEXT + 40 : 600]
    step, skipped = await walk(SparseFeed, sparse, calendars, ticks)
    assert skipped == [None] * len(ticks)  # no gap, no stale bar: every tick trades
    assert step.missing[SYMBOL] == 0
    assert not step.skips.counts
    # Every bar the feed left out is there as a bar with no trade: the last close, volume 0.
    window = step.windows[SYMBOL].snapshot()
    closed = [r for r in full.rows if r[0] < ticks[-1]]
    assert [to_ms(b.start) for b in window] == [r[0] for r in closed[-CONTEXT:]]
    assert step.windows[SYMBOL].contiguous >= CONTEXT  # no hole since the first fill
    real = {r[0]: r for r in full.rows}
    assert any(to_ms(b.start) in gone for b in window)
    for earlier, bar in itertools.pairwise(window):
        if to_ms(bar.start) in gone:
            assert (bar.open, bar.high, bar.low, bar.close) == (earlier.close,) * 4
            assert bar.volume == 0
        else:
            assert bar.close == real[to_ms(bar.start)][4]  # a real bar is the feed's own
    # Counted: every left-out bar after the first real one the first fill fetched.
    since = history_start(calendars[SYMBOL], full.timeframe, from_epoch_ms(ticks[0]), CONTEXT)
    first_real = min(r[0] for r in sparse.rows if r[0] >= to_ms(since))
    assert step.no_trade.counts[SYMBOL] == sum(1 for s in gone if first_real < s < ticks[-1])


def to_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


async def test_the_same_holes_on_a_feed_that_is_not_sparse_are_gaps():
    full, calendars = recorded()
    sparse = without(full, iex_gone(full))
    ticks = ends(full)[CONTEXT + 40 : 300]
    step, skipped = await walk(ReplayMarketData, sparse, calendars, ticks)
    assert SkipReason.GAP in skipped
    assert step.missing[SYMBOL] > 0
    assert step.no_trade.counts[SYMBOL] == 0


async def test_a_bad_row_on_a_sparse_feed_is_still_a_hole():
    full, calendars = recorded()
    bad_at = CONTEXT + 100
    rows = list(full.rows)
    row = rows[bad_at]
    rows[bad_at] = (row[0], row[1], row[2], row[3], math.nan, row[5], row[6])
    broken = replace(full, rows=rows)
    ticks = ends(full)[CONTEXT + 40 : bad_at + 30]
    step, skipped = await walk(SparseFeed, broken, calendars, ticks)
    assert step.skips.counts[SkipReason.INVALID_BAR] == 1
    at_bad = ticks.index(ends(full)[bad_at])
    assert skipped[at_bad] is SkipReason.INVALID_BAR  # not a bar with no trade
    after = skipped[at_bad + 1 :]
    assert after[:15] == [SkipReason.GAP] * 15  # the gap rule, as on any feed
    assert after[15:] == [None] * (len(after) - 15)
    assert step.no_trade.counts[SYMBOL] == 0
    assert all(b.volume > 0 for b in step.windows[SYMBOL].snapshot())


async def test_a_long_silence_waits_on_stale_bars_and_is_filled_once_a_bar_comes():
    full, calendars = recorded()
    quiet_from, quiet = CONTEXT + 120, QUIET_RUN_LIMIT + 5
    gone = {r[0] for r in full.rows[quiet_from : quiet_from + quiet]}
    ticks = ends(full)[CONTEXT + 40 : quiet_from + quiet + 10]
    step, skipped = await walk(SparseFeed, without(full, gone), calendars, ticks)
    at = dict(zip(ticks, skipped, strict=True))
    silent = [at[t] for t in ends(full)[quiet_from : quiet_from + quiet]]
    # The first QUIET_RUN_LIMIT bars with no trade are made; then the symbol waits.
    assert silent == [None] * QUIET_RUN_LIMIT + [SkipReason.STALE_BARS] * 5
    back = [at[t] for t in ticks if t > ends(full)[quiet_from + quiet - 1]]
    assert back == [None] * len(back)  # the bar after the silence fills it: no gap
    assert step.no_trade.counts[SYMBOL] == quiet
    assert step.missing[SYMBOL] == 0
