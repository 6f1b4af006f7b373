"""The emulated venue's market: instruments, a recorded bar path on the emulator's clock, and a
top of book derived from the last closed price with a fixed spread."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from trader.domain import Bar, Timeframe, decimal_from_float


@dataclass(frozen=True)
class Instrument:
    symbol: str  # unified: "SOL/USDT"
    tick_size: Decimal = Decimal("0.01")
    step_size: Decimal = Decimal("0.001")
    min_qty: Decimal = Decimal("0.001")
    min_notional: Decimal = Decimal(5)
    # Alpaca's asset attributes (Binance lists crypto only and ignores them).
    asset_class: str = "crypto"  # or "us_equity": trades in the exchange's sessions
    fractionable: bool = True
    shortable: bool = False
    easy_to_borrow: bool = False
    tradable: bool = True

    @property
    def base(self) -> str:
        return self.symbol.split("/")[0]

    @property
    def quote(self) -> str:
        return self.symbol.split("/")[1]

    @property
    def venue_id(self) -> str:
        """Binance's spelling: SOLUSDT."""
        return self.base + self.quote


@dataclass
class _Series:
    instrument: Instrument
    timeframe: Timeframe
    bars: list[Bar]
    starts: list[datetime]


class EmulatedMarket:
    def __init__(self, clock: Callable[[], datetime], spread_bps: Decimal = Decimal(2)) -> None:
        self.clock = clock
        self.spread_bps = spread_bps
        self._series: dict[str, _Series] = {}

    def add_listing(self, instrument: Instrument, bars: Sequence[Bar]) -> None:
        """List `instrument` with its price path (bars of one timeframe, in order)."""
        if not bars:
            raise ValueError(f"{instrument.symbol}: a listing needs its bars")
        timeframe = bars[0].timeframe
        ordered = sorted(bars, key=lambda bar: bar.start)
        self._series[instrument.venue_id] = _Series(
            instrument, timeframe, ordered, [bar.start for bar in ordered]
        )

    def delist(self, venue_id: str) -> None:
        del self._series[venue_id]

    def replace_bars(self, venue_id: str, bars: Sequence[Bar]) -> None:
        self.add_listing(self._series[venue_id].instrument, bars)

    def withhold(self, venue_id: str, start: datetime) -> None:
        """Never publish the bar that opens at `start`, as an exchange that drops a candle."""
        series = self._series[venue_id]
        self.replace_bars(venue_id, [bar for bar in series.bars if bar.start != start])

    @property
    def instruments(self) -> list[Instrument]:
        return [series.instrument for series in self._series.values()]

    def instrument(self, venue_id: str) -> Instrument | None:
        series = self._series.get(venue_id)
        return series.instrument if series else None

    def timeframe(self, venue_id: str) -> Timeframe:
        return self._series[venue_id].timeframe

    def bars(self, venue_id: str, timeframe: Timeframe) -> list[Bar]:
        """Bars that have opened by now (the last one may still be forming), in `timeframe`
        when it is a whole multiple of the recorded one."""
        series = self._series[venue_id]
        visible = series.bars[: bisect.bisect_right(series.starts, self.clock())]
        if timeframe == series.timeframe:
            return visible
        if timeframe.seconds % series.timeframe.seconds:
            raise ValueError(f"{timeframe} is not a multiple of {series.timeframe}")
        return _resample(visible, timeframe)

    def last_price(self, venue_id: str) -> Decimal | None:
        """Close of the last bar that has closed by now."""
        series = self._series[venue_id]
        now = self.clock()
        index = bisect.bisect_right(series.starts, now) - 1
        while index >= 0 and series.bars[index].end > now:
            index -= 1
        return decimal_from_float(series.bars[index].close) if index >= 0 else None

    def top_of_book(self, venue_id: str) -> tuple[Decimal, Decimal] | None:
        """(bid, ask) around the last price, on the instrument's tick grid."""
        price = self.last_price(venue_id)
        if price is None:
            return None
        tick = self._series[venue_id].instrument.tick_size
        half = price * self.spread_bps / Decimal(20_000)
        bid = ((price - half) / tick).to_integral_value(ROUND_FLOOR) * tick
        ask = ((price + half) / tick).to_integral_value(ROUND_CEILING) * tick
        if ask == bid:
            ask += tick
        return max(bid, tick), ask


def _resample(bars: Sequence[Bar], timeframe: Timeframe) -> list[Bar]:
    out: list[Bar] = []
    group: list[Bar] = []
    for bar in bars:
        if group and timeframe.floor(bar.start) != timeframe.floor(group[0].start):
            out.append(_merge(group, timeframe))
            group = []
        group.append(bar)
    if group:
        out.append(_merge(group, timeframe))
    return out


def _merge(group: Sequence[Bar], timeframe: Timeframe) -> Bar:
    quote_volumes = [b.quote_volume for b in group]
    return Bar(
        group[0].symbol,
        timeframe,
        timeframe.floor(group[0].start),
        group[0].open,
        max(b.high for b in group),
        min(b.low for b in group),
        group[-1].close,
        sum(b.volume for b in group),
        None if None in quote_volumes else sum(q for q in quote_volumes if q is not None),
    )
