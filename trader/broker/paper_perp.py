"""The paper broker's perpetuals: the margin an order needs, and reduce-only.

As Binance USDⓈ-M answers a one-way-mode account:
- an order that opens or adds to a position costs its initial margin (notional / leverage at
  its price) plus its open loss (size x how much its price is worse than the mark), Binance
  FAQ "How to Calculate Cost Required to Open a Position in Perpetual Futures Contracts"
  (https://www.binance.com/en/support/faq/87fa7ee33b574f7084d42bd2ce2e463b), out of the
  available balance (cross wallet + cross unrealised P&L - cross initial margin - the open
  orders' margin); more than there is is refused with -2019 "Margin is insufficient" (Binance
  USDⓈ-M error codes, as the futures emulator and `venue_errors` name them). A reversal
  closes first: its margin is freed before the part past the position is costed (Binance FAQ
  "How to Calculate the Margin Requirement on Binance Futures Trading",
  https://www.binance.com/en/support/faq/4f83b65d83654b5e933f85ef12bf769d, one-way mode:
  max(|position notional + bids|, |position notional - asks|) / leverage, which asks nothing
  more while the new side is no larger than the old; the futures emulator agrees,
  tests/integration/test_reversal_margin_parity.py);
- an order on the other side of a position, no larger than it, only reduces it: it needs no
  margin, is sent reduce-only, and fills at most what is still held when it fills (a position
  already gone refuses it: -2022 "ReduceOnly Order is rejected"); one larger than the
  position reverses it and needs the margin of the part past it.
The account is the engine's portfolio read as a `PerpAccount` (`from_portfolio`), seen by the
engine before its orders and moved here by every fill this broker makes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from decimal import Decimal

from trader.domain import Fill, Liquidity, Order, Portfolio, Side
from trader.domain.money import ZERO, exact
from trader.domain.perp import LeverageBrackets, MarginMode, parse_margin_mode
from trader.domain.perp.default_brackets import default_brackets
from trader.domain.perp.from_portfolio import perp_account, whole_leverage
from trader.domain.perp.rounding import quotient

MARGIN_INSUFFICIENT = "-2019 Margin is insufficient"
REDUCE_ONLY_REJECTED = "-2022 ReduceOnly Order is rejected"


class PaperPerps:
    """What the paper broker knows of a perp account between the engine's looks."""

    def __init__(
        self,
        symbols: Collection[str],
        brackets: Mapping[str, LeverageBrackets],
        *,
        leverage: int,
        margin_mode: MarginMode,
        currency: str,
    ) -> None:
        self.symbols = frozenset(symbols)
        self.brackets = dict(brackets)
        self.leverage = leverage
        self.margin_mode = margin_mode
        self.portfolio = Portfolio(currency, ZERO)
        self.marks: dict[str, Decimal] = {}
        self.reduce_only: set[str] = set()  # client order ids sent reduce-only
        self.isolated_funding: dict[str, Decimal] = {}

    def see(
        self,
        portfolio: Portfolio,
        marks: Mapping[str, Decimal],
        isolated_funding: Mapping[str, Decimal] | None = None,
    ) -> None:
        """The engine's portfolio and marks (and the funding its isolated positions paid),
        before its orders go out."""
        self.portfolio = portfolio
        self.marks = dict(marks)
        self.isolated_funding = dict(isolated_funding or {})

    def restored(self, portfolio: Portfolio, orders: Iterable[Order]) -> None:
        """The ledger's portfolio and open orders, at a start or after a rollback: an order on
        the other side of the position and no larger than it is reduce-only again (the flag
        is not in the ledger; it is judged on the position now)."""
        self.portfolio = portfolio
        self.reduce_only = {
            o.client_order_id
            for o in orders
            if o.symbol in self.symbols and self._opening(o.symbol, o.side, o.remaining) == 0
        }

    def filled(self, fill: Fill) -> None:
        if fill.symbol in self.symbols:
            self.portfolio = self.portfolio.apply(fill)

    def held(self, symbol: str) -> Decimal:
        return self.portfolio.amount(symbol)

    def _opening(self, symbol: str, side: Side, amount: Decimal) -> Decimal:
        """The part of an order of `amount` on `side` that opens or adds (the rest reduces)."""
        held = self.held(symbol)
        if held == 0 or (held > 0) == (side is Side.BUY):
            return amount
        with exact():
            return max(amount - abs(held), ZERO)

    def order_margin(self, orders: Iterable[Order]) -> Decimal:
        """The initial margin resting orders hold: the opening part of each at its limit."""
        total = ZERO
        for order in orders:
            if order.symbol not in self.symbols or order.limit_price is None:
                continue
            opening = self._opening(order.symbol, order.side, order.remaining)
            with exact():
                notional = opening * order.limit_price
            total += quotient(notional, Decimal(self.leverage))
        return total

    def refusal(self, order: Order, price: Decimal, resting: Iterable[Order]) -> str | None:
        """Why the venue would refuse `order` at `price` now (None: it would take it); marks it
        reduce-only when it only reduces."""
        if order.symbol not in self.symbols:
            return None
        opening = self._opening(order.symbol, order.side, order.amount)
        if opening == 0:
            self.reduce_only.add(order.client_order_id)
            return None
        marks = {**self.marks, order.symbol: self.marks.get(order.symbol, price)}
        portfolio = self.portfolio
        held = portfolio.amount(order.symbol)
        if opening < order.amount:  # a reversal: the position is closed first, its margin freed
            side = Side.SELL if held > 0 else Side.BUY
            closing = Fill(
                "margin-check", "margin-check", order.symbol, side, marks[order.symbol],
                abs(held), ZERO, portfolio.currency, Liquidity.TAKER, order.created_at,
            )  # fmt: skip
            portfolio = portfolio.apply(closing)
        account = perp_account(
            portfolio, self.brackets, leverage=self.leverage, margin_mode=self.margin_mode,
            isolated_funding={s: v for s, v in self.isolated_funding.items() if s in
                              portfolio.positions},
        )  # fmt: skip
        available = account.available_balance(marks, self.order_margin(resting))
        mark = marks[order.symbol]
        with exact():
            notional = opening * price
            # Open loss: what the order is worse than the mark ("Cost = Initial Margin + Open
            # Loss", Binance FAQ "How to Calculate Cost Required to Open a Position").
            open_loss = opening * max(ZERO, order.side.sign * (price - mark))
        needed = quotient(notional, Decimal(self.leverage)) + open_loss
        if needed > available:
            return (
                f"{MARGIN_INSUFFICIENT}: {order.symbol} needs {needed:.8f} (initial margin and "
                f"open loss) at {self.leverage}x, {available:.8f} available"
            )
        return None

    def fillable(self, order: Order, amount: Decimal) -> Decimal:
        """How much of `amount` a reduce-only order may fill: no more than is held against it."""
        if order.client_order_id not in self.reduce_only:
            return amount
        held = self.held(order.symbol)
        against = held < 0 if order.side is Side.BUY else held > 0
        return min(amount, abs(held)) if against else ZERO


def paper_perps(
    kind: str,
    symbols: Collection[str],
    currency: str,
    max_leverage: float,
    margin_mode: str,
) -> PaperPerps | None:
    """The paper broker's perpetuals for `market.kind` (None for spot): every symbol on the
    default brackets (`default_brackets`: no venue tells a paper account its own)."""
    if kind != "perp":
        return None
    return PaperPerps(
        symbols,
        {s: default_brackets(s) for s in symbols},
        leverage=whole_leverage(max_leverage),
        margin_mode=parse_margin_mode(margin_mode),
        currency=currency,
    )
