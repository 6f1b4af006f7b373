"""What the data step will do at every tick of a replay, worked out ahead.

A recording does not change while it is replayed, so what `MarketDataStep` does with it at a
tick (which rows it judges, which bars join the window, which bars it counts missing, why a
symbol skips, which quote it prices) depends on the tick time alone, never on trading. A
backtest works it out once, here, and every strategy's run (and every run of a grid) replays
it through `trader.market.planned_step.PlannedDataStep` instead of fetching and judging rows
tick by tick.

The plan follows the data step's own rules (`trader.market.step`), using its parts: rows are
judged by `hygiene.parse_row`, the first fill starts at `step.history_start`, holes and
missing bars are counted by the symbol's calendar, quotes are what `ReplayMarketData` serves
(`quotes.modelled_quote`) checked by `hygiene.check_quote`. What the live step does that
cannot change a replay's outcome is left out: asking again for a hole (the recording answers
the same), reloading the market list. `tests/unit/market/test_replay_plan.py` runs both
steps side by side over recordings with holes, bad rows, several rows closing at one tick,
sessions and lunch breaks, and holds every quote value to the step's.

It is made fast (a few microseconds a tick) by working out in bulk what does not depend on
the walk: the rows and ticks' times, bisections and the market's newest bar ends
(`replay_plan_rows`), each distinct quote once (`replay_plan_quotes`); the walk itself takes
a short way for the common tick (one new valid bar).

A plan needs each calendar to cover the recording and the ticks (a fitted replay calendar
does); `plan_replay` returns None otherwise, and the caller uses the data step itself.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple, cast

import numpy as np

from trader.config.market_settings import MarketSettings
from trader.cycle_collector import collector_paused
from trader.domain import Bar, Quote, Timeframe, from_epoch_ms, to_epoch_ms
from trader.market.calendars.calendar import NO_BAR_END, TradingCalendar
from trader.market.calendars.units import Int64s
from trader.market.hygiene import SkipReason, parse_rows
from trader.market.quotes import SpreadModel
from trader.market.replay import Recording
from trader.market.replay_plan_quotes import PlannedQuotes
from trader.market.replay_plan_rows import (
    MICROSECOND,
    PlannedRows,
    TickRows,
    epoch_us,
)
from trader.market.step import history_start

NO_BARS: tuple[tuple[Bar, bool], ...] = ()
NO_PROBLEMS: tuple[tuple[SkipReason, int], ...] = ()


class SymbolTick(NamedTuple):
    """What the data step does for one symbol at one tick (a named tuple: a plan makes one
    per symbol and tick, and this is the cheapest immutable record to make)."""

    added: tuple[tuple[Bar, bool], ...]  # bars joining the window, each with "a hole before"
    judged: datetime | None  # the newest row judged now (None: none judged at this tick)
    problems: tuple[tuple[SkipReason, int], ...]  # rows dropped now, by reason
    missing: int  # bars the market expected that the recording lacks, found now
    reason: SkipReason | None  # why the symbol skips before pricing (None: it is priced)
    quote: Quote | SkipReason | None  # the checked quote, or why it is unusable; None: unpriced
    quote_time: datetime | None  # when the quote that came was the book


@dataclass(frozen=True)
class ReplayPlan:
    """Every symbol's `SymbolTick` at every tick, in tick order."""

    ticks: dict[datetime, int]  # tick time -> index
    symbols: dict[str, list[SymbolTick]]


def plan_replay(
    recordings: Mapping[str, Recording],
    calendars: Mapping[str, TradingCalendar],
    settings: MarketSettings,
    spread: SpreadModel,
    times: Sequence[datetime],
    parsed: Mapping[str, Sequence[Bar | SkipReason]] | None = None,
) -> ReplayPlan | None:
    """The plan of a replay that runs the ticks `times` (in order) from a fresh ledger;
    None where a calendar does not cover its recording and ticks. `parsed`: each
    recording's rows already judged by `parse_rows` (else they are judged here)."""
    if not times:
        return ReplayPlan({}, {s: [] for s in recordings})
    ticks_us = np.fromiter(map(epoch_us, times), dtype=np.int64, count=len(times))
    planned: dict[str, list[SymbolTick]] = {}
    with collector_paused():
        for symbol, recording in recordings.items():
            rows = parsed.get(symbol) if parsed is not None else None
            planner = _SymbolPlanner(recording, calendars[symbol], settings, spread, rows)
            ticks = planner.plan(times, ticks_us)
            if ticks is None:
                return None
            planned[symbol] = ticks
        return ReplayPlan(dict(zip(times, range(len(times)), strict=True)), planned)


