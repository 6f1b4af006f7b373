"""A trade against one of our orders, as the venue (or the paper fill model) reported it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from trader.domain.errors import DomainError
from trader.domain.money import exact, positive_decimal, to_decimal
from trader.domain.side import Side
from trader.domain.symbols import base_currency, check_symbol
from trader.domain.time import ensure_utc


class Liquidity(StrEnum):
    MAKER = "maker"
    TAKER = "taker"


@dataclass(frozen=True, slots=True)
class Fill:
    """`fee` is in `fee_currency`; negative means a rebate. `fill_id` is unique per venue.
    `fee_estimated`: the venue posts the fee later (Alpaca, at the end of the day); `fee` is
    the estimate from the account's fee tier until the posting corrects it
    (`trader.domain.fee_posting`)."""

    fill_id: str
    client_order_id: str
    symbol: str
    side: Side
    price: Decimal
    amount: Decimal
    fee: Decimal
    fee_currency: str
    liquidity: Liquidity
    at: datetime
    fee_estimated: bool = False

    def __post_init__(self) -> None:
        if not self.fill_id or not self.client_order_id:
            raise DomainError("a fill names its own id and its order's client id")
        check_symbol(self.symbol)
        if not isinstance(self.side, Side) or not isinstance(self.liquidity, Liquidity):
            raise DomainError("fill side and liquidity must be a Side and a Liquidity")
        object.__setattr__(self, "price", positive_decimal(self.price, "fill price"))
        object.__setattr__(self, "amount", positive_decimal(self.amount, "fill amount"))
        object.__setattr__(self, "fee", to_decimal(self.fee, "fill fee"))
        if not self.fee_currency:
            raise DomainError("fill fee currency is empty")
        object.__setattr__(self, "at", ensure_utc(self.at, "fill time"))

    @property
    def notional(self) -> Decimal:
        with exact():
            return self.price * self.amount

    @property
    def quote_fee(self) -> Decimal:
        """The fee in the symbol's quote currency: a fee charged in the base asset (Binance
        charges a buy's fee in what it bought) counts at the fill price."""
        if self.fee_currency == base_currency(self.symbol):
            with exact():
                return self.fee * self.price
        return self.fee
