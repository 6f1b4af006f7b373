"""Each symbol's trading calendar, kept covering the times the daemon asks about.

A replay's calendars are fixed: inferred from (or named for) its data and built over the data's
span. A live daemon's are built by name around the wall clock and rebuilt before the clock runs
past their end (exchange calendars are tables of sessions over a span, not rules).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from trader.domain import Timeframe, to_epoch_ms
from trader.logging import get_logger
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.registry import CONTINUOUS, CalendarBuilder, build_calendar

AHEAD = timedelta(days=400)  # a live calendar is built this far past now ...
REBUILD_BEFORE = timedelta(days=30)  # ... and rebuilt when its end comes this close


class SymbolCalendars(Mapping[str, TradingCalendar]):
    def __init__(
        self,
        calendars: Mapping[str, TradingCalendar],
        *,
        lookback: timedelta | None = None,
        builder: CalendarBuilder | None = None,
    ) -> None:
        """`lookback`: how far before now a live calendar must reach (None: fixed calendars,
        never rebuilt)."""
        self._calendars = dict(calendars)
        self._lookback = lookback
        self._builder = builder or CalendarBuilder()
        self._at_their_end: set[str] = set()  # names no library can build further ahead
        self._log = get_logger("trader.market")

    @classmethod
    def continuous(cls, symbols: Sequence[str]) -> SymbolCalendars:
        calendar = build_calendar(CONTINUOUS, 0, 0)
        return cls(dict.fromkeys(symbols, calendar))

    @classmethod
    def named(
        cls, names: Mapping[str, str], now: datetime, timeframe: Timeframe, history_bars: int
    ) -> SymbolCalendars:
        """Calendars built by name around `now`, reaching back far enough for the first
        `history_bars` bars (however sparse the sessions) and rebuilt as time goes on."""
        # A daily stock has ~252 bars in 365 days; a 4-hour FX pair 30 in 7 days: allow 2x.
        lookback = timeframe.duration * history_bars * 2 + timedelta(days=30)
        builder = CalendarBuilder()
        built = {
            symbol: builder.build(name, to_epoch_ms(now - lookback), to_epoch_ms(now + AHEAD))
            for symbol, name in names.items()
        }
        return cls(built, lookback=lookback, builder=builder)

    def cover(self, now: datetime) -> None:
        """Rebuild any live calendar whose span ends too soon after `now`. One the library
        cannot build further (its exchange's sessions are known a year or so ahead) is kept,
        said once: past its end the symbol skips its ticks as outside_calendar."""
        if self._lookback is None:
            return
        for symbol, calendar in self._calendars.items():
            span = calendar.span_ms
            if span is None or calendar.name in self._at_their_end:
                continue
            if calendar.covers(to_epoch_ms(now), to_epoch_ms(now + REBUILD_BEFORE)):
                continue
            rebuilt = self._builder.build(
                calendar.name,
                to_epoch_ms(now - self._lookback),
                to_epoch_ms(now + AHEAD),
                calendar.anchor,
            )
            if rebuilt.span_ms is not None and rebuilt.span_ms[1] <= span[1]:
                self._at_their_end.add(calendar.name)
                self._log.error(
                    "calendar ends soon",
                    calendar=calendar.name,
                    last_session_before=datetime.fromtimestamp(span[1] / 1000, UTC).isoformat(),
                    fix="upgrade exchange_calendars (it publishes sessions a year or so ahead)",
                )
            self._calendars[symbol] = rebuilt

    def __getitem__(self, symbol: str) -> TradingCalendar:
        return self._calendars[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self._calendars)

    def __len__(self) -> int:
        return len(self._calendars)
