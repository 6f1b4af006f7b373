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
steps side by side over recordings with holes, bad rows, sessions and lunch breaks.

A plan needs each calendar to cover the recording and the ticks (a fitted replay calendar
does); `plan_replay` returns None otherwise, and the caller uses the data step itself.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import numpy as np

from trader.config.market_settings import MarketSettings
from trader.domain import Bar, Quote, Timeframe, from_epoch_ms, to_epoch_ms
from trader.market.calendars.calendar import NO_BAR_END, TradingCalendar
from trader.market.hygiene import SkipReason, parse_rows
from trader.market.quotes import SpreadModel
from trader.market.replay import Recording
from trader.market.replay_plan_quotes import PlannedQuotes, stale
from trader.market.step import history_start

NO_BARS: tuple[tuple[Bar, bool], ...] = ()
NO_PROBLEMS: tuple[tuple[SkipReason, int], ...] = ()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class SymbolTick:
    """What the data step does for one symbol at one tick."""

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
    planned: dict[str, list[SymbolTick]] = {}
    for symbol, recording in recordings.items():
        rows = parsed.get(symbol) if parsed is not None else None
        planner = _SymbolPlanner(recording, calendars[symbol], settings, spread, rows)
        ticks = planner.plan(times)
        if ticks is None:
            return None
        planned[symbol] = ticks
    return ReplayPlan({t: i for i, t in enumerate(times)}, planned)


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
        self.bars = [row if isinstance(row, Bar) else None for row in parsed]
        self.quotes = PlannedQuotes(self.bars, self.symbol, spread)

    def plan(self, times: Sequence[datetime]) -> list[SymbolTick] | None:
        starts, calendar, timeframe = self.starts, self.calendar, self.timeframe
        first = to_epoch_ms(history_start(calendar, timeframe, times[0], self.capacity))
        lowest = min(starts[0], first) if starts else first
        if not calendar.covers(lowest, to_epoch_ms(times[-1])):
            return None
        steps = np.asarray(starts, dtype=np.int64)
        # Bars the market expected between each row and the one before it, and between each
        # valid bar and the valid bar before it (a dropped row is a hole too).
        self.gap_before = [
            0,
            *calendar.missing_between_many(timeframe, steps[:-1], steps[1:]).tolist(),
        ]
        valid = [i for i, bar in enumerate(self.bars) if bar is not None]
        holes = calendar.missing_between_many(timeframe, steps[valid[:-1]], steps[valid[1:]])
        self.hole_before = [False] * len(starts)
        for i, hole in zip(valid[1:], holes.tolist(), strict=True):
            self.hole_before[i] = bool(hole)
        return self._walk(times, steps)

    def _walk(self, times: Sequence[datetime], steps: np.ndarray) -> list[SymbolTick]:
        """The data step's `_extend` and quote pricing, tick after tick. What does not depend
        on the walk is worked out for every tick at once: the rows begun and closed by each
        tick (as the step's and the feed's bisections find them), and the market's newest
        expected bar end (`last_bar_end`)."""
        parsed, bars, settings, quotes = self.parsed, self.bars, self.settings, self.quotes
        starts, step_ms, gap_before, hole_before = (
            self.starts,
            self.step_ms,
            self.gap_before,
            self.hole_before,
        )
        capacity, add_latest = self.capacity, settings.add_latest
        needed = min(settings.min_contiguous_bars, capacity)
        skip_gaps = settings.gap_policy == "skip"
        max_age = timedelta(seconds=settings.max_quote_age_s)
        ticks_ms = np.fromiter(map(to_epoch_ms, times), dtype=np.int64, count=len(times))
        ends = steps + step_ms
        closed = np.searchsorted(ends, ticks_ms, "right").tolist()  # rows closed by the tick
        begun = np.searchsorted(steps, ticks_ms, "right").tolist()  # rows the feed holds
        # Rows whose bar ends by the tick as a datetime compares (`bar.end <= now`), exactly.
        ticks_us = np.fromiter(map(_epoch_us, times), dtype=np.int64, count=len(times))
        ended = np.searchsorted(ends * 1000, ticks_us, "right").tolist()
        newest_ends = self.calendar.last_bar_ends(self.timeframe, ticks_ms).tolist()
        out: list[SymbolTick] = []
        following: int | None = None  # the first row not judged yet (None: before the first fill)
        count = contiguous = 0  # bars in the window so far, and how many in a row
        last = -1  # the row of the window's newest bar (-1: none yet)
        last_end = 0  # its end, in epoch ms as the step reads it
        for t, now in enumerate(times):
            if following is None:  # the first fill: a window's worth of bars, and some
                since = history_start(self.calendar, self.timeframe, now, capacity)
                lo = bisect.bisect_left(starts, to_epoch_ms(since))
                first_fill = True
            else:
                lo, first_fill = following, False
            hi = max(lo, closed[t])  # the rows judged now
            added: tuple[tuple[Bar, bool], ...] = NO_BARS
            problems: tuple[tuple[SkipReason, int], ...] = NO_PROBLEMS
            dropped: dict[int, SkipReason] | None = None
            missing = 0
            judged: datetime | None = None
            if hi > lo:
                new: list[tuple[Bar, bool]] = []
                for i in range(lo, hi):
                    if i > lo or not first_fill:
                        missing += gap_before[i]
                    bar = bars[i]
                    if bar is not None:
                        after_hole = last >= 0 and hole_before[i]
                        new.append((bar, after_hole))
                        contiguous = 1 if after_hole else contiguous + 1
                        count += 1
                        last = i
                    else:
                        dropped = dropped if dropped is not None else {}
                        dropped[starts[i]] = cast(SkipReason, parsed[i])
                if new:
                    added = tuple(new)
                    last_end = to_epoch_ms(bars[last].end)  # type: ignore[union-attr]
                if dropped is not None:
                    problems = tuple(Counter(dropped.values()).items())
                newest_row = bars[hi - 1]
                judged = (
                    newest_row.start if newest_row is not None else from_epoch_ms(starts[hi - 1])
                )
                following = hi
            # Why the data step skips the symbol before pricing it, as `_extend` decides.
            newest = newest_ends[t]
            reason: SkipReason | None = None
            if newest == NO_BAR_END:
                reason = SkipReason.STALE_BARS
            elif last < 0 or last_end < newest:
                reason = SkipReason.STALE_BARS  # unless the row due was dropped just now
                if dropped is not None:
                    reason = dropped.get(newest - step_ms, reason)
            elif count < capacity:
                reason = SkipReason.INSUFFICIENT_HISTORY
            elif skip_gaps and contiguous < needed:
                reason = SkipReason.GAP
            quote: Quote | SkipReason | None = None
            when: datetime | None = None
            if reason is None:
                # What the replay's feed serves now (`ReplayMarketData.top_of_book`): the last
                # close and the spread model's reading of the last two valid closed rows.
                if add_latest:
                    top = begun[t]
                    checked = quotes.modelled(max(0, top - 3), min(top, ended[t]))
                else:
                    checked = quotes.synthetic(last)
                quote, when = stale(checked, now, max_age), checked[1]
            out.append(SymbolTick(added, judged, problems, missing, reason, quote, when))
        return out


def _epoch_us(at: datetime) -> int:
    """A time as whole microseconds since the epoch (exact, as datetimes compare)."""
    return (at - _EPOCH) // _MICROSECOND
