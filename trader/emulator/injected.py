"""Costs a test injects into the emulated venue's takers, of a known size, to see them come
back in `trader shortfall`'s attribution (`trader sandbox --slippage-bps/--market-fill-share`).

- Slippage: a taker meets a book `bps` worse than the top of book quoted (rounded a tick
  further out), as when the book moved between the quote and the order.
- A thin book: a market order fills at most `share` of its quantity, and the rest EXPIRES,
  as an order larger than the book does: partial fills.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, Decimal


def slipped(
    levels: list[tuple[Decimal, Decimal]], bps: Decimal, tick: Decimal, side: str
) -> list[tuple[Decimal, Decimal]]:
    """`levels` (price, quantity; best first) moved `bps` against a taker on `side`."""
    if not bps or not levels:
        return levels
    touch = levels[0][0]
    sign = 1 if side == "BUY" else -1
    moved = touch * (1 + sign * bps / Decimal(10_000))
    rounding = ROUND_CEILING if side == "BUY" else ROUND_FLOOR
    shift = (moved / tick).to_integral_value(rounding) * tick - touch
    return [(price + shift, size) for price, size in levels if price + shift > 0]


def left_unfilled(quantity: Decimal, share: Decimal, step: Decimal) -> Decimal:
    """What of a market order of `quantity` the book cannot hold, at `share` of it."""
    if share >= 1:
        return Decimal(0)
    held = (quantity * share / step).to_integral_value(ROUND_DOWN) * step
    return quantity - held
