"""Strategies: simple, ci_guard, maxdiff, and the consensus gate."""

from trader.strategy.base import (
    AtMarket,
    Costs,
    Decision,
    DecisionContext,
    Plan,
    RestingLimits,
    Strategy,
)
from trader.strategy.select import build_strategy, strategies_for

__all__ = [
    "AtMarket",
    "Costs",
    "Decision",
    "DecisionContext",
    "Plan",
    "RestingLimits",
    "Strategy",
    "build_strategy",
    "strategies_for",
]
