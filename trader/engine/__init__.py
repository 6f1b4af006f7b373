"""The engine: one tick pipeline for backtest, paper and live."""

from trader.engine.pipeline import STAGES, Engine, EngineHooks, NoHooks, TickReport
from trader.engine.planning import Book, Intent, OrderPlan, Planner

__all__ = [
    "STAGES",
    "Book",
    "Engine",
    "EngineHooks",
    "Intent",
    "NoHooks",
    "OrderPlan",
    "Planner",
    "TickReport",
]
