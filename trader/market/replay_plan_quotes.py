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
its recordings, mid and spread included, to the data step's own (the feed's
`modelled_quote` checked by `check_quote`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from trader.domain import Quote, QuoteSource, decimal_from_float, exact
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

    def prepare(self, quote_rows: Sequence[int]) -> list[Checked | None]:
        """The modelled quotes of these rows (`TickRows.quote_rows`), worked out at once;
        None for one that could not be (`modelled` then fails with the feed's error)."""
        modelled = self._modelled
        self._work_out([rows for rows in dict.fromkeys(quote_rows) if rows not in modelled])
        return [modelled.get(rows) for rows in quote_rows]

    def modelled(self, rows: int) -> Checked:
        """The checked modelled quote of the rows `TickRows.quote_rows` names."""
        found = self._modelled.get(rows)
        if found is None:
            self._work_out([rows], ahead=False)
            found = self._modelled[rows]
        return found

    def _work_out(self, wanted: Sequence[int], ahead: bool = True) -> None:
        """`check_quote(modelled_quote(recent, spread), ...)` but its age test, of the rows
        of each of `wanted`. Worked out ahead, a quote that cannot be (a spread model
        failing on its bars) is left for its tick, which fails as the feed would."""
        bars, before, ends_us = self.rows.bars, self.rows.valid_before_rows, self.rows.end_us
        spread_bps, factors_of, known = self.spread.spread_bps, self._factors_of, self._factors.get
        decimals: dict[float, Decimal] = {}
        # Parallel lists, not a tuple each: a plan is mostly small objects already.
        keys: list[int] = []
        times: list[datetime] = []
        closes: list[Decimal] = []
        lowers: list[Decimal] = []
        uppers: list[Decimal] = []
        for rows in wanted:
            newest = rows >> 1
            last, first = bars[newest], bars[before[newest]] if rows & 1 else None
            assert last is not None
            try:
                bps = spread_bps([last] if first is None else [first, last])
                lower, upper = known(bps) or factors_of(bps)
                close = decimals.get(last.close) or decimals.setdefault(
                    last.close, decimal_from_float(last.close)
                )  # prices repeat (a price grid): each converted once
            except (ArithmeticError, ValueError):
                if not ahead:
                    raise
                continue
            keys.append(rows)
            times.append(last.end)
            closes.append(close)
            lowers.append(lower)
            uppers.append(upper)
        usable: list[int] = []
        bids: list[Decimal] = []
        asks: list[Decimal] = []
        modelled = self._modelled
        with exact():
            for n, (close, lower, upper) in enumerate(zip(closes, lowers, uppers, strict=True)):
                try:
                    bid, ask = close * lower, close * upper
                except ArithmeticError:
                    if not ahead:
                        raise
                    continue
                # check_quote's tests of a Decimal bid and ask, in its order.
                if not (bid.is_finite() and bid > 0 and ask.is_finite() and ask > 0):
                    modelled[keys[n]] = (SkipReason.INVALID_QUOTE, times[n], None)
                elif bid >= ask:  # crossed, or locked (a modelled book is never locked)
                    modelled[keys[n]] = (SkipReason.CROSSED_QUOTE, times[n], None)
                else:
                    usable.append(n)
                    bids.append(bid)
                    asks.append(ask)
        at = [times[n] for n in usable]
        quotes = Quote.unchecked_many(self.symbol, bids, asks, at, _MODELLED)
        for n, quote in zip(usable, quotes, strict=True):
            rows = keys[n]
            modelled[rows] = (quote, quote.at, ends_us[rows >> 1])

    def _factors_of(self, bps: float) -> tuple[Decimal, Decimal]:
        """1 - half and 1 + half of a spread, as `modelled_quote` works them out."""
        factors = self._factors.get(bps)
        if factors is None:  # the half as modelled_quote divides: in the caller's context
            half = decimal_from_float(bps) / HALF_BPS
            with exact():
                factors = self._factors[bps] = (1 - half, 1 + half)
        return factors
