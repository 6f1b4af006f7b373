"""Fees a venue posts after the fills they charge, and the corrections they make.

Alpaca charges a crypto fill's fee in what the fill credits (the coin for a buy, dollars for a
sell) and a stock sale's regulatory fees in dollars, but writes them down only at the end of
the day, as activities that name no order (`CFEE`: one per fill, with the fill's price;
`FEE`: a day's regulatory fees of a symbol). A fill is booked with an estimated fee
(`Fill.fee_estimated`); when the postings of its day arrive, a `FeeCorrection` books the
posted fee beside the estimate, and the portfolio moves by the difference, in the asset charged.

Matching without an order id: postings and estimated fills meet by symbol, currency and day.
Where the postings of a group are one per fill with the fill's price (the documented CFEE),
each posting corrects the fill of the same price; otherwise the group's postings together
correct the group's fills together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from trader.domain.errors import DomainError
from trader.domain.fill import Fill
from trader.domain.money import ZERO, exact, positive_decimal, to_decimal
from trader.domain.portfolio import Portfolio
from trader.domain.side import Side
from trader.domain.symbols import base_currency, check_symbol

DayOf = Callable[[datetime], date]  # the venue's trading day of a time (Alpaca: New York's)


@dataclass(frozen=True)
class FeePosting:
    """One fee as the venue posted it: `amount` charged (negative: refunded) in `currency`,
    for `symbol`'s fills of `day`; `price`: the one fill's price when it posts per fill."""

    posting_id: str
    kind: str  # the venue's word for it: CFEE, FEE
    symbol: str
    currency: str
    amount: Decimal
    day: date
    price: Decimal | None = None

    def __post_init__(self) -> None:
        if not self.posting_id or not self.currency:
            raise DomainError("a fee posting names its id and its currency")
        check_symbol(self.symbol)
        object.__setattr__(self, "amount", to_decimal(self.amount, "posted fee"))
        if self.price is not None:
            object.__setattr__(self, "price", positive_decimal(self.price, "posting price"))


@dataclass(frozen=True)
class FeeCorrection:
    """The posted fees that replace the estimates of the fills they cover."""

    posting_ids: tuple[str, ...]
    fill_ids: tuple[str, ...]
    symbol: str
    currency: str
    day: date
    estimated: Decimal  # what those fills booked
    posted: Decimal  # what the venue charged for them
    price: Decimal  # what a fee in the base asset is worth (the fills' price)

    def __post_init__(self) -> None:
        if not self.posting_ids or not self.fill_ids:
            raise DomainError("a fee correction joins at least one posting and one fill")
        positive_decimal(self.price, "correction price")

    @property
    def difference(self) -> Decimal:
        """What the portfolio pays beyond the estimates (negative: it gets some back)."""
        with exact():
            return self.posted - self.estimated

    def describe(self) -> str:
        fills = len(self.fill_ids)
        return (
            f"{self.symbol} {self.day.isoformat()}: posted {self.posted} {self.currency} "
            f"({', '.join(self.posting_ids)}) for {fills} fill(s) estimated at "
            f"{self.estimated} {self.currency}: difference {self.difference} {self.currency}"
        )


def match(
    postings: Iterable[FeePosting], pending: Iterable[Fill], day_of: DayOf
) -> tuple[list[FeeCorrection], list[FeePosting]]:
    """Corrections for the postings that meet estimated fills of their symbol, currency and
    day, and the postings that meet none (a day whose fills the ledger does not hold)."""
    Key = tuple[str, str, date]
    fills: dict[Key, list[Fill]] = {}
    for fill in pending:
        if fill.fee_estimated:
            key = (fill.symbol, fill.fee_currency, day_of(fill.at))
            fills.setdefault(key, []).append(fill)
    groups: dict[Key, list[FeePosting]] = {}
    for posting in postings:
        groups.setdefault((posting.symbol, posting.currency, posting.day), []).append(posting)
    corrections: list[FeeCorrection] = []
    unmatched: list[FeePosting] = []
    for key, posts in sorted(groups.items(), key=lambda item: item[0][2]):
        covered = sorted(fills.get(key, []), key=lambda f: (f.at, f.fill_id))
        if not covered:
            unmatched += posts
            continue
        pairs = _one_per_fill(posts, covered)
        if pairs is None:
            corrections.append(_correction(posts, covered))
        else:
            corrections += [_correction([p], [f]) for p, f in pairs]
    return corrections, unmatched


def _one_per_fill(
    posts: Sequence[FeePosting], fills: Sequence[Fill]
) -> list[tuple[FeePosting, Fill]] | None:
    """Each posting with the fill of its price, when the postings are one per fill with the
    fills' prices (equal prices pair in time order: they move the portfolio alike)."""
    if len(posts) != len(fills) or any(p.price is None for p in posts):
        return None
    by_price = sorted(posts, key=lambda p: (p.price, p.posting_id))
    in_price = sorted(fills, key=lambda f: (f.price, f.at, f.fill_id))
    if [p.price for p in by_price] != [f.price for f in in_price]:
        return None
    return list(zip(by_price, in_price, strict=True))


