"""Position sizing: a share of equity, capped per symbol and by the room left under the total
exposure cap, rounded down to the market's amount step and dropped below its minimums."""

from __future__ import annotations

from decimal import Decimal

from trader.domain import ZERO, Direction, Instrument


def target_amount(
    direction: Direction,
    *,
    equity: Decimal,
    price: Decimal,
    instrument: Instrument,
    fraction: float,
    max_position_notional: Decimal,
    room: Decimal,
) -> Decimal:
    """The signed amount to hold for `direction`; 0 when flat or too small to trade."""
    if direction is Direction.FLAT or equity <= 0:
        return ZERO
    notional = min(equity * Decimal(repr(fraction)), max_position_notional, max(room, ZERO))
    short = direction is Direction.SHORT
    amount = instrument.round_amount(notional / price, short=short)  # whole shares, where asked
    if not instrument.tradable(amount, price):
        return ZERO
    return amount if direction is Direction.LONG else -amount


def order_size(
    amount: Decimal, *, price: Decimal, instrument: Instrument, max_order_notional: Decimal
) -> Decimal:
    """`amount` (unsigned) capped at the largest order allowed, rounded, or 0 if untradable.
    A position larger than one order builds (or unwinds) over several ticks."""
    capped = min(amount, max_order_notional / price)
    rounded = instrument.round_amount(capped)
    return rounded if instrument.tradable(rounded, price) else ZERO
