"""A tick's data step: bring each symbol's window up to date, then price it.

For every symbol: fetch the bars that closed since the window's last one (paging as needed),
check them, refill a gap from the source once, persist what was accepted, and require the
window to be full and fresh. Then attach the latest quote: the real one (ADD_LATEST=1), or a
synthetic one. A symbol with any problem is skipped for the tick with its reason counted; the
step itself never raises for bad data or an unreachable exchange.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from trader.config.schema import MarketSettings
from trader.domain import Bar, Quote, Timeframe, from_epoch_ms
from trader.ledger.bars import BarStore
from trader.logging import get_logger
from trader.market.feed import ExchangeCallFailed, MarketData, UnknownSymbols
from trader.market.hygiene import (
    BarCheck,
    Row,
    SkipCounter,
    SkipReason,
    check_quote,
    check_rows,
    is_fresh,
)
from trader.market.quotes import SYNTHETIC_NOTICE, synthetic_quote
from trader.market.window import BarWindow


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
    ) -> None:
        self.feed = feed
        self.settings = settings
        self.timeframe = Timeframe(settings.timeframe)
        self.store = store
        self.skips = skips if skips is not None else SkipCounter()
        self.windows = {s: BarWindow(s, settings.context_bars) for s in settings.symbols}
        self._log = get_logger("trader.market")
        self._synthetic_announced = False
        self._markets_loaded: datetime | None = None

    @property
    def symbols(self) -> Sequence[str]:
        return self.settings.symbols

    async def start(self, now: datetime) -> None:
        """Check the symbols with the source and reload the windows from the ledger."""
        await self.feed.start(self.symbols)
        self._markets_loaded = now
        if self.store is None:
            return
        oldest_useful = now - self.timeframe.duration * (self.settings.context_bars + 1)
        for symbol, window in self.windows.items():
            bars = await self.store.load(symbol, self.timeframe, window.capacity)
            if bars and bars[-1].end >= oldest_useful:
                window.extend(bars)
        self._log.info(
            "windows reloaded",
            bars={s: len(w) for s, w in self.windows.items()},
            source=self.feed.name,
        )

    async def run(self, now: datetime) -> TickData:
        await self._refresh_markets(now)
        self._accepted: list[Bar] = []
        updates = await asyncio.gather(*(self._update(symbol, now) for symbol in self.symbols))
        if self.store is not None and self._accepted:
            await self.store.save(self._accepted)  # one write for every symbol's new bars
        skipped = {s: r for s, r in zip(self.symbols, updates, strict=True) if r is not None}
        priced = [s for s in self.symbols if s not in skipped]
        quotes = await self._quotes(priced, now)
        ready = {}
        for symbol in priced:
            quote = quotes[symbol]
            if isinstance(quote, SkipReason):
                self.skips.add(quote)
                skipped[symbol] = quote
            else:
                ready[symbol] = SymbolData(symbol, self.windows[symbol].snapshot(), quote)
        for symbol, reason in skipped.items():
            self._log.warning("symbol skipped", symbol=symbol, reason=str(reason))
        return TickData(now, ready, skipped)

    async def _refresh_markets(self, now: datetime) -> None:
        """Reload the market list when it is due. A failure is logged and tried next tick; a
        symbol that was delisted shows up in the log here, and as skips when fetched."""
        due = timedelta(seconds=self.settings.markets_refresh_s)
        if self._markets_loaded is not None and now - self._markets_loaded < due:
            return
        try:
            await self.feed.refresh_markets(self.symbols)
        except (ExchangeCallFailed, UnknownSymbols) as error:
            self._log.error("market list refresh failed", error=str(error))
            return
        self._markets_loaded = now

    async def _update(self, symbol: str, now: datetime) -> SkipReason | None:
        """Extend the window; the reason the symbol must skip the tick, counted, or None."""
        reason = await self._extend(symbol, now)
        if reason is not None:
            self.skips.add(reason)
        return reason

    async def _extend(self, symbol: str, now: datetime) -> SkipReason | None:
        window = self.windows[symbol]
        last = window.last
        since = (
            last.start + self.timeframe.duration
            if last is not None
            else now - self.timeframe.duration * (window.capacity + 1)
        )
        after = last.start if last is not None else None
        try:
            rows = await fetch_since(self.feed, symbol, self.timeframe, since, now)
            check = self._check(rows, symbol, now, after)
            if check.gap_from is not None and set(check.problems) == {SkipReason.GAP}:
                refill = await fetch_since(self.feed, symbol, self.timeframe, check.gap_from, now)
                check = self._check(_merge(rows, refill), symbol, now, after)
        except ExchangeCallFailed as error:
            self._log.warning("exchange unavailable", symbol=symbol, kind=error.kind)
            return SkipReason.EXCHANGE_UNAVAILABLE
        for problem, count in check.problems.items():
            # Every bad row is counted; the first problem is counted by _update as the skip.
            self.skips.add(problem, count - (problem is check.first_problem))
        if check.bars:
            window.extend(check.bars)
            self._accepted += check.bars
        if check.first_problem is not None:
            return check.first_problem
        if not is_fresh(window.last, now):
            return SkipReason.STALE_BARS
        if not window.full:
            return SkipReason.INSUFFICIENT_HISTORY
        return None

    def _check(
        self, rows: Sequence[Row], symbol: str, now: datetime, after: datetime | None
    ) -> BarCheck:
        return check_rows(
            rows, symbol, self.timeframe, now, after=after, allow_gaps=self.settings.allow_gaps
        )

    async def _quotes(self, symbols: Sequence[str], now: datetime) -> dict[str, Quote | SkipReason]:
        max_age = timedelta(seconds=self.settings.max_quote_age_s)
        if not symbols:
            return {}
        if not self.settings.add_latest:
            if not self._synthetic_announced:
                self._log.warning(SYNTHETIC_NOTICE)
                self._synthetic_announced = True
            return {
                s: check_quote(synthetic_quote(self._last(s)), s, now, max_age) for s in symbols
            }
        try:
            raw = await self.feed.top_of_book(symbols)
        except ExchangeCallFailed as error:
            self._log.warning("exchange unavailable", what="quotes", kind=error.kind)
            return dict.fromkeys(symbols, SkipReason.EXCHANGE_UNAVAILABLE)
        return {s: check_quote(raw.get(s), s, now, max_age) for s in symbols}

    def _last(self, symbol: str) -> Bar:
        last = self.windows[symbol].last
        assert last is not None  # only fresh windows are priced
        return last


def _merge(rows: Sequence[Row], refill: Sequence[Row]) -> list[Row]:
    """Rows by start time, the refill's version where both have a bar."""
    by_start: dict[object, Row] = {row[0] if row else None: row for row in rows}
    by_start.update({row[0] if row else None: row for row in refill})
    return sorted(
        by_start.values(), key=lambda row: row[0] if row and isinstance(row[0], int | float) else -1
    )
