"""Plain types and exact arithmetic: no I/O, no torch, no clock. Everything else builds on these."""

from trader.domain.errors import DomainError
from trader.domain.fill import Fill, Liquidity
from trader.domain.forecast import Forecast
from trader.domain.instrument import Instrument
from trader.domain.market import Bar, Quote, QuoteSource
from trader.domain.money import ZERO, decimal_from_float, exact, positive_decimal, to_decimal
from trader.domain.order import Order, OrderStatus, OrderType, client_order_id
from trader.domain.portfolio import Lot, Portfolio, Position
from trader.domain.side import Side
from trader.domain.signal import Direction, Signal
from trader.domain.symbols import account_currency, base_currency, check_symbol, quote_currency
from trader.domain.time import Timeframe, ensure_utc, from_epoch_ms, to_epoch_ms

__all__ = [
    "ZERO",
    "Bar",
    "Direction",
    "DomainError",
    "Fill",
    "Forecast",
    "Instrument",
    "Liquidity",
    "Lot",
    "Order",
    "OrderStatus",
    "OrderType",
    "Portfolio",
    "Position",
    "Quote",
    "QuoteSource",
    "Side",
    "Signal",
    "Timeframe",
    "account_currency",
    "base_currency",
    "check_symbol",
    "client_order_id",
    "decimal_from_float",
    "ensure_utc",
    "exact",
    "from_epoch_ms",
    "positive_decimal",
    "quote_currency",
    "to_decimal",
    "to_epoch_ms",
]
