"""The emulated USDⓈ-M perpetuals market: per listed symbol its leverage brackets, a recorded
mark-price series (mark klines, separate from the last-price bars the spot market replays),
an optional index series, and a recorded funding series (time, rate, the mark at that time).

- Brackets as Binance's `GET /fapi/v1/leverageBracket` lists them: notional floor and cap,
  maintenance margin ratio, the highest initial leverage, and `cum`, the maintenance amount
  that makes the maintenance margin continuous across brackets:
  cum_n = floor_n x (mmr_n - mmr_{n-1}) + cum_{n-1} (Binance FAQ "Leverage and Margin of
  USDⓈ-M Futures", https://www.binance.com/en/support/faq/360033162192; its example:
  250,000 x (1% - 0.5%) + 50 = 1,300).
- Maintenance margin of a position = notional x mmr - cum, by the bracket its notional falls in.
- Funding intervals are whatever the recorded series says (8h, 4h, 1h, changing over time):
  nothing here assumes 8h.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from trader.domain import Bar, decimal_from_float
from trader.emulator.market import EmulatedMarket, Instrument


@dataclass(frozen=True)
class Bracket:
    bracket: int
    initial_leverage: int
    notional_floor: Decimal
    notional_cap: Decimal
    maint_margin_ratio: Decimal
    cum: Decimal


def brackets_from(tiers: Sequence[tuple[Decimal, Decimal, int]]) -> list[Bracket]:
    """Brackets from (notional cap, maintenance ratio, initial leverage) tiers, lowest first,
    each starting where the previous one ends, with `cum` by Binance's recurrence."""
    out: list[Bracket] = []
    floor, cum, previous_mmr = Decimal(0), Decimal(0), Decimal(0)
    for number, (cap, mmr, leverage) in enumerate(tiers, start=1):
        if cap <= floor or not 0 < mmr < 1 or leverage < 1:
            raise ValueError(f"bracket {number}: cap {cap}, ratio {mmr}, leverage {leverage}")
        cum = floor * (mmr - previous_mmr) + cum
        out.append(Bracket(number, leverage, floor, cap, mmr, cum))
        floor, previous_mmr = cap, mmr
    return out


# Binance's BTCUSDT example tiers as its leverage FAQ lists them (0.4% to 50k at 125x, 0.5% to
# 250k at 100x, 1% to 1M at 50x, ...): the default when a listing brings none.
DEFAULT_BRACKETS = brackets_from(
    [
        (Decimal(50_000), Decimal("0.004"), 125),
        (Decimal(250_000), Decimal("0.005"), 100),
        (Decimal(1_000_000), Decimal("0.01"), 50),
        (Decimal(10_000_000), Decimal("0.025"), 20),
        (Decimal(20_000_000), Decimal("0.05"), 10),
        (Decimal(50_000_000), Decimal("0.1"), 5),
        (Decimal(100_000_000), Decimal("0.125"), 4),
        (Decimal(200_000_000), Decimal("0.15"), 3),
        (Decimal(300_000_000), Decimal("0.25"), 2),
        (Decimal(500_000_000), Decimal("0.5"), 1),
    ]
)


def bracket_for(brackets: Sequence[Bracket], notional: Decimal) -> Bracket:
    """The bracket `notional` (absolute) falls in; past the last cap, the last one."""
    for bracket in brackets:
        if notional < bracket.notional_cap:
            return bracket
    return brackets[-1]


def maintenance_margin(brackets: Sequence[Bracket], notional: Decimal) -> Decimal:
    bracket = bracket_for(brackets, abs(notional))
    return abs(notional) * bracket.maint_margin_ratio - bracket.cum


@dataclass(frozen=True)
class FundingEvent:
    """One recorded settlement: every position pays mark x size x rate at `time`. Without a
    recorded mark (Aster's funding history has none) the mark series' close at `time`."""

    time: datetime
    rate: Decimal
    mark: Decimal | None = None


