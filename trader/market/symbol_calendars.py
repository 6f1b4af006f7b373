"""Each symbol's trading calendar, kept covering the times the daemon asks about.

A replay's calendars are fixed: inferred from (or named for) its data and built over the data's
span. A live daemon's are built by name around the wall clock and rebuilt before the clock runs
past their end (exchange calendars are tables of sessions over a span, not rules).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from trader.domain import Timeframe
from trader.market.calendar import TradingCalendar
from trader.market.calendars import CONTINUOUS, build_calendar

AHEAD = timedelta(days=400)  # a live calendar is built this far past now ...
REBUILD_BEFORE = timedelta(days=30)  # ... and rebuilt when its end comes this close


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


class SymbolCalendars(Mapping[str, TradingCalendar]):
    def __init__(
        self, calendars: Mapping[str, TradingCalendar], *, lookback: timedelta | None = None
    ) -> None:
        """`lookback`: how far before now a live calendar must reach (None: fixed calendars,
        never rebuilt)."""
        self._calendars = dict(calendars)
        self._lookback = lookback

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
        built = {
            symbol: build_calendar(name, _ms(now - lookback), _ms(now + AHEAD))
            for symbol, name in names.items()
        }
        return cls(built, lookback=lookback)

    def cover(self, now: datetime) -> None:
        """Rebuild any live calendar whose span ends too soon after `now`."""
        if self._lookback is None:
            return
        for symbol, calendar in self._calendars.items():
            if calendar.continuous or calendar.covers(_ms(now), _ms(now + REBUILD_BEFORE)):
                continue
            self._calendars[symbol] = build_calendar(
                calendar.name, _ms(now - self._lookback), _ms(now + AHEAD), calendar.anchor
            )

    def names(self) -> dict[str, str]:
        return {symbol: calendar.name for symbol, calendar in self._calendars.items()}

    def __getitem__(self, symbol: str) -> TradingCalendar:
        return self._calendars[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self._calendars)

    def __len__(self) -> int:
        return len(self._calendars)
