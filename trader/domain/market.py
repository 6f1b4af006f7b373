"""What the market said: closed bars and the top of the book, each with its provenance."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, getcontext
from enum import StrEnum

from trader.domain.errors import DomainError
from trader.domain.money import exact, positive_decimal, to_decimal
from trader.domain.symbols import check_symbol
from trader.domain.time import Timeframe, ensure_utc


def _finite(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DomainError(f"{name} must be a number, got {type(value).__name__}")
    result = float(value)
    if not math.isfinite(result):
        raise DomainError(f"{name} must be finite, got {result}")
    return result


def _price(value: float, name: str) -> float:
    result = _finite(value, name)
    if result <= 0:
        raise DomainError(f"{name} must be positive, got {result}")
    return result


@dataclass(frozen=True, slots=True)
class Bar:
    """One closed OHLCV bar. `start` is the open time, as exchanges stamp bars.

    Prices are floats: bars feed the models as arrays. Orders and fills use Decimals.
    """

    symbol: str
    timeframe: Timeframe
    start: datetime
    open: float
    high: float
    low: float
    close: float
    volume: float
    quote_volume: float | None = None

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        if not isinstance(self.timeframe, Timeframe):
            raise DomainError(f"timeframe must be a Timeframe, got {self.timeframe!r}")
        object.__setattr__(self, "start", ensure_utc(self.start, "bar start"))
        for name in ("open", "high", "low", "close"):
            object.__setattr__(self, name, _price(getattr(self, name), f"bar {name}"))
        for name in ("volume", "quote_volume"):
            value = getattr(self, name)
            if value is None:
                continue
            value = _finite(value, f"bar {name}")
            if value < 0:
                raise DomainError(f"bar {name} must not be negative, got {value}")
            object.__setattr__(self, name, value)
        if self.high < max(self.open, self.close, self.low):
            raise DomainError(
                f"bar high {self.high} is below open/close/low "
                f"({self.open}/{self.close}/{self.low})"
            )
        if self.low > min(self.open, self.close):
            raise DomainError(f"bar low {self.low} is above open/close ({self.open}/{self.close})")

    @classmethod
    def unchecked(
        cls,
        symbol: str,
        timeframe: Timeframe,
        start: datetime,
        open_: float,
        high: float,
        low: float,
        close: float,
        volume: float,
        quote_volume: float | None,
    ) -> Bar:
        """A bar whose every field its caller has checked as `__post_init__` would (a
        recording's rows judged in bulk: `hygiene.parse_rows`), made without checking again."""
        bar = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(bar, "symbol", symbol)
        setattr_(bar, "timeframe", timeframe)
        setattr_(bar, "start", start)
        setattr_(bar, "open", open_)
        setattr_(bar, "high", high)
        setattr_(bar, "low", low)
        setattr_(bar, "close", close)
        setattr_(bar, "volume", volume)
        setattr_(bar, "quote_volume", quote_volume)
        return bar

    @property
    def end(self) -> datetime:
        """When the bar closed (and the next one opened)."""
        return self.start + self.timeframe.duration


class QuoteSource(StrEnum):
    """Where a bid/ask came from. Only REAL quotes were seen on an exchange."""

    REAL = "real"
    # Replay and backtest: derived from bars by a stated spread model.
    MODELLED = "modelled"
    # ADD_LATEST=0: bid = ask = last close. Its spread is unknown, never zero.
    SYNTHETIC = "synthetic"


def _derive(quotes: Sequence[Quote]) -> None:
    """Each quote's mid and spread in bps, worked out once (under one exact context for all:
    `spread` is this, when asked for)."""
    set_mid, set_spread_bps = Quote.__dict__["mid"].__set__, Quote.__dict__["spread_bps"].__set__
    outer = getcontext()  # the spread's share of the mid is not exact: the caller's context
    with exact():
        for quote in quotes:
            bid, ask = quote.bid, quote.ask
            mid = (bid + ask) / 2
            set_mid(quote, mid)  # the slot's own setter: `object.__setattr__` without the lookup
            if quote.source is QuoteSource.SYNTHETIC:
                set_spread_bps(quote, None)
            else:
                set_spread_bps(quote, float(outer.divide(ask - bid, mid)) * 10_000)


@dataclass(frozen=True, slots=True)
class Quote:
    """Top of the book at `at` (the exchange's timestamp for it)."""

    symbol: str
    bid: Decimal
    ask: Decimal
    at: datetime
    source: QuoteSource
    bid_size: Decimal | None = None
    ask_size: Decimal | None = None
    # Worked out once: a tick asks for them many times (sizing, risk, valuation).
    mid: Decimal = field(init=False, repr=False, compare=False)
    spread_bps: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        object.__setattr__(self, "bid", positive_decimal(self.bid, "bid"))
        object.__setattr__(self, "ask", positive_decimal(self.ask, "ask"))
        object.__setattr__(self, "at", ensure_utc(self.at, "quote time"))
        if not isinstance(self.source, QuoteSource):
            raise DomainError(f"quote source must be a QuoteSource, got {self.source!r}")
        if self.bid > self.ask:
            raise DomainError(f"crossed quote for {self.symbol}: bid {self.bid} > ask {self.ask}")
        if self.source is QuoteSource.SYNTHETIC and self.bid != self.ask:
            raise DomainError("a synthetic quote has bid = ask = the last close")
        for name in ("bid_size", "ask_size"):
            size = getattr(self, name)
            if size is not None:
                size = to_decimal(size, name)
                if size < 0:
                    raise DomainError(f"{name} must not be negative, got {size}")
                object.__setattr__(self, name, size)
        _derive((self,))

    @classmethod
    def unchecked_many(
        cls,
        symbol: str,
        bids: Sequence[Decimal],
        asks: Sequence[Decimal],
        times: Sequence[datetime],
        source: QuoteSource,
    ) -> list[Quote]:
        """Quotes (no sizes) of one symbol whose every field their caller has checked as
        `__post_init__` would: a checked symbol, finite positive Decimal bids and asks, each
        bid < its ask (bid = ask only when synthetic), UTC times (a replay plan's quotes:
        `trader.market.replay_plan_quotes`), made without checking again; their mids and
        spreads worked out as `__post_init__` does, all at once."""
        # Each slot's own setter (what `object.__setattr__` finds by name, for a frozen class).
        set_symbol, set_bid, set_ask, set_at, set_source, set_bid_size, set_ask_size = (
            cls.__dict__[name].__set__
            for name in ("symbol", "bid", "ask", "at", "source", "bid_size", "ask_size")
        )
        new = object.__new__
        quotes: list[Quote] = []
        for bid, ask, at in zip(bids, asks, times, strict=True):
            quote = new(cls)
            set_symbol(quote, symbol)
            set_bid(quote, bid)
            set_ask(quote, ask)
            set_at(quote, at)
            set_source(quote, source)
            set_bid_size(quote, None)
            set_ask_size(quote, None)
            quotes.append(quote)
        _derive(quotes)
        return quotes

    @classmethod
    def synthetic(cls, symbol: str, last_close: Decimal, at: datetime) -> Quote:
        return cls(symbol, last_close, last_close, at, QuoteSource.SYNTHETIC)

    @property
    def spread(self) -> Decimal | None:
        """ask - bid; None when unknown (synthetic), so no gate can read it as zero."""
        if self.source is QuoteSource.SYNTHETIC:
            return None
        with exact():
            return self.ask - self.bid

    def age(self, now: datetime) -> timedelta:
        return ensure_utc(now, "now") - self.at
