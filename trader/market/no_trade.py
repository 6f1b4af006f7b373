"""Bars with no trade, on a feed whose bars exist only where something traded.

Alpaca's free IEX feed builds a stock's minute bars from IEX's trades alone, so a minute with
no IEX trade has no bar: on that feed a bar missing inside the session is a bar with no trade,
not a hole. Such a bar is made the only way that invents no price: open = high = low = close =
the last close, volume 0 (the Bar type has no flag for it; volume 0 is the mark, a bar the
feed sends having a trade in it). Everywhere else (crypto, SIP, any other venue) a missing bar
is still a hole and the gap rule applies as before.

Never made: before the first real bar (no close to carry); in place of a row dropped as bad
(that is a hole); and past `QUIET_RUN_LIMIT` bars in a row after the newest real one: a feed
that has sent nothing for that long may have stopped, and the symbol waits (stale bars)
rather than trade on a price carried further; the bars in between are made once a real one
comes after them. The newest minute is judged at the tick (after `schedule.settle_delay_s`):
a bar IEX publishes later than that is passed over, as any row already judged is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trader.domain import Bar, Timeframe, from_epoch_ms, to_epoch_ms
from trader.market.calendars.calendar import TradingCalendar
from trader.market.hygiene import BarCheck

ONE_MS = timedelta(milliseconds=1)
# Bars in a row with no trade, after the newest real one, that are made before the symbol
# waits instead: a choice, a quarter of an hour of minute bars. On IEX a run that long is
# rare for a stock worth trading (at 30 % of minutes empty, 0.3^15: once in 70 million).
QUIET_RUN_LIMIT = 15


def no_trade_bar(last: Bar, start: datetime) -> Bar:
    """A bar at `start` in which nothing traded: the last close throughout, volume 0."""
    close = last.close
    quote_volume = 0.0 if last.quote_volume is not None else None
    return Bar(last.symbol, last.timeframe, start, close, close, close, close, 0.0, quote_volume)


@dataclass
class NoTradeBars:
    """The no-trade bars of the symbols whose feed is sparse (`feeds`: symbol -> feed name),
    counted per symbol for the metric."""

    feeds: dict[str, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    _run: dict[str, int] = field(default_factory=dict)  # no-trade bars since the last real one

    def fill(
        self,
        check: BarCheck,
        calendar: TradingCalendar,
        timeframe: Timeframe,
        last: Bar | None,
        judged: datetime | None,
        newest_end_ms: int | None,
    ) -> BarCheck:
        """`check` with a no-trade bar at every bar start the calendar expected after
        `judged` up to the newest bar that has closed, where the feed sent no row; `last`:
        the window's newest bar (whose close is carried)."""
        bars = check.bars
        symbol = bars[0].symbol if bars else last.symbol if last else None
        if symbol is None or symbol not in self.feeds or newest_end_ms is None:
            return check
        begin = judged + ONE_MS if judged is not None and last is not None else None
        if begin is None:  # nothing to carry before the first real bar
            if not bars:
                return check
            begin = bars[0].start
        expected = calendar.bar_starts(timeframe, to_epoch_ms(begin), newest_end_ms)
        real = {b.start: b for b in bars}
        newest_real = bars[-1].start if bars else None
        run = self._run.get(symbol, 0)
        out: list[Bar] = []
        made: list[datetime] = []
        # Every bar start in time order: the calendar's, and any real bar's outside them (an
        # extended-hours bar: its close is the last one there was).
        for start in sorted({*(from_epoch_ms(int(ms)) for ms in expected.tolist()), *real}):
            bar = real.get(start)
            if bar is not None:
                out.append(bar)
                last, run = bar, 0
                continue
            if start in check.dropped or last is None:
                continue  # a bad row is a hole; no close to carry yet
            if (newest_real is None or start > newest_real) and run >= QUIET_RUN_LIMIT:
                break  # the feed may have stopped: wait for a real bar
            last = no_trade_bar(last, start)
            out.append(last)
            made.append(start)
            run += 1
        self._run[symbol] = run
        if not made:
            return check
        self.counts[symbol] += len(made)
        judged_all = sorted({*check.judged, *made})
        return BarCheck(out, check.problems, judged_all, check.dropped)
