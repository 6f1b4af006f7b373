"""The quotes of a replay plan (`trader.market.replay_plan`), each made once.

What `ReplayMarketData.top_of_book` serves at a tick depends only on which of the recording's
rows have closed by then: the spread model's reading of the last two valid closed rows around
the last close (`quotes.modelled_quote`), or bid = ask = the window's newest close with
ADD_LATEST=0 (`quotes.synthetic_quote`). So a plan checks each such quote once, as
`hygiene.check_quote` does, and hands the same frozen `Quote` to every tick that sees it; only
the age test depends on the tick, and stays with the walk (`stale`).

A modelled quote is worked out here step for step as `modelled_quote` and `check_quote` do it,
without the `RawQuote` in between and with each distinct spread converted once: that is most
of the plan's cost otherwise. `tests/unit/market/test_replay_plan.py` holds every quote of
its recordings, mid and spread included, to `check_quote(modelled_quote(...))`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from trader.domain import Bar, Quote, QuoteSource, decimal_from_float, exact
from trader.market.hygiene import SkipReason, check_quote, quote_time
from trader.market.quotes import HALF_BPS, SpreadModel, synthetic_quote

# A checked quote, or why it is unusable, and when it was the book (None: no quote came).
Checked = tuple[Quote | SkipReason, datetime | None]

NO_QUOTE: Checked = (SkipReason.NO_QUOTE, None)
_MODELLED = QuoteSource.MODELLED


def stale(checked: Checked, now: datetime, max_age: timedelta) -> Quote | SkipReason:
    """`check_quote`'s last test, at the tick `now`: a quote older than `max_age` is stale."""
    quote, at = checked
    if isinstance(quote, Quote) and at is not None and now - at > max_age:
        return SkipReason.STALE_QUOTE
    return quote


class PlannedQuotes:
    """One symbol's quotes over its judged rows (`parsed`, `None` where a row was dropped)."""

    def __init__(self, bars: Sequence[Bar | None], symbol: str, spread: SpreadModel) -> None:
        self.bars = bars
        self.symbol = symbol
        self.spread = spread
        self._modelled: dict[tuple[int, int], Checked] = {}
        self._synthetic: dict[int, Checked] = {}
        self._halves: dict[float, Decimal] = {}  # a spread in bps -> its half as a price share

    def synthetic(self, index: int) -> Checked:
        """The checked ADD_LATEST=0 quote of the row `index` (the window's newest bar)."""
        found = self._synthetic.get(index)
        if found is None:
            bar = self.bars[index]
            assert bar is not None
            raw = synthetic_quote(bar)
            # Checked as the quote was the book (age 0); `stale` judges its age at each tick.
            found = (check_quote(raw, self.symbol, quote_time(raw), timedelta.max), quote_time(raw))
            self._synthetic[index] = found
        return found

    def modelled(self, lo: int, hi: int) -> Checked:
        """The checked modelled quote of the valid rows among [lo, hi) (the last two)."""
        found = self._modelled.get((lo, hi))
        if found is None:
            recent = [bar for bar in self.bars[lo:hi] if bar is not None][-2:]
            found = self._check_modelled(recent) if recent else NO_QUOTE
            self._modelled[(lo, hi)] = found
        return found

    def _check_modelled(self, recent: list[Bar]) -> Checked:
        """`check_quote(modelled_quote(recent, spread), ...)` but its age test."""
        last = recent[-1]
        at = last.end
        bps = self.spread.spread_bps(recent)
        half = self._halves.get(bps)
        if half is None:  # as modelled_quote divides: in the caller's context, not the exact one
            half = self._halves[bps] = decimal_from_float(bps) / HALF_BPS
        close = decimal_from_float(last.close)
        with exact():
            bid, ask = close * (1 - half), close * (1 + half)
        # check_quote's tests of a Decimal bid and ask, in its order.
        if not (bid.is_finite() and bid > 0 and ask.is_finite() and ask > 0):
            return (SkipReason.INVALID_QUOTE, at)
        if bid >= ask:  # crossed, or locked (a modelled book is never locked)
            return (SkipReason.CROSSED_QUOTE, at)
        return (Quote.unchecked(self.symbol, bid, ask, at, _MODELLED), at)
