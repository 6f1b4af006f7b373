"""A perpetual's recorded funding and mark prices, as the engine asks for them in a replay or
a backtest: which funding times fall due by a tick, the mark price known then, and the mark's
most adverse extreme since the last tick (what liquidates a position).

The files are `market/files/funding.py`'s (beside the bars: `funding/` and `mark/`). Funding
times are the recorded ones, never an assumed 8h grid. A funding time within `SAME_INSTANT`
after a tick is that tick's (recorded times sit milliseconds off the hour; the backtest's
report counts them so too).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import cached_property

from trader.domain import to_epoch_ms
from trader.market.files.funding import (
    FundingRate,
    MarkPrices,
    PerpDataError,
    find_funding,
    find_marks,
    read_funding,
    read_marks,
)
from trader.market.replay import Recording

SAME_INSTANT = timedelta(seconds=60)


def _ms(at: datetime) -> int:
    return to_epoch_ms(at)


@dataclass(frozen=True)
class PerpTape:
    """One perpetual's recorded funding times (in time order) and mark-price candles."""

    symbol: str
    rates: tuple[FundingRate, ...]
    marks: MarkPrices | None

    @cached_property
    def _times(self) -> list[int]:
        return [rate.at_ms for rate in self.rates]

    def funding_due(self, after: datetime | None, until: datetime) -> list[FundingRate]:
        """The funding times that fall due at a tick at `until` when the last tick was at
        `after` (None: the first tick, when nothing was held before)."""
        if after is None:
            return []
        lo = _ms(after + SAME_INSTANT)
        hi = _ms(until + SAME_INSTANT)
        times = self._times
        return list(self.rates[bisect.bisect_right(times, lo) : bisect.bisect_right(times, hi)])

    def mark(self, at: datetime) -> Decimal | None:
        """The mark price known at `at`: the close of the last mark candle closed by then."""
        return self.marks.last_at(_ms(at)) if self.marks is not None else None

    def funding_mark(self, rate: FundingRate) -> Decimal | None:
        """The mark a funding was paid on: the record's own, else the last mark candle's."""
        if rate.mark is not None:
            return rate.mark
        return self.marks.last_at(rate.at_ms) if self.marks is not None else None

    def adverse_mark(self, after: datetime | None, until: datetime, long: bool) -> Decimal | None:
        """The lowest (a long's) or highest (a short's) mark of the candles that closed in
        (after, until]; None where no mark candle closed then."""
        if self.marks is None:
            return None
        length = self.marks.length_ms
        lo = _ms(after) if after is not None else _ms(until) - length
        hi = _ms(until)
        seen = [c for c in self.marks.candles if lo < c.open_ms + length <= hi]
        if not seen:
            return None
        return min(c.low for c in seen) if long else max(c.high for c in seen)


@dataclass(frozen=True)
class PerpRecordings(Mapping[str, PerpTape]):
    """The tapes of a replay's perpetuals, by symbol; `assumed_zero`: symbols with no funding
    recorded (run with none, as asked)."""

    tapes: Mapping[str, PerpTape]
    assumed_zero: tuple[str, ...] = ()

    def __getitem__(self, symbol: str) -> PerpTape:
        return self.tapes[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tapes)

    def __len__(self) -> int:
        return len(self.tapes)


def perp_recordings(
    recordings: Iterable[Recording], *, assume_zero: bool = False
) -> PerpRecordings:
    """Each recording's funding and mark files. PerpDataError names the bars without a
    funding file (unless `assume_zero`) and a file that cannot be read."""
    tapes: dict[str, PerpTape] = {}
    missing: list[str] = []
    for recording in recordings:
        length_ms = int(recording.timeframe.seconds * 1000)
        funding, marks = find_funding(recording.path), find_marks(recording.path)
        if funding is None:
            missing.append(recording.symbol)
        rates: Sequence[FundingRate] = read_funding(funding) if funding is not None else ()
        read = read_marks(marks, length_ms) if marks is not None else None
        tapes[recording.symbol] = PerpTape(recording.symbol, tuple(rates), read)
    if missing and not assume_zero:
        raise PerpDataError(
            f"market.kind = perp, but there is no funding recording beside the bars of "
            f"{', '.join(missing)}: `trader download` with market.kind = perp records it"
        )
    return PerpRecordings(tapes, tuple(missing))
