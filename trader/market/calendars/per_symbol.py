"""Each symbol's trading calendar, kept covering the times the daemon asks about.

A replay's calendars are fixed: inferred from (or named for) its data and built over the data's
span. A live daemon's are built by name around the wall clock and rebuilt before the clock runs
past their end (exchange calendars are tables of sessions over a span, not rules). Past the
last session exchange_calendars knows, a calendar runs on its exchange's regular week without
holidays (`regular_week`); the log says so when the clock gets there (`known_end`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from trader.domain import Timeframe, to_epoch_ms
from trader.logging import get_logger
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.known_end import KnownEnd, Notice, known_ends, notices
from trader.market.calendars.registry import CONTINUOUS, CalendarBuilder, build_calendar

AHEAD = timedelta(days=400)  # a live calendar is built this far past now ...
# ... and rebuilt when its end comes this close: twice the 30 days the known-end alert
# allows, so a calendar built ahead never reads as ending soon between two ticks.
REBUILD_BEFORE = timedelta(days=60)


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
        self._said_past: set[str] = set()  # calendars whose move to the regular week is said
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
        """Rebuild any live calendar whose span ends too soon after `now` (past the sessions
        the library knows, on the regular week); say once when `now` passes a calendar's
        known sessions."""
        self._say_past(now)
        if self._lookback is None:
            return
        for symbol, calendar in self._calendars.items():
            if calendar.covers(to_epoch_ms(now), to_epoch_ms(now + REBUILD_BEFORE)):
                continue
            self._calendars[symbol] = self._builder.build(
                calendar.name,
                to_epoch_ms(now - self._lookback),
                to_epoch_ms(now + AHEAD),
                calendar.anchor,
            )

    def known_ends(self) -> list[KnownEnd]:
        """Where each calendar's known sessions end, one per calendar name."""
        return known_ends(self._calendars.values())

    def notices(self, now: datetime, until: datetime | None = None) -> list[Notice]:
        """The calendars whose known sessions have ended by `now`, end within 30 days of it,
        or before `until` (a replay's last tick): for the start-up warning, which also stands
        for the log line `cover` would give when the clock passes the end."""
        found = notices(
            self.known_ends(), to_epoch_ms(now), None if until is None else to_epoch_ms(until)
        )
        self._said_past.update(n.end.calendar for n in found if n.ended)
        return found

    def _say_past(self, now: datetime) -> None:
        now_ms = to_epoch_ms(now)
        for calendar in self._calendars.values():
            past = calendar.known_until_ms is not None and now_ms >= calendar.known_until_ms
            if not past or calendar.name in self._said_past:
                continue
            self._said_past.add(calendar.name)
            notice = Notice(known_ends([calendar])[0], ended=True)
            self._log.warning("calendar past its known sessions", **notice.fields())

    def __getitem__(self, symbol: str) -> TradingCalendar:
        return self._calendars[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self._calendars)

    def __len__(self) -> int:
        return len(self._calendars)