@dataclass
class PerpListing:
    instrument: Instrument
    mark_bars: list[Bar]
    funding: list[FundingEvent]
    brackets: list[Bracket] = field(default_factory=lambda: list(DEFAULT_BRACKETS))
    index_bars: list[Bar] | None = None  # the index; the last-price bars when not recorded
    funding_cap: Decimal = Decimal("0.03")  # fundingInfo's adjustedFundingRateCap/Floor

    def __post_init__(self) -> None:
        self.mark_bars = sorted(self.mark_bars, key=lambda bar: bar.start)
        self.funding = sorted(self.funding, key=lambda event: event.time)
        self._mark_ends = [bar.end for bar in self.mark_bars]


class PerpMarket:
    """The spot market's clock, last-price bars and book, plus each perp's mark, brackets and
    funding. A symbol is listed in both: `market` replays its last price."""

    def __init__(self, market: EmulatedMarket) -> None:
        self.market = market
        self._listings: dict[str, PerpListing] = {}

    def now(self) -> datetime:
        return self.market.clock()

    def list_perp(self, listing: PerpListing, last_bars: Sequence[Bar]) -> None:
        if not listing.mark_bars:
            raise ValueError(f"{listing.instrument.symbol}: a perp listing needs its mark bars")
        self.market.add_listing(listing.instrument, last_bars)
        self._listings[listing.instrument.venue_id] = listing

    @property
    def listings(self) -> list[PerpListing]:
        return list(self._listings.values())

    def listing(self, venue_id: str) -> PerpListing | None:
        return self._listings.get(venue_id)

    def mark_bars_closed(self, venue_id: str, after: datetime | None) -> list[Bar]:
        """Mark bars that closed after `after` (all when None) and by now, in order."""
        listing = self._listings[venue_id]
        now = self.now()
        last = bisect.bisect_right(listing._mark_ends, now)
        first = 0 if after is None else bisect.bisect_right(listing._mark_ends, after)
        return listing.mark_bars[first:last]

    def mark_price(self, venue_id: str) -> Decimal:
        """The mark now: the close of the last mark bar closed by now (else the first open)."""
        return self.mark_at(venue_id, self.now())

    def mark_at(self, venue_id: str, when: datetime) -> Decimal:
        """The close of the last mark bar closed by `when` (else the first bar's open)."""
        listing = self._listings[venue_id]
        index = bisect.bisect_right(listing._mark_ends, when) - 1
        bar = listing.mark_bars[max(index, 0)]
        return decimal_from_float(bar.close if index >= 0 else bar.open)

    def funding_mark(self, venue_id: str, event: FundingEvent) -> Decimal:
        return event.mark if event.mark is not None else self.mark_at(venue_id, event.time)

    def index_price(self, venue_id: str) -> Decimal:
        listing = self._listings[venue_id]
        if listing.index_bars:
            ends = [b.end for b in listing.index_bars]
            index = bisect.bisect_right(ends, self.now()) - 1
            return decimal_from_float(listing.index_bars[max(index, 0)].close)
        last = self.market.last_price(venue_id)
        return last if last is not None else self.mark_price(venue_id)

    def index_bars(self, venue_id: str) -> list[Bar]:
        listing = self._listings[venue_id]
        if listing.index_bars is not None:
            return [b for b in listing.index_bars if b.start <= self.now()]
        return self.market.bars(venue_id, self.market.timeframe(venue_id))

    def visible_mark_bars(self, venue_id: str) -> list[Bar]:
        return [b for b in self._listings[venue_id].mark_bars if b.start <= self.now()]

    def settled(self, venue_id: str) -> list[FundingEvent]:
        """Funding settlements that happened by now."""
        now = self.now()
        return [e for e in self._listings[venue_id].funding if e.time <= now]

    def next_funding(self, venue_id: str) -> FundingEvent | None:
        now = self.now()
        return next((e for e in self._listings[venue_id].funding if e.time > now), None)

    def funding_interval(self, venue_id: str) -> timedelta | None:
        """The interval the symbol settles at now: from the last settlement to the next
        (or between the last two, past the end of the recording)."""
        funding = self._listings[venue_id].funding
        now = self.now()
        after = bisect.bisect_right([e.time for e in funding], now)
        pair = funding[max(after - 1, 0) : after + 1]
        if len(pair) < 2:
            pair = funding[-2:]
        return pair[1].time - pair[0].time if len(pair) == 2 else None
