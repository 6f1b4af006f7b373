"""The parts of fills a shortfall attribution compares, and the position gap it carries.

A `Piece` is some quantity of one fill, with the decision quote it is measured against. Pieces
are cut by quantity (the first units filled come first); a fill cut in two shares its fee pro
rata, the second piece keeping exactly what the first did not take, so no money is lost or made
by cutting. A `Gap` is the difference between the two runs' positions in one symbol, held as
lots that each name the cause that opened them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Generic, TypeVar

from trader.domain.errors import DomainError
from trader.domain.fill import Fill
from trader.domain.money import ZERO, exact
from trader.domain.side import Side
from trader.domain.symbols import base_currency

# A cut fill's fee share is worked out to 1e-18 (the other piece takes the rest exactly).
_FEE_SHARE_QUANTUM = Decimal("1e-18")
_SHARE_CONTEXT = Context(prec=100, rounding=ROUND_HALF_EVEN)

Cause = TypeVar("Cause")


@dataclass(frozen=True, slots=True)
class Piece:
    side: Side
    amount: Decimal
    price: Decimal
    fee: Decimal  # its fee's value in the cash currency (see `fee_value`)
    mid: Decimal  # the mid of the quote its decision priced with
    half_spread: Decimal  # half that quote's spread
    mid_at_fill: Decimal | None  # the market's mid when it filled; None: not measured
    at: datetime

    @property
    def sign(self) -> int:
        return self.side.sign

    def value(self, end_mark: Decimal) -> Decimal:
        """What it adds to the run's P&L by the end: the move from its price to the end mark,
        less its fee."""
        with exact():
            return self.sign * self.amount * (end_mark - self.price) - self.fee

    def cost_parts(self) -> tuple[Decimal, Decimal, Decimal, Decimal]:
        """What it paid, `side * amount * price`, as (mid, spread, delay, slippage): the
        decision's mid, half its spread, the mid's move until the fill, and the rest."""
        with exact():
            mid = self.sign * self.amount * self.mid
            spread = self.amount * self.half_spread
            delay = (
                ZERO
                if self.mid_at_fill is None
                else self.sign * self.amount * (self.mid_at_fill - self.mid)
            )
            slippage = self.sign * self.amount * self.price - mid - spread - delay
        return mid, spread, delay, slippage


def fee_value(fill: Fill, currency: str, end_mark: Decimal) -> Decimal:
    """A fee in the cash currency is that much cash; a fee the venue took in the base asset
    left the position that much smaller, so it costs its amount at the end mark (as
    `Portfolio.apply` books it)."""
    if fill.fee_currency == currency:
        return fill.fee
    if fill.fee_currency == base_currency(fill.symbol):
        with exact():
            return fill.fee * end_mark
    raise DomainError(
        f"fill {fill.fill_id} charges its fee in {fill.fee_currency}, neither {currency} nor "
        f"{base_currency(fill.symbol)}: convert it before comparing"
    )


def _share(total: Decimal, part: Decimal, whole: Decimal) -> Decimal:
    """`total * part / whole`, to 1e-18: the share of a fee a cut piece takes."""
    with localcontext(_SHARE_CONTEXT):
        return (total * part / whole).quantize(_FEE_SHARE_QUANTUM)


def cut(pieces: Sequence[Piece], amount: Decimal) -> tuple[list[Piece], list[Piece]]:
    """The first `amount` of `pieces` (in their order), and the rest."""
    head: list[Piece] = []
    tail: list[Piece] = []
    left = amount
    with exact():
        for piece in pieces:
            if left <= 0:
                tail.append(piece)
            elif piece.amount <= left:
                head.append(piece)
                left -= piece.amount
            else:
                fee = _share(piece.fee, left, piece.amount)
                head.append(replace(piece, amount=left, fee=fee))
                tail.append(replace(piece, amount=piece.amount - left, fee=piece.fee - fee))
                left = ZERO
    if left > 0:
        raise DomainError(f"cannot cut {amount} from pieces of {amount - left}")
    return head, tail


def total(pieces: Iterable[Piece]) -> Decimal:
    with exact():
        return sum((piece.amount for piece in pieces), ZERO)


@dataclass
class _Lot(Generic[Cause]):
    cause: Cause
    amount: Decimal  # signed: actual's position minus modelled's


class Gap(Generic[Cause]):
    """One symbol's position difference (actual minus modelled), as lots by cause, oldest
    first. A cause's lot opens when that cause makes the positions differ; a later order that
    narrows the difference only because the runs held different positions closes lots of the
    other sign, oldest first, and what it closes is that cause's."""

    def __init__(self) -> None:
        self._lots: list[_Lot[Cause]] = []

    def open(self, cause: Cause, amount: Decimal) -> None:
        if amount:
            self._lots.append(_Lot(cause, amount))

    def close(self, amount: Decimal) -> tuple[list[tuple[Cause, Decimal]], Decimal]:
        """Close lots against the signed `amount`: the (cause, unsigned amount) closed, oldest
        first, and what is left of `amount` (same sign, or zero)."""
        closed: list[tuple[Cause, Decimal]] = []
        left = amount
        with exact():
            for lot in self._lots:
                if not left:
                    break
                if lot.amount * left >= 0:
                    continue
                taken = min(abs(lot.amount), abs(left))
                closed.append((lot.cause, taken))
                if lot.amount > 0:
                    lot.amount -= taken
                    left += taken
                else:
                    lot.amount += taken
                    left -= taken
        self._lots = [lot for lot in self._lots if lot.amount]
        return closed, left

    def lots(self) -> list[tuple[Cause, Decimal]]:
        return [(lot.cause, lot.amount) for lot in self._lots]
