"""Risk: sizing, pre-trade checks, and the trading state."""

from trader.risk.engine import OrderCheck, RiskEngine, Verdict
from trader.risk.marks import DayMarks
from trader.risk.sizing import order_size, target_amount
from trader.risk.state import TradingState, TradingStatus

__all__ = [
    "DayMarks",
    "OrderCheck",
    "RiskEngine",
    "TradingState",
    "TradingStatus",
    "Verdict",
    "order_size",
    "target_amount",
]
