"""The quotes of a replay plan (`trader.market.replay_plan`), each made once.

What `ReplayMarketData.top_of_book` serves at a tick depends only on which of the recording's
rows have closed by then: the spread model's reading of the last two valid closed rows around
the last close (`quotes.modelled_quote`), or bid = ask = the window's newest close with
ADD_LATEST=0 (`quotes.synthetic_quote`). So a plan checks each such quote once, as
`hygiene.check_quote` does, and hands the same frozen `Quote` to every tick that sees it; only
the age test depends on the tick, and stays with the walk.

A modelled quote is worked out here step for step as `modelled_quote` and `check_quote` do it,
without the `RawQuote` in between and with each distinct spread converted once: that is most
of the plan's cost otherwise. `tests/unit/market/test_replay_plan.py` holds every quote of
its recordings, mid and spread included, to `check_quote(modelled_quote(...))`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from trader.domain import Bar, Quote, QuoteSource, decimal_from_float, exact
from trader.market.hygiene import SkipReason, check_quote, quote_time
from trader.market.quotes import HALF_BPS, SpreadModel, synthetic_quote
from trader.market.replay_plan_rows import PlannedRows

# A checked quote, or why it is unusable; when it was the book (None: no quote came); the
# same in epoch microseconds where it is a usable quote, whose age each tick then judges.
Checked = tuple[Quote | SkipReason, datetime | None, int | None]

NO_QUOTE: Checked = (SkipReason.NO_QUOTE, None, None)
_MODELLED = QuoteSource.MODELLED


class PlannedQuotes:
    """One symbol's quotes over its judged rows."""

    def __init__(self, rows: PlannedRows, symbol: str, spread: SpreadModel) -> None:
        self.rows = rows
        self.symbol = symbol
        self.spread = spread
        self._modelled: dict[int, Checked] = {-1: NO_QUOTE}
        self._synthetic: dict[int, Checked] = {}
        # A spread in bps -> 1 - half and 1 + half of it as a share of the price.
        self._factors: dict[float, tuple[Decimal, Decimal]] = {}

    def synthetic(self, row: int) -> Checked:
        """The checked ADD_LATEST=0 quote of the window's newest bar (at `row`)."""
        found = self._synthetic.get(row)
        if found is None:
            bar = self.rows.bars[row]
            assert bar is not None
            raw = synthetic_quote(bar)
            # Checked as the quote was the book (age 0); each tick judges its age.
            quote = check_quote(raw, self.symbol, quote_time(raw), timedelta.max)
            usable = self.rows.end_us[row] if isinstance(quote, Quote) else None
            found = self._synthetic[row] = (quote, quote_time(raw), usable)
        return found

    def modelled(self, rows: int) -> Checked:
        """The checked modelled quote of the rows `TickRows.quote_rows` names."""
        found = self._modelled.get(rows)
        if found is None:
            newest = rows >> 1
            bars = self.rows.bars
            last = bars[newest]
            assert last is not None
            if rows & 1:
                before = bars[int(self.rows.valid_before[newest])]
                assert before is not None
                found = self._check_modelled([before, last], newest)
            else:
                found = self._check_modelled([last], newest)
            self._modelled[rows] = found
        return found

    def _check_modelled(self, recent: list[Bar], row: int) -> Checked:
        """`check_quote(modelled_quote(recent, spread), ...)` but its age test."""
        last = recent[-1]
        at = last.end
        bps = self.spread.spread_bps(recent)
        factors = self._factors.get(bps)
        if factors is None:  # as modelled_quote divides: in the caller's context
            half = decimal_from_float(bps) / HALF_BPS
            with exact():
                factors = self._factors[bps] = (1 - half, 1 + half)
        close = decimal_from_float(last.close)
        with exact():
            bid, ask = close * factors[0], close * factors[1]
        # check_quote's tests of a Decimal bid and ask, in its order.
        if not (bid.is_finite() and bid > 0 and ask.is_finite() and ask > 0):
            return (SkipReason.INVALID_QUOTE, at, None)
        if bid >= ask:  # crossed, or locked (a modelled book is never locked)
            return (SkipReason.CROSSED_QUOTE, at, None)
        return (Quote.unchecked(self.symbol, bid, ask, at, _MODELLED), at, self.rows.end_us[row])
