"""Buy-and-hold, the baseline every strategy is measured against.

All of the starting cash buys the symbol at the first tick's ask, with the paper broker's
slippage and taker fee; the position is marked at each close (the mid) and sold at the last
tick's bid, again with slippage and the fee. With closes c_1 .. c_N, half-spreads h, slippage s
and fee f, its total return is

    c_N (1 - h_N)(1 - s)(1 - f) / (c_1 (1 + h_1)(1 + s)(1 + f)) - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trader.backtest.activity import Costs, ExitCosts


@dataclass(frozen=True)
class Holding:
    equity: np.ndarray  # E_0 .. E_N, the last after selling
    units: float
    costs: Costs


def buy_and_hold(
    closes: np.ndarray, starting_cash: float, entry_half_spread: float, exit_costs: ExitCosts
) -> Holding:
    """Buy-and-hold over closes c_1 .. c_N at the ticks."""
    first, last = float(closes[0]), float(closes[-1])
    ask = first * (1 + entry_half_spread)
    entry = ask * (1 + exit_costs.slippage)
    units = starting_cash / (entry * (1 + exit_costs.taker_fee))
    equity = np.concatenate([[starting_cash], units * np.asarray(closes, dtype=np.float64)])
    equity[-1] = exit_costs.proceeds(units, last)
    bid = last * (1 - exit_costs.half_spread)
    exit_ = bid * (1 - exit_costs.slippage)
    costs = Costs(
        traded_notional=units * (entry + exit_),
        fees=units * (entry + exit_) * exit_costs.taker_fee,
        spread=units * ((ask - first) + (last - bid)),
        slippage=units * ((entry - ask) + (bid - exit_)),
    )
    return Holding(equity, units, costs)
