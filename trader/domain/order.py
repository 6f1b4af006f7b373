"""Orders: deterministic client order ids and an explicit status state machine."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from trader.domain.errors import DomainError
from trader.domain.fill import Fill
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.side import Side
from trader.domain.symbols import check_symbol
from trader.domain.time import ensure_utc

# 32 characters of [0-9a-z] fit every major venue's client-id rules (Binance allows 36, OKX 32).
_CLIENT_ORDER_ID = re.compile(r"^[0-9A-Za-z_-]{1,36}$")


class OrderType(StrEnum):
    MARKET = "market"
    LIMIT = "limit"


class OrderStatus(StrEnum):
    PENDING = "pending"  # recorded, not yet sent
    SUBMITTED = "submitted"  # sent, no answer yet
    UNKNOWN = "unknown"  # sent, answer lost (timeout): look it up before anything else
    OPEN = "open"
    PARTIALLY_FILLED = "partially_filled"
    FILLED = "filled"
    CANCELED = "canceled"
    REJECTED = "rejected"
    EXPIRED = "expired"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {OrderStatus.FILLED, OrderStatus.CANCELED, OrderStatus.REJECTED, OrderStatus.EXPIRED}
)
_AFTER_SEND = frozenset(
    {
        OrderStatus.OPEN,
        OrderStatus.PARTIALLY_FILLED,
        OrderStatus.FILLED,
        OrderStatus.CANCELED,
        OrderStatus.REJECTED,
        OrderStatus.EXPIRED,
    }
)
_TRANSITIONS: dict[OrderStatus, frozenset[OrderStatus]] = {
    OrderStatus.PENDING: frozenset(
        {OrderStatus.SUBMITTED, OrderStatus.REJECTED, OrderStatus.CANCELED}
    ),
    OrderStatus.SUBMITTED: _AFTER_SEND | {OrderStatus.UNKNOWN},
    OrderStatus.UNKNOWN: _AFTER_SEND,
    OrderStatus.OPEN: (_AFTER_SEND - {OrderStatus.OPEN, OrderStatus.REJECTED})
    | {OrderStatus.UNKNOWN},
    OrderStatus.PARTIALLY_FILLED: frozenset(
        {
            OrderStatus.PARTIALLY_FILLED,
            OrderStatus.FILLED,
            OrderStatus.CANCELED,
            OrderStatus.EXPIRED,
            OrderStatus.UNKNOWN,
        }
    ),
    OrderStatus.FILLED: frozenset(),
    OrderStatus.CANCELED: frozenset(),
    OrderStatus.REJECTED: frozenset(),
    OrderStatus.EXPIRED: frozenset(),
}
# A fill can be reported after we saw the order cancelled or expired (it traded first); it must
# still be booked. A rejected order never traded.
_MAY_FILL = frozenset(_TRANSITIONS) - {OrderStatus.PENDING, OrderStatus.REJECTED}


def client_order_id(strategy: str, symbol: str, tick_time: datetime, leg: str) -> str:
    """The same decision (strategy, symbol, tick, leg) always yields the same id, so a restart
    or a retry finds the order it already placed instead of placing it twice."""
    for name, value in (("strategy", strategy), ("leg", leg)):
        if not value:
            raise DomainError(f"client order id: {name} is empty")
    key = "\x1f".join(
        ("v1", strategy, check_symbol(symbol), ensure_utc(tick_time, "tick time").isoformat(), leg)
    )
    return "t" + hashlib.sha256(key.encode()).hexdigest()[:31]


@dataclass(frozen=True, slots=True)
class Order:
    client_order_id: str
    strategy: str
    symbol: str
    side: Side
    type: OrderType
    amount: Decimal
    limit_price: Decimal | None
    created_at: datetime
    status: OrderStatus = OrderStatus.PENDING
    filled_amount: Decimal = ZERO
    expires_at: datetime | None = None
    exchange_order_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.client_order_id, str) or not _CLIENT_ORDER_ID.match(
            self.client_order_id
        ):
            raise DomainError(
                f"client order id {self.client_order_id!r} is not 1-36 of [0-9A-Za-z_-]"
            )
        if not self.strategy:
            raise DomainError("order strategy is empty")
        check_symbol(self.symbol)
        for name, kind in (("side", Side), ("type", OrderType), ("status", OrderStatus)):
            if not isinstance(getattr(self, name), kind):
                raise DomainError(f"order {name} must be a {kind.__name__}")
        object.__setattr__(self, "amount", positive_decimal(self.amount, "order amount"))
        if self.type is OrderType.LIMIT:
            if self.limit_price is None:
                raise DomainError("a limit order needs a limit price")
            limit = positive_decimal(self.limit_price, "limit price")
            object.__setattr__(self, "limit_price", limit)
        elif self.limit_price is not None:
            raise DomainError("a market order has no limit price")
        object.__setattr__(self, "created_at", ensure_utc(self.created_at, "order created_at"))
        if self.expires_at is not None:
            expires = ensure_utc(self.expires_at, "order expires_at")
            if expires <= self.created_at:
                raise DomainError("order expires before it is created")
            object.__setattr__(self, "expires_at", expires)
        filled = to_decimal(self.filled_amount, "filled amount")
        if not ZERO <= filled <= self.amount:
            raise DomainError(f"filled amount {filled} is outside [0, {self.amount}]")
        object.__setattr__(self, "filled_amount", filled)
        if self.status is OrderStatus.FILLED and filled != self.amount:
            raise DomainError("a FILLED order has its whole amount filled")

    @classmethod
    def create(
        cls,
        *,
        strategy: str,
        symbol: str,
        side: Side,
        type: OrderType,
        amount: Decimal,
        limit_price: Decimal | None,
        tick_time: datetime,
        leg: str,
        expires_at: datetime | None = None,
    ) -> Order:
        """A new PENDING order whose id is derived from the decision that made it."""
        return cls(
            client_order_id=client_order_id(strategy, symbol, tick_time, leg),
            strategy=strategy,
            symbol=symbol,
            side=side,
            type=type,
            amount=amount,
            limit_price=limit_price,
            created_at=tick_time,
            expires_at=expires_at,
        )

    @property
    def remaining(self) -> Decimal:
        with exact():
            return self.amount - self.filled_amount

    def transition(self, status: OrderStatus) -> Order:
        if status not in _TRANSITIONS[self.status]:
            raise DomainError(
                f"order {self.client_order_id}: {self.status} -> {status} is not allowed"
            )
        if status is OrderStatus.FILLED and self.filled_amount != self.amount:
            raise DomainError(f"order {self.client_order_id}: FILLED needs its fills first")
        return self._evolve(status=status)

    def with_fill(self, fill: Fill) -> Order:
        """The order after `fill`; its status follows unless it already ended (late fill)."""
        if fill.client_order_id != self.client_order_id:
            raise DomainError(f"fill for {fill.client_order_id} applied to {self.client_order_id}")
        if (fill.symbol, fill.side) != (self.symbol, self.side):
            raise DomainError(f"fill {fill.fill_id} does not match order {self.client_order_id}")
        if self.status not in _MAY_FILL:
            raise DomainError(f"order {self.client_order_id} is {self.status} and cannot fill")
        with exact():
            filled = self.filled_amount + fill.amount
        if filled > self.amount:
            raise DomainError(
                f"fill {fill.fill_id} overfills order {self.client_order_id}: "
                f"{filled} > {self.amount}"
            )
        status = self.status
        if not status.is_terminal:
            status = OrderStatus.FILLED if filled == self.amount else OrderStatus.PARTIALLY_FILLED
        return self._evolve(filled_amount=filled, status=status)

    def _evolve(self, **changes: object) -> Order:
        """A copy with `changes`. Only transitions use it, and their own checks keep every
        invariant `__post_init__` checks, so the full re-validation is skipped."""
        order = object.__new__(Order)
        for slot in _SLOTS:  # each field's slot set directly: no frozen __setattr__ per field
            slot.__set__(order, slot.__get__(self))
        for name, value in changes.items():
            _SLOT_OF[name].__set__(order, value)
        return order


# The slots' descriptors, by field: `_evolve` copies an order through them.
_SLOT_OF = {f.name: Order.__dict__[f.name] for f in fields(Order)}
_SLOTS = tuple(_SLOT_OF.values())
