"""A market's trading rules: price and amount steps, minimum amount and notional."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, Decimal

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.side import Side
from trader.domain.symbols import check_symbol


@dataclass(frozen=True, slots=True)
class Instrument:
    symbol: str
    price_step: Decimal
    amount_step: Decimal
    min_amount: Decimal = ZERO
    min_notional: Decimal = ZERO
    # A short position's step, where the venue shorts coarser than it trades (Alpaca: whole
    # shares of a stock it trades in fractions); None: the amount step.
    short_step: Decimal | None = None
    # "perp": a linear perpetual (USDⓈ-margined, settled in the quote: funding, margin,
    # liquidation, shorts); "spot" else. Amounts are in the base asset, as ccxt gives them;
    # `contract_size` is the base asset per contract on the venue's own order book.
    kind: str = "spot"
    contract_size: Decimal = Decimal(1)

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        if self.kind not in ("spot", "perp"):
            raise DomainError(f"{self.symbol}: kind {self.kind!r} is neither spot nor perp")
        size = positive_decimal(self.contract_size, "contract size")
        object.__setattr__(self, "contract_size", size)
        object.__setattr__(self, "price_step", positive_decimal(self.price_step, "price step"))
        object.__setattr__(self, "amount_step", positive_decimal(self.amount_step, "amount step"))
        for name in ("min_amount", "min_notional"):
            value = to_decimal(getattr(self, name), name)
            if value < 0:
                raise DomainError(f"{name} must not be negative")
            object.__setattr__(self, name, value)
        if self.short_step is not None:
            object.__setattr__(self, "short_step", positive_decimal(self.short_step, "short step"))

    @property
    def is_perp(self) -> bool:
        return self.kind == "perp"

    def round_amount(self, amount: Decimal, *, short: bool = False) -> Decimal:
        """Down to the amount step (a short position's step for `short`): never more than
        was asked for."""
        step = self.short_step if short and self.short_step is not None else self.amount_step
        return (amount / step).to_integral_value(ROUND_DOWN) * step

    def round_price(self, price: Decimal, side: Side) -> Decimal:
        """To the price grid, on the side that never pays more (buy) or asks less (sell) than
        `price`."""
        rounding = ROUND_FLOOR if side is Side.BUY else ROUND_CEILING
        return (price / self.price_step).to_integral_value(rounding) * self.price_step

    def tradable(self, amount: Decimal, price: Decimal) -> bool:
        """Whether an order of `amount` at `price` meets the minimums."""
        with exact():
            notional = amount * price
        return amount > 0 and amount >= self.min_amount and notional >= self.min_notional
