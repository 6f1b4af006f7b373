"""What a demo run did, read back from its ledger: the same reading a backtest makes of its own
ledgers, so the figures printed are the ledger's and nothing else."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trader.backtest.simulate import read_run
from trader.backtest.stats import drawdown
from trader.domain import Fill


@dataclass(frozen=True)
class DemoSummary:
    ticks: int
    outcomes: dict[str, int]  # ticks by outcome: ok, degraded, failed
    skipped: dict[str, int]  # symbol-ticks skipped, by reason
    decisions: dict[str, int]  # by direction
    orders: dict[str, int]  # by final status
    fills: int
    fees: dict[str, float]  # by currency
    starting_cash: float
    equity: float  # at the last snapshot
    max_drawdown: float  # a share of the peak

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self, currency: str) -> list[str]:
        change = self.equity / self.starting_cash - 1 if self.starting_cash else 0.0
        skipped = sum(self.skipped.values())
        return [
            f"ticks      {self.ticks} ({_counts(self.outcomes)})",
            f"skipped    {skipped} symbol-ticks"
            + (f" ({_counts(self.skipped)})" if skipped else ""),
            f"decisions  {sum(self.decisions.values())} ({_counts(self.decisions)})",
            f"orders     {sum(self.orders.values())} ({_counts(self.orders)})",
            f"fills      {self.fills} (fees {_amounts(self.fees)})",
            f"equity     {self.starting_cash:,.2f} -> {self.equity:,.2f} {currency} "
            f"({change:+.2%}; max drawdown {self.max_drawdown:.2%})",
        ]


def read_summary(ledger: Path, symbols: list[str]) -> DemoSummary:
    run = asyncio.run(read_run("demo", ledger, symbols=symbols))
    equity = float(run.equity[-1]) if len(run.equity) else run.starting_cash
    return DemoSummary(
        ticks=sum(run.outcomes.values()),
        outcomes=dict(run.outcomes),
        skipped=dict(run.skipped),
        decisions=dict(run.decisions),
        orders=dict(run.orders),
        fills=len(run.fills),
        fees=_fees(run.fills),
        starting_cash=run.starting_cash,
        equity=equity,
        max_drawdown=drawdown(run.equity).depth if len(run.equity) else 0.0,
    )


def _counts(counts: dict[str, int]) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _fees(fills: tuple[Fill, ...]) -> dict[str, float]:
    fees: dict[str, float] = {}
    for fill in fills:
        fees[fill.fee_currency] = fees.get(fill.fee_currency, 0.0) + float(fill.fee)
    return fees


def _amounts(amounts: dict[str, float]) -> str:
    return ", ".join(f"{value:,.2f} {currency}" for currency, value in amounts.items()) or "none"
