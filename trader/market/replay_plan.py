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
from datetime import datetime, timedelta

import numpy as np

from trader.config.market_settings import MarketSettings
from trader.domain import Bar, Quote, Timeframe, from_epoch_ms, to_epoch_ms
from trader.market.calendars.calendar import TradingCalendar
from trader.market.hygiene import RawQuote, SkipReason, check_quote, parse_rows, quote_time
from trader.market.quotes import SpreadModel, modelled_quote, synthetic_quote
from trader.market.replay import Recording
from trader.market.step import history_start

NO_BARS: tuple[tuple[Bar, bool], ...] = ()
NO_PROBLEMS: tuple[tuple[SkipReason, int], ...] = ()


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
        self.spread = spread
        self.capacity = settings.context_bars
        self.starts = recording.starts
        self.ends = [start + self.step_ms for start in self.starts]
        # Every row judged once, as the data step judges it.
        if parsed is None or len(parsed) != len(recording.rows):
            parsed = parse_rows(recording.rows, self.symbol, self.timeframe)
        self.parsed = parsed

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
        valid = [i for i, parsed in enumerate(self.parsed) if isinstance(parsed, Bar)]
        holes = calendar.missing_between_many(timeframe, steps[valid[:-1]], steps[valid[1:]])
        self.hole_before = dict(zip(valid[1:], (bool(h) for h in holes), strict=True))
        return self._walk(times)

    def _walk(self, times: Sequence[datetime]) -> list[SymbolTick]:
        """The data step's `_extend` and quote pricing, tick after tick."""
        parsed, settings = self.parsed, self.settings
        needed = min(settings.min_contiguous_bars, self.capacity)
        max_age = timedelta(seconds=settings.max_quote_age_s)
        out: list[SymbolTick] = []
        following: int | None = None  # the first row not judged yet (None: before the first fill)
        count = contiguous = 0  # bars in the window so far, and how many in a row
        last: Bar | None = None  # the window's newest bar
        for now in times:
            now_ms = to_epoch_ms(now)
            if following is None:  # the first fill: a window's worth of bars, and some
                since = history_start(self.calendar, self.timeframe, now, self.capacity)
                lo = bisect.bisect_left(self.starts, to_epoch_ms(since))
                first_fill = True
            else:
                lo, first_fill = following, False
            hi = bisect.bisect_right(self.ends, now_ms, lo)  # the rows closed by now
            added: list[tuple[Bar, bool]] = []
            problems: Counter[SkipReason] | None = None  # made for the rare bad row
            dropped: dict[int, SkipReason] = {}
            missing = 0
            for i in range(lo, hi):
                if i > lo or not first_fill:
                    missing += self.gap_before[i]
                row = parsed[i]
                if isinstance(row, Bar):
                    after_hole = last is not None and self.hole_before[i]
                    added.append((row, after_hole))
                    contiguous = 1 if after_hole else contiguous + 1
                    count += 1
                    last = row
                else:
                    problems = problems if problems is not None else Counter()
                    problems[row] += 1
                    dropped[self.starts[i]] = row
            if hi > lo:
                following = hi
            reason = self._reason(now_ms, last, count, contiguous, needed, dropped)
            quote: Quote | SkipReason | None = None
            when: datetime | None = None
            if reason is None:
                assert last is not None
                raw = self._raw_quote(now, now_ms, last)
                quote = check_quote(raw, self.symbol, now, max_age)
                when = quote_time(raw) if raw is not None else None
            out.append(
                SymbolTick(
                    tuple(added) if added else NO_BARS,
                    from_epoch_ms(self.starts[hi - 1]) if hi > lo else None,
                    tuple(problems.items()) if problems else NO_PROBLEMS,
                    missing,
                    reason,
                    quote,
                    when,
                )
            )
        return out

    def _reason(
        self,
        now_ms: int,
        last: Bar | None,
        count: int,
        contiguous: int,
        needed: int,
        dropped: Mapping[int, SkipReason],
    ) -> SkipReason | None:
        """Why the data step skips the symbol before pricing it, as `_extend` decides."""
        newest = self.calendar.last_bar_end(self.timeframe, now_ms)
        if newest is None or last is None or to_epoch_ms(last.end) < newest:
            if newest is None:
                return SkipReason.STALE_BARS
            return dropped.get(newest - self.step_ms, SkipReason.STALE_BARS)
        if count < self.capacity:
            return SkipReason.INSUFFICIENT_HISTORY
        if self.settings.gap_policy == "skip" and contiguous < needed:
            return SkipReason.GAP
        return None

    def _raw_quote(self, now: datetime, now_ms: int, last: Bar) -> RawQuote | None:
        """The quote the replay's feed serves now (`ReplayMarketData.top_of_book`): the
        last close and the spread model's reading of the last two valid closed rows."""
        if not self.settings.add_latest:
            return synthetic_quote(last)
        end = bisect.bisect_right(self.starts, now_ms)
        recent = [
            bar
            for index in range(max(0, end - 3), end)
            if isinstance(bar := self.parsed[index], Bar) and bar.end <= now
        ]
        return modelled_quote(recent[-2:], self.spread) if recent else None
