"""A tick's data step: bring each symbol's window up to date, then price it.

For every symbol: fetch the rows that closed since the newest one judged (paging as needed),
check them, drop and count the bad ones, ask the source once more for any bar its calendar
expected but did not get, count what is still missing, persist what was accepted, and require
the window to be fresh, full and (with `gap_policy = "skip"`) contiguous for long enough. Then
attach the latest quote: the real one (ADD_LATEST=1), or a synthetic one. A symbol with any
problem is skipped for the tick with its reason counted; the step itself never raises for bad
data or an unreachable exchange. A row is judged once: a tick costs the same however long ago
a gap or a bad bar was.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trader.config.market_settings import MarketSettings
from trader.domain import Bar, Quote, Timeframe, from_epoch_ms, to_epoch_ms
from trader.ledger.bars import BarStore
from trader.logging import get_logger
from trader.market.calendars.calendar import CalendarRangeError, TradingCalendar
from trader.market.calendars.per_symbol import SymbolCalendars
from trader.market.feed import ExchangeCallFailed, MarketData, UnknownSymbols
from trader.market.hygiene import (
    ROW_PROBLEMS,
    BarCheck,
    Row,
    SkipCounter,
    SkipReason,
    check_quote,
    check_rows,
    quote_time,
)
from trader.market.no_trade import NoTradeBars
from trader.market.quotes import SYNTHETIC_NOTICE, synthetic_quote
from trader.market.skip_log import SkipLog
from trader.market.window import BarWindow

ONE_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class SymbolData:
    """What a forecast and a decision may use for a symbol at a tick: nothing later."""

    symbol: str
    bars: tuple[Bar, ...]
    quote: Quote


@dataclass(frozen=True)
class TickData:
    at: datetime
    ready: Mapping[str, SymbolData]
    skipped: Mapping[str, SkipReason]
    # When each quote that came was the book, usable or not (a stale one too): for telemetry.
    quote_times: Mapping[str, datetime] = field(default_factory=dict)


async def fetch_since(
    feed: MarketData, symbol: str, timeframe: Timeframe, since: datetime, until: datetime
) -> list[Row]:
    """Rows from `since` up to `until`, page by page. A short page does not mean the end (some
    venues return fewer bars than asked); the end is a page that reaches `until` or adds nothing.
    """
    rows: list[Row] = []
    cursor = since
    while cursor < until:
        page = await feed.ohlcv(symbol, timeframe, cursor, feed.page_limit)
        if not page:
            break
        rows.extend(page)
        last = page[-1][0] if page[-1] else None
        if isinstance(last, bool) or not isinstance(last, int | float):
            break  # hygiene will say what is wrong with it
        following = from_epoch_ms(int(last)) + timeframe.duration
        if following <= cursor:
            break  # the source is not moving forward: stop rather than loop
        cursor = following
    return rows


class MarketDataStep:
    def __init__(
        self,
        feed: MarketData,
        settings: MarketSettings,
        *,
        store: BarStore | None = None,
        skips: SkipCounter | None = None,
        calendars: SymbolCalendars | None = None,
    ) -> None:
        self.feed = feed
        self.settings = settings
        self.timeframe = Timeframe(settings.timeframe)
        self.store = store
        self.skips = skips if skips is not None else SkipCounter()
        self.calendars = calendars or SymbolCalendars.continuous(settings.symbols)
        self.windows = {s: BarWindow(s, settings.context_bars) for s in settings.symbols}
        # The newest row judged per symbol: fetching resumes after it, so nothing is re-read.
        self.judged: dict[str, datetime] = {}
        self.missing: Counter[str] = Counter()  # bars the source never had, per symbol
        self.no_trade = NoTradeBars()  # on a sparse feed: the bars with no trade, made
        self.status: dict[str, str] = {}  # why each skipped symbol skipped, in words
        self._log = get_logger("trader.market")
        self.skip_log = SkipLog(self._log)  # "symbol skipped" once a run of skips, not a tick
        self._synthetic_announced = False
        self._markets_loaded: datetime | None = None
        self._accepted: list[Bar] = []

    @property
    def symbols(self) -> Sequence[str]:
        return self.settings.symbols

    async def start(self, now: datetime) -> None:
        """Check the symbols with the source and reload the windows from the ledger."""
        await self.feed.start(self.symbols)
        self._markets_loaded = now
        sparse = {s: self.feed.no_trade_feed(s) for s in self.symbols}
        self.no_trade.feeds = {s: f for s, f in sparse.items() if f is not None}
        if self.no_trade.feeds:
            self._log.info(
                "sparse feed: a bar missing in a session is one with no trade, not a gap",
                feeds=self.no_trade.feeds,
            )
        if self.store is None:
            return
        self.calendars.cover(now)
        for symbol, window in self.windows.items():
            bars = await self.store.load(symbol, self.timeframe, window.capacity)
            if bars and self._recent(symbol, bars[-1], now):
                for bar in bars:
                    window.add(bar, after_hole=self._hole_before(symbol, bar))
                self.judged[symbol] = bars[-1].start
        self._log.info(
            "windows reloaded",
            bars={s: len(w) for s, w in self.windows.items()},
            source=self.feed.name,
        )

    def _recent(self, symbol: str, last: Bar, now: datetime) -> bool:
        """Whether a stored bar is within a window's reach of now (else start afresh)."""
        calendar = self.calendars[symbol]
        try:
            newest = self._newest_end(symbol, now)
            if newest is None or to_epoch_ms(last.end) >= newest:
                return newest is not None
            between = calendar.missing_between(self.timeframe, to_epoch_ms(last.start), newest)
        except CalendarRangeError:  # stored before the calendar's span: too old to continue
            return False
        return between < self.windows[symbol].capacity

    async def run(self, now: datetime) -> TickData:
        await self._refresh_markets(now)
        self.calendars.cover(now)
        self._accepted = []
        updates = await asyncio.gather(*(self._update(symbol, now) for symbol in self.symbols))
        if self.store is not None and self._accepted:
            await self.store.save(self._accepted)  # one write for every symbol's new bars
        skipped = {s: r for s, r in zip(self.symbols, updates, strict=True) if r is not None}
        priced = [s for s in self.symbols if s not in skipped]
        quotes, quote_times = await self._quotes(priced, now)
        ready = {}
        for symbol in priced:
            quote = quotes[symbol]
            if isinstance(quote, SkipReason):
                self.skips.add(quote)
                skipped[symbol] = quote
                self.status[symbol] = str(quote)
            else:
                ready[symbol] = SymbolData(symbol, self.windows[symbol].snapshot(), quote)
        self.skip_log.tick(now, skipped, self.status)
        return TickData(now, ready, skipped, quote_times)

    async def _refresh_markets(self, now: datetime) -> None:
        """Reload the market list when it is due. A failure is logged and tried next tick; a
        symbol that was delisted shows up in the log here (an error: it needs a person), and
        as skips when fetched. An exchange that cannot be reached is a warning here: the
        daemon says so once, as an error, when it goes away (and every symbol skips)."""
        due = timedelta(seconds=self.settings.markets_refresh_s)
        if self._markets_loaded is not None and now - self._markets_loaded < due:
            return
        try:
            await self.feed.refresh_markets(self.symbols)
        except ExchangeCallFailed as error:
            self._log.warning("market list refresh failed", error=str(error))
            return
        except UnknownSymbols as error:
            self._log.error("market list refresh failed", error=str(error))
            return
        self._markets_loaded = now

    async def _update(self, symbol: str, now: datetime) -> SkipReason | None:
        """Extend the window; the reason the symbol must skip the tick, counted, or None."""
        try:
            reason = await self._extend(symbol, now)
        except CalendarRangeError as error:
            self._log.error("no calendar for this time", symbol=symbol, error=str(error))
            reason = SkipReason.OUTSIDE_CALENDAR
        if reason is None:
            self.status.pop(symbol, None)
            return None
        if reason not in ROW_PROBLEMS:  # a bad row was counted when it was dropped
            self.skips.add(reason)
        self.status[symbol] = self._describe(symbol, reason)
        return reason

    async def _extend(self, symbol: str, now: datetime) -> SkipReason | None:
        window = self.windows[symbol]
        judged = self.judged.get(symbol)
        try:
            check = await self._fetch(symbol, now, judged)
        except ExchangeCallFailed as error:
            self._log.warning("exchange unavailable", symbol=symbol, kind=error.kind)
            return SkipReason.EXCHANGE_UNAVAILABLE
        if check.problems:
            for problem, count in check.problems.items():
                self.skips.add(problem, count)
            self._log.warning(
                "bars dropped", symbol=symbol, **{str(p): n for p, n in check.problems.items()}
            )
        newest = self._newest_end(symbol, now)
        check = self.no_trade.fill(
            check, self.calendars[symbol], self.timeframe, window.last, judged, newest
        )
        self._count_missing(symbol, judged, check.judged)
        for bar in check.bars:
            window.add(bar, after_hole=self._hole_before(symbol, bar))
        self._accepted += check.bars
        if check.judged_until is not None:
            self.judged[symbol] = check.judged_until
        last = window.last
        if newest is None or last is None or to_epoch_ms(last.end) < newest:
            # Why the bar that closed last is not there: dropped as bad, or not sent (yet).
            due = from_epoch_ms(newest) - self.timeframe.duration if newest is not None else None
            return check.dropped.get(due, SkipReason.STALE_BARS) if due else SkipReason.STALE_BARS
        if not window.full:
            return SkipReason.INSUFFICIENT_HISTORY
        if self.settings.gap_policy == "skip" and window.contiguous < self._needed(window):
            return SkipReason.GAP
        return None

    async def _fetch(self, symbol: str, now: datetime, judged: datetime | None) -> BarCheck:
        """The rows after the newest judged one, checked; a hole in them (a bar absent, or
        one that came bad) is asked for once more before it counts: a venue can be slow to
        publish a bar, or send a garbled one once."""
        calendar = self.calendars[symbol]
        if judged is None:  # the first fill: a window's worth of the market's bars, and some
            since = history_start(calendar, self.timeframe, now, self.windows[symbol].capacity)
        else:
            since = judged + ONE_MS
        rows = await fetch_since(self.feed, symbol, self.timeframe, since, now)
        check = check_rows(rows, symbol, self.timeframe, now, after=judged)
        # On a sparse feed an absent bar is one with no trade: only a bad row is asked again.
        sparse = symbol in self.no_trade.feeds
        absent = None if sparse else self._first_hole(calendar, judged, check.judged)
        holes = [absent, *check.dropped]
        hole = min((h for h in holes if h is not None), default=None)
        if hole is None:
            return check
        refill = await fetch_since(self.feed, symbol, self.timeframe, hole, now)
        return check_rows(_merge(rows, refill), symbol, self.timeframe, now, after=judged)

    def _first_hole(
        self, calendar: TradingCalendar, judged: datetime | None, starts: Sequence[datetime]
    ) -> datetime | None:
        """The start of the first expected bar with no row among `starts`."""
        previous = judged
        for start in starts:
            if previous is not None:
                between = calendar.bar_starts(
                    self.timeframe, to_epoch_ms(previous) + 1, to_epoch_ms(start)
                )
                if len(between):
                    return from_epoch_ms(int(between[0]))
            previous = start
        return None

    def _count_missing(
        self, symbol: str, judged: datetime | None, starts: Sequence[datetime]
    ) -> None:
        calendar, previous, missing = self.calendars[symbol], judged, 0
        for start in starts:
            if previous is not None:
                missing += calendar.missing_between(
                    self.timeframe, to_epoch_ms(previous), to_epoch_ms(start)
                )
            previous = start
        if missing:
            self.missing[symbol] += missing
            self.skips.add(SkipReason.MISSING_BAR, missing)
            self._log.warning(
                "bars missing", symbol=symbol, count=missing, before=starts[-1].isoformat()
            )

    def _hole_before(self, symbol: str, bar: Bar) -> bool:
        """Whether the market expected a bar between the window's newest and `bar`."""
        last = self.windows[symbol].last
        if last is None:
            return False
        calendar = self.calendars[symbol]
        return (
            calendar.missing_between(
                self.timeframe, to_epoch_ms(last.start), to_epoch_ms(bar.start)
            )
            > 0
        )

    def _newest_end(self, symbol: str, now: datetime) -> int | None:
        """When the newest bar that should have closed by `now` closed (epoch ms)."""
        return self.calendars[symbol].last_bar_end(self.timeframe, to_epoch_ms(now))

    def _needed(self, window: BarWindow) -> int:
        return min(self.settings.min_contiguous_bars, window.capacity)

    def _describe(self, symbol: str, reason: SkipReason) -> str:
        """The skip in words, for /readyz and the log."""
        window = self.windows[symbol]
        if reason is SkipReason.GAP:
            hole = window.hole_before.isoformat() if window.hole_before else "?"
            return (
                f"gap: {window.contiguous} of {self._needed(window)} bars in a row since the "
                f"hole before {hole} ({self.missing[symbol]} bars missing so far)"
            )
        if reason is SkipReason.INSUFFICIENT_HISTORY:
            return f"insufficient_history: {len(window)} of {window.capacity} bars"
        return str(reason)

    async def _quotes(
        self, symbols: Sequence[str], now: datetime
    ) -> tuple[dict[str, Quote | SkipReason], dict[str, datetime]]:
        """Each symbol's quote, checked, or why it has none; and when each quote that came
        was the book."""
        max_age = timedelta(seconds=self.settings.max_quote_age_s)
        if not symbols:
            return {}, {}
        if not self.settings.add_latest:
            if not self._synthetic_announced:
                self._log.warning(SYNTHETIC_NOTICE)
                self._synthetic_announced = True
            raw = {s: synthetic_quote(self._last(s)) for s in symbols}
        else:
            try:
                raw = await self.feed.top_of_book(symbols)
            except ExchangeCallFailed as error:
                self._log.warning("exchange unavailable", what="quotes", kind=error.kind)
                return dict.fromkeys(symbols, SkipReason.EXCHANGE_UNAVAILABLE), {}
        checked = {s: check_quote(raw.get(s), s, now, max_age) for s in symbols}
        return checked, {s: quote_time(q) for s in symbols if (q := raw.get(s)) is not None}

    def _last(self, symbol: str) -> Bar:
        last = self.windows[symbol].last
        assert last is not None  # only fresh windows are priced
        return last


def history_start(
    calendar: TradingCalendar, timeframe: Timeframe, now: datetime, capacity: int
) -> datetime:
    """Where a window's first fill begins: as many of the market's bars back as a window
    holds, and some to spare for bad ones (from the calendar's start if it holds fewer)."""
    count = capacity + max(8, capacity // 8)
    try:
        return from_epoch_ms(calendar.bar_start_before(timeframe, to_epoch_ms(now), count))
    except CalendarRangeError:
        if calendar.span_ms is None:
            raise
        return from_epoch_ms(calendar.span_ms[0])


def _merge(rows: Sequence[Row], refill: Sequence[Row]) -> list[Row]:
    """Rows by start time, the refill's version where both have a bar."""
    by_start: dict[object, Row] = {row[0] if row else None: row for row in rows}
    by_start.update({row[0] if row else None: row for row in refill})
    return sorted(
        by_start.values(), key=lambda row: row[0] if row and isinstance(row[0], int | float) else -1
    )
