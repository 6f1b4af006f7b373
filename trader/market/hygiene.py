"""Data hygiene: raw rows and quotes from any source become domain values, or a reason.

Every problem has a `SkipReason` (a bounded set: it is a metric label). A bad row is dropped
and counted, never a wall: the rows after it are judged on their own, and the hole it leaves
is the data step's to handle like a bar the venue never had. Nothing downstream sees bad data.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from trader.domain import Bar, Quote, QuoteSource, Timeframe, decimal_from_float, from_epoch_ms
from trader.domain.symbols import check_symbol


class SkipReason(StrEnum):
    INVALID_BAR = "invalid_bar"  # missing, non-numeric or non-finite field
    NON_POSITIVE_PRICE = "non_positive_price"
    INCONSISTENT_BAR = "inconsistent_bar"  # high/low do not bound open/close
    NEGATIVE_VOLUME = "negative_volume"
    DUPLICATE_BAR = "duplicate_bar"
    MISSING_BAR = "missing_bar"  # in a session, absent even when asked for again
    GAP = "gap"  # the symbol waits for enough bars in a row after a missing one
    STALE_BARS = "stale_bars"  # the bar that closed at tick time is not there
    OUTSIDE_CALENDAR = "outside_calendar"  # outside the span its calendar is built for
    INSUFFICIENT_HISTORY = "insufficient_history"
    NO_QUOTE = "no_quote"
    INVALID_QUOTE = "invalid_quote"
    CROSSED_QUOTE = "crossed_quote"
    STALE_QUOTE = "stale_quote"
    EXCHANGE_UNAVAILABLE = "exchange_unavailable"


# What is wrong with a row itself (counted when it is dropped), not with a symbol's tick.
ROW_PROBLEMS = frozenset(
    {
        SkipReason.INVALID_BAR,
        SkipReason.NON_POSITIVE_PRICE,
        SkipReason.INCONSISTENT_BAR,
        SkipReason.NEGATIVE_VOLUME,
    }
)

# (start in epoch ms, open, high, low, close, volume[, quote volume]) as the source sent it.
Row = Sequence[object]


@dataclass(frozen=True)
class RawQuote:
    """Top of book as the source sent it; `exchange_time` is None when the venue gives none."""

    bid: object
    ask: object
    received_at: datetime
    exchange_time: datetime | None = None
    bid_size: object = None
    ask_size: object = None
    source: QuoteSource = QuoteSource.REAL


@dataclass
class SkipCounter:
    """Counts of skipped data by reason (the daemon exports them as a metric)."""

    counts: Counter[SkipReason] = field(default_factory=Counter)

    def add(self, reason: SkipReason, n: int = 1) -> None:
        self.counts[reason] += n


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def _start(row: Row) -> datetime | None:
    start_ms = row[0] if len(row) else None
    if isinstance(start_ms, bool) or not isinstance(start_ms, int | float):
        return None
    if not math.isfinite(start_ms) or start_ms != int(start_ms):
        return None
    return from_epoch_ms(int(start_ms))


def parse_row(row: Row, symbol: str, timeframe: Timeframe) -> Bar | SkipReason:
    start = _start(row)
    if start is None or len(row) < 6:
        return SkipReason.INVALID_BAR
    values = [_number(v) for v in row[1:6]]
    has_quote_volume = len(row) > 6 and row[6] is not None
    quote_volume = _number(row[6]) if has_quote_volume else None
    if any(v is None for v in values) or (has_quote_volume and quote_volume is None):
        return SkipReason.INVALID_BAR
    open_, high, low, close, volume = (v for v in values if v is not None)
    if min(open_, high, low, close) <= 0:
        return SkipReason.NON_POSITIVE_PRICE
    if high < max(open_, close, low) or low > min(open_, close):
        return SkipReason.INCONSISTENT_BAR
    if volume < 0 or (quote_volume is not None and quote_volume < 0):
        return SkipReason.NEGATIVE_VOLUME
    return Bar(symbol, timeframe, start, open_, high, low, close, volume, quote_volume)


_INF = math.inf


def parse_rows(rows: Sequence[Row], symbol: str, timeframe: Timeframe) -> list[Bar | SkipReason]:
    """`parse_row` of every row, at a fraction of its cost for the common row: a whole
    millisecond start and float values, all finite, the bar consistent (each test below is
    `parse_row`'s and `Bar`'s, written out once). Any other row is judged by `parse_row`."""
    check_symbol(symbol)  # what every Bar checks
    out: list[Bar | SkipReason] = []
    for row in rows:
        size = len(row)
        if size == 7:
            start, open_, high, low, close, volume, quote_volume = row
        elif size == 6:
            (start, open_, high, low, close, volume), quote_volume = row, None
        else:
            out.append(parse_row(row, symbol, timeframe))
            continue
        if (
            type(start) is int
            and type(open_) is float
            and type(high) is float
            and type(low) is float
            and type(close) is float
            and type(volume) is float
            and (quote_volume is None or (type(quote_volume) is float and 0 <= quote_volume < _INF))
            and 0 < low <= open_ <= high < _INF
            and low <= close <= high
            and 0 <= volume < _INF
        ):
            bar = Bar.unchecked(
                symbol, timeframe, from_epoch_ms(start), open_, high, low, close, volume,
                quote_volume,
            )  # fmt: skip
            out.append(bar)
        else:  # NaN fails every comparison: judged, with its reason, below
            out.append(parse_row(row, symbol, timeframe))
    return out


def bad_rows(rows: Sequence[Row], symbol: str, timeframe: Timeframe) -> list[bool]:
    """For each row, whether it is dropped as a bad bar (ROW_PROBLEMS): a reader counting the
    bars a recording has counts these as missing."""
    return [isinstance(parsed, SkipReason) for parsed in parse_rows(rows, symbol, timeframe)]


@dataclass(frozen=True)
class BarCheck:
    """The new closed bars among some rows, and what was wrong with the rest."""

    bars: list[Bar]  # valid, in time order
    problems: Counter[SkipReason]  # rows dropped, by reason
    judged: list[datetime]  # start of every new closed row judged, valid or not, in order
    dropped: dict[datetime, SkipReason]  # why each judged row that is not a bar was dropped

    @property
    def judged_until(self) -> datetime | None:
        return self.judged[-1] if self.judged else None


def check_rows(
    rows: Sequence[Row], symbol: str, timeframe: Timeframe, now: datetime, *, after: datetime | None
) -> BarCheck:
    """The closed bars among `rows` that started after `after` (the newest row already
    judged), in time order whatever order they came in.

    Rows already judged and the still-forming bar (ending after `now`) are passed over without
    complaint. A bad row is counted and dropped; a second row for a time keeps the first.
    """
    timed: list[tuple[datetime, Row]] = []
    problems: Counter[SkipReason] = Counter()
    for row in rows:
        start = _start(row)
        if start is None:
            problems[SkipReason.INVALID_BAR] += 1
        elif (after is None or start > after) and start + timeframe.duration <= now:
            timed.append((start, row))
    timed.sort(key=lambda item: item[0])  # stable: of two rows for a time, the first stays
    accepted: list[Bar] = []
    judged: list[datetime] = []
    dropped: dict[datetime, SkipReason] = {}
    for start, row in timed:
        if judged and start == judged[-1]:
            problems[SkipReason.DUPLICATE_BAR] += 1
            continue
        judged.append(start)
        parsed = parse_row(row, symbol, timeframe)
        if isinstance(parsed, SkipReason):
            problems[parsed] += 1
            dropped[start] = parsed
        else:
            accepted.append(parsed)
    return BarCheck(accepted, problems, judged, dropped)


def _price(value: object) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        if isinstance(value, Decimal):
            price = value
        elif isinstance(value, float):
            price = decimal_from_float(value) if math.isfinite(value) else Decimal("NaN")
        else:
            price = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return price if price.is_finite() and price > 0 else None


def quote_time(raw: RawQuote) -> datetime:
    """When a quote was the book: the venue's timestamp, else when it was received."""
    return raw.exchange_time or raw.received_at


def check_quote(
    raw: RawQuote | None, symbol: str, now: datetime, max_age: timedelta
) -> Quote | SkipReason:
    if raw is None or raw.bid is None or raw.ask is None:
        return SkipReason.NO_QUOTE
    bid, ask = _price(raw.bid), _price(raw.ask)
    if bid is None or ask is None:
        return SkipReason.INVALID_QUOTE
    # A real book cannot stay locked (bid = ask): that would be a free round trip, not a quote.
    if bid > ask or (bid == ask and raw.source is not QuoteSource.SYNTHETIC):
        return SkipReason.CROSSED_QUOTE
    at = quote_time(raw)
    if now - at > max_age:
        return SkipReason.STALE_QUOTE
    sizes = [_price(s) if s is not None else None for s in (raw.bid_size, raw.ask_size)]
    return Quote(symbol, bid, ask, at, raw.source, sizes[0], sizes[1])