class _SymbolPlanner:
    def __init__(
        self,
        recording: Recording,
        calendar: TradingCalendar,
        settings: MarketSettings,
        spread: SpreadModel,
        parsed: Sequence[Bar | SkipReason] | None,
    ) -> None:
        self.symbol = recording.symbol
        self.timeframe: Timeframe = recording.timeframe
        self.step_ms = recording.timeframe.seconds * 1000
        self.calendar = calendar
        self.settings = settings
        self.capacity = settings.context_bars
        self.starts = recording.starts
        # Every row judged once, as the data step judges it.
        if parsed is None or len(parsed) != len(recording.rows):
            parsed = parse_rows(recording.rows, self.symbol, self.timeframe)
        self.parsed = parsed
        self.rows = PlannedRows(parsed, self.starts, self.step_ms)
        self.quotes = PlannedQuotes(self.rows, self.symbol, spread)

    def plan(self, times: Sequence[datetime], ticks_us: Int64s) -> list[SymbolTick] | None:
        starts, calendar, timeframe = self.starts, self.calendar, self.timeframe
        first = to_epoch_ms(history_start(calendar, timeframe, times[0], self.capacity))
        lowest = min(starts[0], first) if starts else first
        if not calendar.covers(lowest, to_epoch_ms(times[-1])):
            return None
        steps, valid = self.rows.starts, self.rows.valid
        # Bars the market expected between each row and the one before it, and between each
        # valid bar and the valid bar before it (a dropped row is a hole too).
        self.gap_before = [
            0,
            *calendar.missing_between_many(timeframe, steps[:-1], steps[1:]).tolist(),
        ]
        holes = calendar.missing_between_many(timeframe, steps[valid[:-1]], steps[valid[1:]])
        self.hole_before = [False] * len(starts)
        for i, hole in zip(valid[1:].tolist(), holes.tolist(), strict=True):
            self.hole_before[i] = bool(hole)
        return self._walk(times, ticks_us)

    def _walk(self, times: Sequence[datetime], ticks_us: Int64s) -> list[SymbolTick]:
        """The data step's `_extend` and quote pricing, tick after tick. What does not depend
        on the walk is worked out for every tick at once (`TickRows`): the rows closed by
        each tick, the market's newest expected bar end, the rows of the quote the feed
        serves (its quotes worked out ahead). The common tick (one new valid bar, the symbol
        priced) takes the short way; any other is `_judge`'s and `_reason`'s."""
        rows, quotes, settings, bars = self.rows, self.quotes, self.settings, self.rows.bars
        at = TickRows(rows, self.calendar, self.timeframe, ticks_us)
        capacity, gap_before, hole_before = self.capacity, self.gap_before, self.hole_before
        needed = min(settings.min_contiguous_bars, capacity) if settings.gap_policy == "skip" else 0
        max_age_us = timedelta(seconds=settings.max_quote_age_s) // MICROSECOND
        ends_ms, tick_us, closed, newest_ends = (
            rows.ends_as_read, ticks_us.tolist(), at.closed, at.newest_ends
        )  # fmt: skip
        planned = quotes.prepare(at.quote_rows) if settings.add_latest else None
        out: list[SymbolTick] = []
        window = self.window = _Window()
        count = contiguous = 0  # bars in the window so far, and how many of the newest in a row
        last, last_end = -1, 0  # the newest bar's row (-1: none) and its end as the step reads it
        following = -1  # the first row not judged yet (-1: before the first fill)
        for t, now in enumerate(times):
            hi = closed[t]
            dropped: dict[int, SkipReason] | None = None
            if hi == following + 1 and following >= 0 and (bar := bars[following]) is not None:
                # The common tick: one new valid bar.
                missing = gap_before[following]
                after_hole = last >= 0 and hole_before[following]
                added: tuple[tuple[Bar, bool], ...] = ((bar, after_hole),)
                contiguous = 1 if after_hole else contiguous + 1
                count += 1
                last, last_end = following, ends_ms[following]
                judged: datetime | None = bar.start
                problems = NO_PROBLEMS
                following = hi
            elif following >= 0 and hi <= following:  # nothing new
                added, judged, problems, missing = NO_BARS, None, NO_PROBLEMS, 0
            else:  # the first fill, several rows, a dropped row
                window.count, window.contiguous, window.last = count, contiguous, last
                lo, hi = self._rows_judged(following, hi, now)
                added, judged, problems, missing, dropped = self._judge(lo, hi, following < 0)
                count, contiguous, last = window.count, window.contiguous, window.last
                last_end = ends_ms[last] if last >= 0 else 0
                following = hi if hi > lo else following
            newest = newest_ends[t]
            if last >= 0 and newest != NO_BAR_END and last_end >= newest and count >= capacity:
                reason = SkipReason.GAP if contiguous < needed else None
            else:
                window.count, window.contiguous, window.last = count, contiguous, last
                reason = self._reason(newest, last_end, dropped)
            if reason is not None:
                out.append(SymbolTick(added, judged, problems, missing, reason, None, None))
                continue
            checked = planned[t] if planned is not None else quotes.synthetic(last)
            if checked is None:  # not worked out ahead: it fails now, as the feed would
                checked = quotes.modelled(at.quote_rows[t])
            quote, when, at_us = checked
            # check_quote's last test, at this tick: a quote older than the limit is stale.
            if at_us is not None and tick_us[t] - at_us > max_age_us:
                quote = SkipReason.STALE_QUOTE
            out.append(SymbolTick(added, judged, problems, missing, None, quote, when))
        return out

    def _rows_judged(self, following: int, closed: int, now: datetime) -> tuple[int, int]:
        """The rows [lo, hi) the step judges at `now` beyond the common tick's one."""
        if following >= 0:
            return following, max(following, closed)
        # The first fill: a window's worth of bars, and some.
        since = history_start(self.calendar, self.timeframe, now, self.capacity)
        lo = bisect.bisect_left(self.starts, to_epoch_ms(since))
        return lo, max(lo, closed)

    def _reason(
        self, newest: int, last_end: int, dropped: dict[int, SkipReason] | None
    ) -> SkipReason | None:
        """Why the data step skips the symbol before pricing it, as `_extend` decides."""
        if newest == NO_BAR_END:
            return SkipReason.STALE_BARS
        if self.window.last < 0 or last_end < newest:
            # The bar due is not there: dropped just now, or stale.
            if dropped is not None:
                return dropped.get(newest - self.step_ms, SkipReason.STALE_BARS)
            return SkipReason.STALE_BARS
        if self.window.count < self.capacity:
            return SkipReason.INSUFFICIENT_HISTORY
        needed = min(self.settings.min_contiguous_bars, self.capacity)
        if self.settings.gap_policy == "skip" and self.window.contiguous < needed:
            return SkipReason.GAP
        return None

    def _judge(
        self, lo: int, hi: int, first_fill: bool
    ) -> tuple[
        tuple[tuple[Bar, bool], ...],
        datetime | None,
        tuple[tuple[SkipReason, int], ...],
        int,
        dict[int, SkipReason] | None,
    ]:
        """The rows [lo, hi) judged at one tick, as `_extend` takes them into the window:
        the bars added, the newest row judged, the rows dropped by reason, the bars missing,
        and the dropped rows by start."""
        window, bars, hole_before = self.window, self.rows.bars, self.hole_before
        added: list[tuple[Bar, bool]] = []
        dropped: dict[int, SkipReason] | None = None
        missing = 0
        for i in range(lo, hi):
            if i > lo or not first_fill:
                missing += self.gap_before[i]
            bar = bars[i]
            if bar is not None:
                after_hole = window.last >= 0 and hole_before[i]
                added.append((bar, after_hole))
                window.contiguous = 1 if after_hole else window.contiguous + 1
                window.count += 1
                window.last = i
            else:
                dropped = dropped if dropped is not None else {}
                dropped[self.starts[i]] = cast(SkipReason, self.parsed[i])
        if hi == lo:
            return NO_BARS, None, NO_PROBLEMS, 0, None
        newest = bars[hi - 1]
        return (
            tuple(added) if added else NO_BARS,
            newest.start if newest is not None else from_epoch_ms(self.starts[hi - 1]),
            tuple(Counter(dropped.values()).items()) if dropped is not None else NO_PROBLEMS,
            missing,
            dropped,
        )


@dataclass
class _Window:
    """What the walk knows of the symbol's window."""

    count: int = 0  # bars in the window so far
    contiguous: int = 0  # ... and how many of the newest in a row
    last: int = -1  # the row of the newest bar (-1: none yet)
