"""Buy-and-hold, the baseline every strategy is measured against.

All of the starting cash buys the symbol at the ask of the first tick the strategies could
trade it (so both cover the same ticks), with the paper broker's slippage and taker fee; the
position is marked at each close (the mid) and sold at the last tick's bid, again with
slippage and the fee. With closes c_k .. c_N from that tick k, half-spreads h, slippage s and
fee f, its total return is

    c_N (1 - h_N)(1 - s)(1 - f) / (c_k (1 + h_k)(1 + s)(1 + f)) - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trader.backtest.activity import Costs, ExitCosts


@dataclass(frozen=True)
class Holding:
    equity: np.ndarray  # E_0 .. E_N, the last after selling
    position: np.ndarray  # units held after each tick
    costs: Costs


def buy_and_hold(
    closes: np.ndarray,
    starting_cash: float,
    entry_half_spread: float,
    exit_costs: ExitCosts,
    start: int = 0,
) -> Holding:
    """Buy-and-hold over closes c_1 .. c_N at the ticks, bought at tick `start` (0-based)."""
    first, last = float(closes[start]), float(closes[-1])
    ask = first * (1 + entry_half_spread)
    entry = ask * (1 + exit_costs.slippage)
    units = starting_cash / (entry * (1 + exit_costs.taker_fee))
    position = np.where(np.arange(len(closes)) >= start, units, 0.0)
    marked = np.where(position > 0, position * np.asarray(closes, dtype=np.float64), starting_cash)
    equity = np.concatenate([[starting_cash], marked])
    equity[-1] = exit_costs.proceeds(units, last)
    buying = Costs(
        traded_notional=units * entry,
        fees=units * entry * exit_costs.taker_fee,
        spread=units * (ask - first),
        slippage=units * (entry - ask),
    )
    return Holding(equity, position, buying + exit_costs.costs(units, last))
