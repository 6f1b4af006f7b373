"""Liquidation and bankruptcy prices of a USDⓈ-M position in one-way mode, by Binance's formula.

Binance's FAQ "How to Calculate Liquidation Price of USDⓈ-M Futures Contracts"
(https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93):

    LP = (WB - TMM + UPNL + cumB - Side x Position x EP) / (Position x MMR_B - Side x Position)

WB the wallet balance (cross: crossWalletBalance; isolated: the position's isolated wallet),
TMM and UPNL the maintenance margin and unrealised P&L of the *other* cross positions (zero when
isolated), Side +1 long / -1 short, Position the absolute size, EP the entry price, MMR and cum
those of the bracket the notional at LP falls in ("if your position calculated at the liquidation
price and the current position are of different levels, substitute ... to recalculate"), and no
liquidation price ("--") when LP is negative.

Solving it is solving "margin balance = maintenance margin" at the price P:
    WB + UPNL + Side x Position x (P - EP) = TMM + Position x P x MMR - cum.
In the notional N = Position x P the surplus (left minus right) is linear within a bracket and,
because cum makes the maintenance margin continuous and every MMR is below 1, strictly monotone
(rising for a long, falling for a short). So exactly one bracket holds the root: it is found by
the surplus's sign at the bracket caps, with exact arithmetic, and the iteration the FAQ
describes ends there too. At a cap the two brackets give the same price; the upper one (whose
[floor, cap) holds the notional) is used. Past the last cap the last bracket's rate applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.perp.brackets import Bracket, LeverageBrackets
from trader.domain.perp.rounding import quotient

# Prices below this fraction of the entry price are the rounding of a zero price (a quotient has
# 50 significant digits): no liquidation price.
_NOISE = Decimal("1e-30")


@dataclass(frozen=True, slots=True)
class MarginState:
    """What the formula needs about one position and the margin that backs it.

    `wallet_balance` is WB; `other_maintenance` (TMM) and `other_unrealised` (UPNL) are those of
    the account's other cross positions at their mark prices, zero for an isolated position.
    """

    size: Decimal
    entry_price: Decimal
    wallet_balance: Decimal
    other_maintenance: Decimal = ZERO
    other_unrealised: Decimal = ZERO

    def __post_init__(self) -> None:
        size = to_decimal(self.size, "position size")
        if size == 0:
            raise DomainError("a liquidation price needs a non-zero position")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "entry_price", positive_decimal(self.entry_price, "entry price"))
        for name in ("wallet_balance", "other_maintenance", "other_unrealised"):
            object.__setattr__(self, name, to_decimal(getattr(self, name), name))

    @property
    def side(self) -> int:
        return 1 if self.size > 0 else -1

    @property
    def quantity(self) -> Decimal:
        return abs(self.size)

    @property
    def cover(self) -> Decimal:
        """WB + UPNL - TMM: what stands behind this position's own maintenance margin."""
        with exact():
            return self.wallet_balance + self.other_unrealised - self.other_maintenance

    def surplus(self, notional: Decimal, bracket: Bracket) -> Decimal:
        """Margin balance minus maintenance margin when this position's notional is `notional`
        (>= 0), with `bracket`'s rate: exact."""
        with exact():
            pnl = self.side * (notional - self.quantity * self.entry_price)
            return self.cover + pnl - (notional * bracket.maint_margin_ratio - bracket.cum)


def liquidation_price_in_bracket(state: MarginState, bracket: Bracket) -> Decimal | None:
    """Binance's formula with one bracket's MMR and cum; None where it is not positive ("--")."""
    with exact():
        numerator = state.cover + bracket.cum - state.side * state.quantity * state.entry_price
        denominator = state.quantity * (bracket.maint_margin_ratio - state.side)
    price = quotient(numerator, denominator)
    return price if _meaningful(price, state.entry_price) else None


def _meaningful(price: Decimal, entry: Decimal) -> bool:
    """A positive price above rounding noise: a 1x isolated long's price is zero in exact
    arithmetic, but a rounded entry or margin can leave 1e-46 of it."""
    with exact():
        return price > entry * _NOISE


def liquidation_bracket(state: MarginState, brackets: LeverageBrackets) -> Bracket | None:
    """The bracket the notional at the liquidation price falls in; None when there is no
    positive liquidation price (a long covered down to zero, a short already insolvent at 0)."""
    first = brackets.brackets[0]
    at_zero = state.surplus(ZERO, first)
    if (state.side > 0 and at_zero >= 0) or (state.side < 0 and at_zero <= 0):
        return None
    for bracket in brackets.brackets[:-1]:
        at_cap = state.surplus(bracket.notional_cap, bracket)
        # The surplus rises with the notional for a long and falls for a short: the root lies
        # below the first cap where it has changed sign.
        if (state.side > 0 and at_cap > 0) or (state.side < 0 and at_cap < 0):
            return bracket
    return brackets.brackets[-1]


