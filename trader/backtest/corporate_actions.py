"""What a reader must know about corporate actions in the prices a backtest traded: a one-bar
move like a split (raw prices: see `trader.market.files.splits`), with its date, its ratio and
the return each strategy and buy-and-hold booked on that bar. A split booked as a loss of half
the position is no loss a holder had: the figures around it are wrong by that much."""

from __future__ import annotations

import numpy as np

from trader.backtest.run import BUY_AND_HOLD, Backtest
from trader.domain import Timeframe


def split_findings(result: Backtest) -> list[str]:
    """One text per split-like move in a symbol's traded prices, with its effect on each
    line of that symbol (its own equity curve's return over the tick that first marked the
    bar's close)."""
    step_ms = Timeframe(result.settings.market.timeframe).seconds * 1000
    found = []
    for symbol, moves in result.splits.items():
        for move in moves:
            effect = _effect(result, symbol, move.start_ms + step_ms)
            if move.adjusted_move is not None and effect.startswith("booked"):
                effect += "; --prices adjusted trades the prices a holder lived through"
            found.append(f"{symbol}: {move.day}: {move.describe()}; {effect}")
    return found


def _effect(result: Backtest, symbol: str, close_ms: int) -> str:
    """What each line of `symbol` booked over the tick that first marked the close at
    `close_ms` (its equity's point at + 1 is that tick's)."""
    ticks = result.ticks_ms
    if close_ms < int(ticks[0]):
        return (
            "before the period's first tick: no return booked on it (a model window holding it "
            "saw the drop)"
        )
    at = int(np.searchsorted(ticks, close_ms, side="left"))
    if at >= len(ticks):
        return "after the period's last tick: no return booked on it"
    booked = [
        f"{'buy & hold' if line.strategy == BUY_AND_HOLD else line.strategy} "
        f"{float(line.equity[at + 1] / line.equity[at] - 1):+.2%}"
        for line in result.lines
        if line.symbol == symbol
    ]
    return f"booked on that bar as a real move: {', '.join(booked)}"
