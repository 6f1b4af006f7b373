"""The engine: one tick pipeline for backtest, paper and live."""

from trader.engine.pipeline import Engine
from trader.engine.planning import Book, Intent, OrderPlan, Planner
from trader.engine.report import STAGES, EngineHooks, NoHooks, TickReport

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