def liquidation_price(state: MarginState, brackets: LeverageBrackets) -> Decimal | None:
    """The mark price at which the margin balance falls to the maintenance margin, with the
    bracket recomputed at that price; None when there is none."""
    bracket = liquidation_bracket(state, brackets)
    if bracket is None:
        return None
    return liquidation_price_in_bracket(state, bracket)


def bankruptcy_price(state: MarginState) -> Decimal | None:
    """The mark price at which the margin balance (WB + UPNL of the others + this position's
    P&L) is zero: where the exchange fills a liquidation. None where it is not positive."""
    with exact():
        cover = state.wallet_balance + state.other_unrealised
        numerator = state.side * state.quantity * state.entry_price - cover
    price = quotient(numerator, state.side * state.quantity)
    return price if _meaningful(price, state.entry_price) else None


def distance_to_liquidation(
    side: int, mark: Decimal, liquidation: Decimal | None
) -> Decimal | None:
    """How far the mark may move against the position before liquidation, as a fraction of the
    mark: (mark - LP) / mark for a long, (LP - mark) / mark for a short. Negative: past it.
    None: no liquidation price, which is safe for a long covered down to zero but, as Binance's
    "--", also shows a short whose account is below maintenance at any price; `holds_buffer`
    (a surplus at the buffer price) tells the two apart, so a risk rule should ask it."""
    mark = positive_decimal(mark, "mark price")
    if side not in (1, -1):
        raise DomainError("side must be +1 (long) or -1 (short)")
    if liquidation is None:
        return None
    with exact():
        gap = side * (mark - liquidation)
    return quotient(gap, mark)


def _buffer_price(side: int, mark: Decimal, buffer: Decimal) -> Decimal:
    """The price `buffer` away from the mark against the position (never below zero)."""
    with exact():
        price = mark * (1 - side * buffer)
    return max(price, ZERO)


def holds_buffer(
    state: MarginState, brackets: LeverageBrackets, mark: Decimal, buffer: Decimal
) -> bool:
    """Whether the liquidation price is at least `buffer` (a fraction of the mark) away: the
    surplus at the buffer price is not negative. Exact; no liquidation price counts as held."""
    price = _buffer_price(state.side, mark, buffer)
    with exact():
        notional = state.quantity * price
    return state.surplus(notional, brackets.bracket_for(notional)) >= 0


def _reduced(state: MarginState, quantity: Decimal, mark: Decimal, isolated: bool) -> MarginState:
    """The state after closing `quantity` at `mark`, fees aside. Cross: the realised P&L stays in
    the wallet. Isolated: the wallet is released in proportion to the size closed and the
    realised P&L goes to the cross wallet (as `apply_trade` books it)."""
    with exact():
        remaining = state.size - state.side * quantity
        realised = state.side * quantity * (mark - state.entry_price)
    if isolated:
        wallet = quotient(state.wallet_balance * abs(remaining), state.quantity)
    else:
        with exact():
            wallet = state.wallet_balance + realised
    return MarginState(
        remaining, state.entry_price, wallet, state.other_maintenance, state.other_unrealised
    )


def reduction_for_buffer(
    state: MarginState,
    brackets: LeverageBrackets,
    *,
    mark: Decimal,
    buffer: Decimal,
    step: Decimal,
    isolated: bool,
) -> Decimal:
    """The least amount (a multiple of `step`, at most the whole position) to close at `mark` so
    the distance to liquidation is back to at least `buffer`. Zero when it already is.

    Closing more never brings the liquidation price nearer (the surplus at the buffer price only
    grows as the size falls), so the least amount is found by bisection over whole steps. An
    isolated position keeps its margin per unit when reduced, so only the lower brackets of a
    smaller notional move its liquidation price: the answer may be the whole position, and
    `margin_to_restore_buffer` is then the cheaper remedy.
    """
    mark = positive_decimal(mark, "mark price")
    step = positive_decimal(step, "amount step")
    buffer = to_decimal(buffer, "liquidation buffer")
    if buffer < 0:
        raise DomainError("the liquidation buffer must not be negative")
    if holds_buffer(state, brackets, mark, buffer):
        return ZERO
    quantity = state.quantity
    steps = int(quotient(quantity, step).to_integral_value(ROUND_CEILING))
    low, high = 0, steps  # holds at `high` (flat), not at `low`
    while high - low > 1:
        middle = (low + high) // 2
        with exact():
            closed = min(middle * step, quantity)
        if closed == quantity or holds_buffer(
            _reduced(state, closed, mark, isolated), brackets, mark, buffer
        ):
            high = middle
        else:
            low = middle
    with exact():
        return min(high * step, quantity)


def margin_to_restore_buffer(
    state: MarginState, brackets: LeverageBrackets, *, mark: Decimal, buffer: Decimal
) -> Decimal:
    """The margin to add to the wallet so the distance to liquidation is at least `buffer`: the
    shortfall of the surplus at the buffer price (zero when there is none)."""
    mark = positive_decimal(mark, "mark price")
    price = _buffer_price(state.side, mark, to_decimal(buffer, "liquidation buffer"))
    with exact():
        notional = state.quantity * price
    shortfall = -state.surplus(notional, brackets.bracket_for(notional))
    return max(shortfall, ZERO)
