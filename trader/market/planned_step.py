"""The data step of a backtest: `MarketDataStep` replaying a `ReplayPlan` instead of fetching and
judging rows at every tick.

Everything the engine and the daemon's telemetry read of the step is kept as the step itself
keeps it: each symbol's window (the same bars, holes and runs of contiguous bars), the newest
row judged, the bars missing, the skips by reason and each skipped symbol's status, the
"symbol skipped" warnings. Only the fetching and judging is done once, ahead, for all runs.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime

from trader.config.market_settings import MarketSettings
from trader.domain import Bar, Quote
from trader.ledger.bars import BarStore
from trader.market.calendars.per_symbol import SymbolCalendars
from trader.market.feed import MarketData
from trader.market.hygiene import ROW_PROBLEMS, SkipReason
from trader.market.quotes import SYNTHETIC_NOTICE
from trader.market.replay_plan import ReplayPlan, SymbolTick
from trader.market.step import MarketDataStep, SymbolData, TickData


class PlannedDataStep(MarketDataStep):
    """`run` replays the plan; a time the plan does not hold is an error (the plan is made
    for the run's ticks). The feed only answers `start` (it checks the symbols). The bars
    the store keeps are written once, by `save_bars` at the end of the run."""

    def __init__(
        self,
        feed: MarketData,
        settings: MarketSettings,
        plan: ReplayPlan,
        calendars: SymbolCalendars,
        *,
        store: BarStore | None = None,
    ) -> None:
        super().__init__(feed, settings, calendars=calendars)
        self.plan = plan
        self._ticks = [(symbol, plan.symbols[symbol]) for symbol in settings.symbols]
        self._planned_store = store
        keep = store.keep if store is not None else 0
        self._newest: dict[str, deque[Bar]] = {s: deque(maxlen=keep) for s in settings.symbols}

    async def save_bars(self) -> None:
        """What the store holds after the run: each symbol's newest accepted bars."""
        if self._planned_store is not None:
            await self._planned_store.save([b for bars in self._newest.values() for b in bars])

    def index_of(self, now: datetime) -> int | None:
        """The plan's index of the tick at `now` (None: the plan holds no such tick)."""
        return self.plan.ticks.get(now)

    def plain(self, index: int) -> list[tuple[str, SymbolTick]] | None:
        """Each symbol's planned tick at `index`, in the settings' order, when the tick is
        plain: every symbol priced, no row dropped, no bar missing, nothing to announce. Then
        `advance` is all `run` would do but hand over the windows. None for any other."""
        if not self.settings.add_latest and not self._synthetic_announced:
            return None
        plain = []
        for symbol, ticks in self._ticks:
            tick = ticks[index]
            if (
                tick.reason is not None or tick.problems or tick.missing
                or not isinstance(tick.quote, Quote)
            ):  # fmt: skip
                return None
            plain.append((symbol, tick))
        return plain

    def advance(self, index: int, now: datetime) -> None:
        """`run` at a plain tick (`plain`), but for the `TickData`: the windows, the newest
        rows judged and the bars the store keeps move on."""
        for symbol, ticks in self._ticks:
            self._apply(symbol, ticks[index], now)
        self.skip_log.tick(now, {}, self.status)  # a symbol that was skipping is priced again

    async def run(self, now: datetime) -> TickData:
        index = self.plan.ticks.get(now)
        if index is None:
            raise ValueError(f"the replay's plan holds no tick at {now.isoformat()}")
        skipped: dict[str, SkipReason] = {}
        ready: dict[str, SymbolData] = {}
        quote_times: dict[str, datetime] = {}
        for symbol, ticks in self._ticks:
            tick = ticks[index]
            self._apply(symbol, tick, now)
            if tick.reason is not None:
                skipped[symbol] = tick.reason
        if not self.settings.add_latest and len(skipped) < len(self._ticks):
            self._announce_synthetic()
        for symbol, ticks in self._ticks:
            tick = ticks[index]
            quote = tick.quote
            if tick.quote_time is not None:
                quote_times[symbol] = tick.quote_time
            if isinstance(quote, SkipReason):
                self.skips.add(quote)
                skipped[symbol] = quote
                self.status[symbol] = str(quote)
            elif quote is not None:
                ready[symbol] = SymbolData(symbol, self.windows[symbol].snapshot(), quote)
        self.skip_log.tick(now, skipped, self.status)
        return TickData(now, ready, skipped, quote_times)

    def _apply(self, symbol: str, tick: SymbolTick, now: datetime) -> None:
        """The tick's part of `_update` for one symbol: the window, counts and status."""
        if tick.problems:
            for problem, count in tick.problems:
                self.skips.add(problem, count)
            self._log.warning(
                "bars dropped", symbol=symbol, **{str(p): n for p, n in tick.problems}
            )
        if tick.missing:
            self.missing[symbol] += tick.missing
            self.skips.add(SkipReason.MISSING_BAR, tick.missing)
            assert tick.judged is not None
            self._log.warning(
                "bars missing", symbol=symbol, count=tick.missing, before=tick.judged.isoformat()
            )
        window = self.windows[symbol]
        for bar, after_hole in tick.added:
            window.add(bar, after_hole=after_hole)
        if tick.added and self._planned_store is not None:
            self._newest[symbol].extend(bar for bar, _ in tick.added)
        if tick.judged is not None:
            self.judged[symbol] = tick.judged
        reason = tick.reason
        if reason is None:
            self.status.pop(symbol, None)
            return
        if reason not in ROW_PROBLEMS:
            self.skips.add(reason)
        self.status[symbol] = self._describe(symbol, reason)

    def _announce_synthetic(self) -> None:
        if not self._synthetic_announced:
            self._log.warning(SYNTHETIC_NOTICE)
            self._synthetic_announced = True
