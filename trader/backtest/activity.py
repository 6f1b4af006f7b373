"""What a strategy's fills add up to: per-symbol equity, round-trip trades, exposure, turnover
and what trading cost (fees, spread, slippage).

A symbol's equity is the starting cash plus the cash its fills moved (fees included) plus its
position marked at the bar's close (the mid of the modelled quote): the account as if it had
traded that symbol alone. Every curve ends with open positions closed at the last bid or ask,
with slippage and the taker fee, as buy-and-hold is: no return counts a price it could not
have been sold at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import numpy as np

from trader.domain import Fill, Liquidity, Side

ZERO = Decimal(0)


@dataclass(frozen=True)
class ExitCosts:
    """Closing at the end: the half-spread, the market-order slippage and the taker fee, each
    as a fraction of the price."""

    half_spread: float
    slippage: float
    taker_fee: float

    def proceeds(self, amount: float, mid: float) -> float:
        """Cash for closing `amount` (signed: a long sells at the bid, a short buys at the ask)."""
        sign = 1.0 if amount > 0 else -1.0
        price = mid * (1 - sign * self.half_spread) * (1 - sign * self.slippage)
        return amount * price - abs(amount) * price * self.taker_fee

    def costs(self, amount: float, mid: float) -> Costs:
        """What closing `amount` (signed) at `mid` costs, as the cost columns count it."""
        if not amount:
            return Costs(0.0, 0.0, 0.0, 0.0)
        units, sign = abs(amount), (1.0 if amount > 0 else -1.0)
        touch = mid * (1 - sign * self.half_spread)
        price = touch * (1 - sign * self.slippage)
        return Costs(
            traded_notional=units * price,
            fees=units * price * self.taker_fee,
            spread=units * abs(mid - touch),
            slippage=units * abs(touch - price),
        )


@dataclass(frozen=True)
class Trade:
    """A round trip: from flat to flat (a flip closes one and opens the next)."""

    symbol: str
    direction: str  # long or short
    opened: datetime
    closed: datetime | None  # None: still open at the end, closed at the last bid/ask
    entry_notional: float
    pnl: float  # after fees

    @property
    def return_(self) -> float:
        return self.pnl / self.entry_notional if self.entry_notional else 0.0


@dataclass(frozen=True)
class SymbolCurve:
    equity: np.ndarray  # E_0 .. E_N, the last after closing out
    position: np.ndarray  # amount held after each tick
    closes: np.ndarray  # the marks
    closing_cost: float  # what closing out at the end cost against the last close

    @property
    def values(self) -> np.ndarray:
        """The position's value at each tick, signed."""
        values: np.ndarray = self.position * self.closes
        return values


def _signed(fill: Fill) -> Decimal:
    return fill.amount if fill.side is Side.BUY else -fill.amount


def fill_ms(fill: Fill) -> int:
    return int(fill.at.timestamp() * 1000)


def symbol_curve(
    fills: Sequence[Fill],
    ticks_ms: np.ndarray,
    closes: np.ndarray,
    starting_cash: float,
    exit_costs: ExitCosts,
) -> SymbolCurve:
    """Equity of one symbol's fills (`fills` in time order) after each tick."""
    times = np.array([fill_ms(f) for f in fills], dtype=np.int64)
    flows = np.array(
        [float(-_signed(f) * f.price - f.quote_fee) for f in fills], dtype=np.float64
    )  # cash each fill moved
    # Positions summed exactly: a float sum of decimal amounts could leave dust for flat.
    running = [ZERO]
    for fill in fills:
        running.append(running[-1] + _signed(fill))
    positions = np.array([float(amount) for amount in running], dtype=np.float64)
    upto = np.searchsorted(times, ticks_ms, side="right")  # fills booked by each tick
    cash = np.concatenate([[0.0], np.cumsum(flows)])[upto]
    held = positions[upto]
    equity = starting_cash + cash + held * closes
    closing_cost = 0.0
    if len(equity) and held[-1]:
        closing_cost = float(held[-1] * closes[-1] - exit_costs.proceeds(held[-1], closes[-1]))
        equity[-1] -= closing_cost
    return SymbolCurve(np.concatenate([[starting_cash], equity]), held, closes, closing_cost)


