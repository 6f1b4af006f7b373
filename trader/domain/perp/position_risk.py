"""What an operator reads of each perpetual position: side, size, leverage, margin, liquidation
price and its distance from the mark, unrealised P&L on the mark and the funding it paid. The
metrics, the dashboard and `trader reconcile` show these; a live broker's reconcile can build
them from the venue's own figures (positionRisk), the paper account from a `PerpAccount`.

Margin is what backs the position: an isolated position's wallet (positionRisk `isolatedWallet`),
a cross position's initial margin at the mark (|notional| / leverage, positionRisk
`initialMargin`), since a cross position has no margin of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from trader.domain.errors import DomainError
from trader.domain.perp.account import PerpAccount
from trader.domain.perp.liquidation import distance_to_liquidation, holds_buffer

_ZERO = Decimal(0)


@dataclass(frozen=True)
class PositionRisk:
    symbol: str
    size: Decimal  # signed: long positive, short negative
    entry_price: Decimal
    mark: Decimal
    leverage: int
    margin_mode: str  # "isolated" or "cross"
    margin: Decimal
    liquidation_price: Decimal | None  # None: Binance's "--"
    distance: Decimal | None  # (mark - LP) / mark for a long, (LP - mark) / mark for a short
    unrealised_pnl: Decimal
    # With no liquidation price: True for a position covered down to a zero price, False for
    # one whose account is below maintenance margin at any price (both show "--").
    safe_without_price: bool = True
    funding_paid: Decimal | None = None  # net, positive paid; None: not known here

    @property
    def side(self) -> str:
        return "long" if self.size > 0 else "short"

    @property
    def notional(self) -> Decimal:
        """|size| x mark."""
        return abs(self.size) * self.mark

    @classmethod
    def from_figures(
        cls,
        symbol: str,
        *,
        size: Decimal,
        entry_price: Decimal,
        mark: Decimal,
        leverage: int,
        margin_mode: str,
        margin: Decimal,
        liquidation_price: Decimal | None,
        unrealised_pnl: Decimal,
        funding_paid: Decimal | None = None,
    ) -> PositionRisk:
        """From figures a venue reports (positionRisk: positionAmt, entryPrice, markPrice,
        leverage, marginType, isolatedWallet or initialMargin, liquidationPrice with 0 read as
        none, unRealizedProfit), the distance computed here the same way as for the paper
        account. A venue's "--" for a position below maintenance cannot be told from a covered
        one: it reads as covered."""
        side = 1 if size > 0 else -1
        return cls(
            symbol=symbol,
            size=size,
            entry_price=entry_price,
            mark=mark,
            leverage=leverage,
            margin_mode=margin_mode,
            margin=margin,
            liquidation_price=liquidation_price,
            distance=distance_to_liquidation(side, mark, liquidation_price),
            unrealised_pnl=unrealised_pnl,
            funding_paid=funding_paid,
        )

    def describe(self) -> str:
        """One line of `trader reconcile`'s report."""
        if self.liquidation_price is None:
            liquidation = "liquidation -- (" + (
                "covered to a zero price)" if self.safe_without_price else "below maintenance)"
            )
        else:
            liquidation = (
                f"liquidation {self.liquidation_price:.8g} ({self.distance:.2%} from the mark)"
            )
        funding = ""
        if self.funding_paid is not None:
            verb = "received" if self.funding_paid < 0 else "paid"
            funding = f", funding {verb} {abs(self.funding_paid):.2f}"
        return (
            f"position {self.symbol}: {self.side} {abs(self.size)} @ entry {self.entry_price} "
            f"(mark {self.mark}), {self.leverage}x {self.margin_mode}, margin {self.margin:.2f}, "
            f"{liquidation}, unrealised {self.unrealised_pnl:.2f}{funding}"
        )

    def as_json(self) -> dict[str, str | int | None]:
        """Decimals as their text (exact); none: null."""

        def text(value: Decimal | None) -> str | None:
            return None if value is None else str(value)

        return {
            "symbol": self.symbol,
            "side": self.side,
            "size": str(self.size),
            "entry_price": str(self.entry_price),
            "mark": str(self.mark),
            "leverage": self.leverage,
            "margin_mode": self.margin_mode,
            "margin": str(self.margin),
            "liquidation_price": text(self.liquidation_price),
            "distance": text(self.distance),
            "unrealised_pnl": str(self.unrealised_pnl),
            "funding_paid": text(self.funding_paid),
        }

    def distance_or_bound(self) -> float:
        """The distance as a float, with no liquidation price read as +inf (covered) or -inf
        (below maintenance at any price): what a gauge and an alert compare."""
        if self.distance is not None:
            return float(self.distance)
        return float("inf") if self.safe_without_price else float("-inf")


def position_risks(
    account: PerpAccount,
    marks: Mapping[str, Decimal],
    funding_paid: Mapping[str, Decimal] | None = None,
) -> tuple[PositionRisk, ...]:
    """Each open position of `account` at `marks`, by symbol."""
    risks = []
    for symbol, position in sorted(account.positions.items()):
        if symbol not in marks:
            raise DomainError(f"{symbol}: no mark price")
        mark = marks[symbol]
        price = account.liquidation_price(symbol, marks)
        safe = True
        if price is None:
            state = account.margin_state(symbol, marks)
            safe = holds_buffer(state, account.brackets[symbol], mark, _ZERO)
        margin = position.isolated_wallet if position.isolated else position.initial_margin(mark)
        risks.append(
            PositionRisk(
                symbol=symbol,
                size=position.size,
                entry_price=position.entry_price,
                mark=mark,
                leverage=position.leverage,
                margin_mode=position.margin_mode.value,
                margin=margin,
                liquidation_price=price,
                distance=distance_to_liquidation(position.side, mark, price),
                unrealised_pnl=position.unrealised_pnl(mark),
                safe_without_price=safe,
                funding_paid=None if funding_paid is None else funding_paid.get(symbol, _ZERO),
            )
        )
    return tuple(risks)
