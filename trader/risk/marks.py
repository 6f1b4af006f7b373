"""The equity marks the loss and drawdown limits are measured from, the same on every timeframe.

- A day's loss is measured from the day's reference: the last equity seen before the day
  began (the previous day's close), so the move of the day's first bar counts. On daily bars
  that is the bar's own move; on 1h bars the bar that closes at midnight opens the new day.
  The first day of an account starts from its opening equity (the starting cash).
- Drawdown is measured from a running peak, never from the day's. `high` is the account's
  all-time high (the opening equity included): the ledger's `equity.drawdown` and the
  backtest report's max drawdown are measured from it. `peak` is the high-water mark of the
  `max_drawdown` limit: the same running peak, except that it is re-based to the equity of
  the moment trading resumes after a stop (else a resumed account, still below its old high,
  would stop again at once).

"Day" is the risk day (`RiskEngine.day_of`): by default the UTC day. The sessions of New
York's and Shanghai's exchanges end before UTC midnight, so for them the last equity before the
UTC day began is the previous session's close; a market whose session crosses UTC midnight
(Sydney) names its zone in `risk.day_zone`, and FX's day that ends at 17:00 New York time is
`risk.day_rolls_at`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal


@dataclass(frozen=True)
class DayMarks:
    """Where the limits stand: `day`'s reference equity `start` (equity at the previous day's
    close), the limit's high-water mark `peak`, the last equity seen `last` (the next day's
    start) and the account's all-time high `high`."""

    day: date
    start: Decimal
    peak: Decimal
    last: Decimal
    high: Decimal

    @classmethod
    def opening(cls, day: date, equity: Decimal) -> DayMarks:
        """The marks of an account that has seen no equity but its opening `equity`."""
        return cls(day, equity, equity, equity, equity)

    def on(self, day: date) -> DayMarks:
        """The marks on `day`: a later day starts from the last equity seen before it."""
        return self if day == self.day else replace(self, day=day, start=self.last)

    def seen(self, equity: Decimal) -> DayMarks:
        """The marks after seeing `equity` (on the same day)."""
        return DayMarks(
            self.day, self.start, max(self.peak, equity), equity, max(self.high, equity)
        )

    def rebased(self, equity: Decimal) -> DayMarks:
        """Trading resumes at `equity`: the day's loss and the drawdown limit are measured from
        it now (the account's all-time high is kept: it is a record, not a limit)."""
        return replace(self, start=equity, peak=equity)

    def loss(self, equity: Decimal) -> float:
        """The loss since the day's reference, as a share of it; 0 when up."""
        return _below(self.start, equity)

    def drawdown(self, equity: Decimal) -> float:
        """The drawdown from the account's all-time high (what the ledger records)."""
        return _below(self.high, equity)

    def limit_drawdown(self, equity: Decimal) -> float:
        """The drawdown from the limit's high-water mark (what `max_drawdown` limits)."""
        return _below(self.peak, equity)


def _below(reference: Decimal, equity: Decimal) -> float:
    if reference <= 0 or equity >= reference:
        return 0.0
    return float((reference - equity) / reference)