def round_trips(fills: Sequence[Fill], last_close: float, exit_costs: ExitCosts) -> list[Trade]:
    """One symbol's trades from its fills (in time order); a trade open at the end is closed
    at `last_close`'s bid or ask with `exit_costs`."""
    trades: list[Trade] = []
    position = ZERO
    cash = entry = 0.0
    opened: datetime | None = None
    for fill in fills:
        signed = _signed(fill)
        price, fee = float(fill.price), float(fill.quote_fee)
        remaining = signed
        if position and (position > 0) != (signed > 0):
            closing = min(abs(signed), abs(position))
            share = float(closing / abs(signed))
            part = closing if signed > 0 else -closing
            cash += -float(part) * price - fee * share
            position += part
            remaining = signed - part
            fee *= 1 - share
            if not position:
                assert opened is not None
                trades.append(Trade(
                    fill.symbol, "long" if part < 0 else "short", opened, fill.at, entry, cash
                ))  # fmt: skip
                cash = entry = 0.0
                opened = None
        if remaining:
            if not position:
                opened = fill.at
            cash += -float(remaining) * price - fee
            entry += float(abs(remaining)) * price
            position += remaining
    if position:
        assert opened is not None
        cash += exit_costs.proceeds(float(position), last_close)
        trades.append(Trade(
            fills[-1].symbol, "long" if position > 0 else "short", opened, None, entry, cash
        ))  # fmt: skip
    return trades


@dataclass(frozen=True)
class TradeStats:
    trades: int
    wins: int
    win_rate: float | None
    average_win: float | None  # cash
    average_loss: float | None  # cash, negative
    average_return: float | None  # per trade, on its entry notional
    profit_factor: float | None  # gross wins / gross losses
    open_at_end: int


def trade_stats(trades: Sequence[Trade]) -> TradeStats:
    wins = [t.pnl for t in trades if t.pnl > 0]
    losses = [t.pnl for t in trades if t.pnl <= 0]
    n = len(trades)
    return TradeStats(
        trades=n,
        wins=len(wins),
        win_rate=len(wins) / n if n else None,
        average_win=float(np.mean(wins)) if wins else None,
        average_loss=float(np.mean(losses)) if losses else None,
        average_return=float(np.mean([t.return_ for t in trades])) if n else None,
        profit_factor=sum(wins) / -sum(losses) if wins and sum(losses) < 0 else None,
        open_at_end=sum(1 for t in trades if t.closed is None),
    )


@dataclass(frozen=True)
class Costs:
    traded_notional: float
    fees: float
    spread: float  # paid crossing the spread (taker fills), against the mid
    slippage: float  # paid beyond the touch (taker fills)

    def __add__(self, other: Costs) -> Costs:
        return Costs(
            self.traded_notional + other.traded_notional,
            self.fees + other.fees,
            self.spread + other.spread,
            self.slippage + other.slippage,
        )


def trading_costs(
    fills: Sequence[Fill], mids: Mapping[str, Mapping[int, float]], slippage: float
) -> Costs:
    """`mids`: per symbol, the quote mid by time (epoch ms). A taker fill's price is the touch
    moved by `slippage`; what the touch is from the mid is spread, the rest slippage. Maker
    fills rest on the book and pay neither."""
    notional = fees = spread = slip = 0.0
    for fill in fills:
        price, amount = float(fill.price), float(fill.amount)
        notional += price * amount
        fees += float(fill.quote_fee)
        if fill.liquidity is Liquidity.TAKER:
            sign = 1.0 if fill.side is Side.BUY else -1.0
            touch = price / (1 + sign * slippage)
            spread += sign * (touch - mids[fill.symbol][fill_ms(fill)]) * amount
            slip += sign * (price - touch) * amount
    return Costs(notional, fees, spread, slip)


@dataclass(frozen=True)
class Exposure:
    time_in_market: float  # share of ticks holding a position
    average: float  # mean of |position value| / equity over the ticks
    turnover: float  # traded notional / mean equity, a year


def exposure(
    values: np.ndarray, equity: np.ndarray, traded_notional: float, years: float
) -> Exposure:
    """`values`: what was held at each tick, signed (or gross); `equity` E_0 .. E_N."""
    if not len(values):
        return Exposure(0.0, 0.0, 0.0)
    mean_equity = float(np.mean(equity))
    return Exposure(
        float(np.mean(values != 0)),
        float(np.mean(np.abs(values) / equity[1:])),
        traded_notional / mean_equity / years if years > 0 and mean_equity > 0 else 0.0,
    )
