"""Linear (USDⓈ-margined) perpetuals, one-way mode, as Binance counts them: leverage brackets,
margin, liquidation and bankruptcy prices, funding. Pure: no I/O, Decimal money."""

from trader.domain.perp.account import PerpAccount
from trader.domain.perp.brackets import Bracket, LeverageBrackets
from trader.domain.perp.funding import FundingSchedule, funding_payment, next_funding_time
from trader.domain.perp.liquidation import (
    MarginState,
    bankruptcy_price,
    distance_to_liquidation,
    holds_buffer,
    liquidation_bracket,
    liquidation_price,
    liquidation_price_in_bracket,
    margin_to_restore_buffer,
    reduction_for_buffer,
)
from trader.domain.perp.position import (
    MarginMode,
    PerpPosition,
    TradeResult,
    apply_trade,
    open_position,
    parse_margin_mode,
)

__all__ = [
    "Bracket",
    "FundingSchedule",
    "LeverageBrackets",
    "MarginMode",
    "MarginState",
    "PerpAccount",
    "PerpPosition",
    "TradeResult",
    "apply_trade",
    "bankruptcy_price",
    "distance_to_liquidation",
    "funding_payment",
    "holds_buffer",
    "liquidation_bracket",
    "liquidation_price",
    "liquidation_price_in_bracket",
    "margin_to_restore_buffer",
    "next_funding_time",
    "open_position",
    "parse_margin_mode",
    "reduction_for_buffer",
]