def _correction(posts: Sequence[FeePosting], fills: Sequence[Fill]) -> FeeCorrection:
    first = posts[0]
    with exact():
        posted = sum((p.amount for p in posts), ZERO)
        estimated = sum((f.fee for f in fills), ZERO)
    # A day's total posting has no one price: the last fill's values a fee in the coin.
    return FeeCorrection(
        tuple(p.posting_id for p in posts), tuple(f.fill_id for f in fills), first.symbol,
        first.currency, first.day, estimated, posted, fills[-1].price,
    )  # fmt: skip


def corrected(portfolio: Portfolio, correction: FeeCorrection) -> Portfolio:
    """The portfolio after paying `correction.difference`, as `Portfolio.apply` pays a fee: in
    the cash currency out of cash; in the base asset out of the position, as if sold at the
    fills' price (cash untouched, the position what the venue holds)."""
    delta = correction.difference
    if delta == 0:
        return portfolio
    symbol = correction.symbol
    positions = dict(portfolio.positions)
    realized = dict(portfolio.realized_pnl)
    cash = portfolio.cash
    with exact():
        if correction.currency == portfolio.currency:
            cash -= delta
            fees = portfolio.fees_paid + delta
        elif correction.currency == base_currency(symbol):
            side = Side.SELL if delta > 0 else Side.BUY
            position, sold = portfolio.position(symbol).apply(side, abs(delta), correction.price)
            realized[symbol] = realized.get(symbol, ZERO) + sold
            if position.lots:
                positions[symbol] = position
            else:
                positions.pop(symbol, None)
            fees = portfolio.fees_paid + delta * correction.price
        else:
            raise DomainError(
                f"a fee posted in {correction.currency} for {symbol}: neither "
                f"{portfolio.currency} nor {base_currency(symbol)}"
            )
    return Portfolio(portfolio.currency, cash, positions, realized, fees)


def pending_by_asset(fills: Iterable[Fill]) -> dict[str, Decimal]:
    """What the estimated fees not yet posted add up to, by the asset they are charged in."""
    out: dict[str, Decimal] = {}
    with exact():
        for fill in fills:
            if fill.fee_estimated:
                out[fill.fee_currency] = out.get(fill.fee_currency, ZERO) + abs(fill.fee)
    return out


def posted_by_asset(
    corrections: Iterable[FeeCorrection], before: Mapping[str, Decimal] | None = None
) -> dict[str, Decimal]:
    """What the venue posted, by asset: `before` plus `corrections`."""
    out = dict(before or {})
    with exact():
        for correction in corrections:
            out[correction.currency] = out.get(correction.currency, ZERO) + correction.posted
    return out
