"""Reconciliation: what the broker says happened, against what the ledger holds.

A broker answers `reconcile(book, at)` with a `ReconcileReport`: the order changes and fills
the ledger has not booked yet (they happened while the daemon was down or not looking), the
orders on the venue the ledger does not know, and the account's balances against what the
ledger implies. The engine books the fills; anything left unexplained makes the report not ok,
and a not-ok report halts trading until a person has looked.

Balances are compared as changes since a baseline taken when the ledger's account was opened
(`LedgerBook.baseline`): the daemon may trade with a part of the account (the capital cap),
and the rest of it must not move either. Expected = baseline + what the ledger's fills moved.

A venue that posts fees after the fills (Alpaca) leaves the ledger with estimates until then:
a balance that differs by no more than the estimates still to be posted in that asset is
explained (and says so); once they are posted, balances must agree exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from trader.domain.execution import Execution
from trader.domain.fee_posting import FeeCorrection, corrected
from trader.domain.fill import Fill
from trader.domain.money import ZERO, exact
from trader.domain.order import Order
from trader.domain.perp.position_risk import PositionRisk
from trader.domain.portfolio import Portfolio


@dataclass(frozen=True)
class LedgerBook:
    """What the ledger holds, as a broker's reconciliation needs it."""

    portfolio: Portfolio
    starting_cash: Decimal
    open_orders: Sequence[Order]  # every order not yet terminal, PENDING and UNKNOWN included
    known_orders: frozenset[str]  # client ids of every order the ledger has ever recorded
    booked_fills: frozenset[str]  # fill ids already booked
    # The venue's balances (asset -> total) when the account was opened; None for paper.
    baseline: Mapping[str, Decimal] | None = None
    # Orders the ledger touched lately, by the venue's order id: late fills find them here.
    recent_orders: Mapping[str, Order] = field(default_factory=dict)
    # Fills whose fee is an estimate the venue has not posted yet, and the postings booked.
    pending_fees: Sequence[Fill] = ()
    booked_postings: frozenset[str] = frozenset()
    posted_fees: Mapping[str, Decimal] = field(default_factory=dict)  # by asset, all booked
    # A perpetual account's funding rows booked from the venue, by the venue's id; None: the
    # ledger keeps none (its cash then holds no venue funding).
    venue_funding: Mapping[str, VenueFunding] | None = None


@dataclass(frozen=True)
class VenueFunding:
    """A funding row as the venue booked it: `amount` is its income (+ received, - paid)."""

    venue_id: str
    symbol: str
    amount: Decimal
    at: datetime


@dataclass(frozen=True)
class VenueLiquidation:
    """A position the venue liquidated, closed by the fill `fill_id` (booked with the report):
    what the ledger records of it. The venue does not say the mark that triggered it."""

    fill_id: str
    symbol: str
    at: datetime
    position: Decimal  # signed, before it was closed
    trigger_mark: Decimal
    liquidation_price: Decimal
    close_price: Decimal  # the venue's fill price
    fee: Decimal
    margin_mode: str


@dataclass(frozen=True)
class ForeignOrder:
    """An open order on the venue that the ledger does not know, and what was done about it."""

    symbol: str
    exchange_order_id: str
    client_order_id: str | None
    side: str
    amount: Decimal
    price: Decimal | None
    action: str  # "left alone", "cancelled", "cancel failed: ..."


@dataclass(frozen=True)
class BalanceCheck:
    asset: str
    expected: Decimal  # baseline + what the ledger's fills moved
    actual: Decimal  # the venue's total (free + used)
    pending: Decimal = ZERO  # estimated fees in this asset the venue has not posted yet

    @property
    def difference(self) -> Decimal:
        with exact():
            return self.actual - self.expected

    @property
    def ok(self) -> bool:
        """Equal, or apart by no more than the fee estimates still to be posted."""
        return abs(self.difference) <= self.pending

    @property
    def explained(self) -> str | None:
        """Why a balance that differs is ok, None where it agrees exactly or is not ok."""
        if self.difference == 0 or not self.ok:
            return None
        return (
            f"{self.asset}: the venue holds {self.actual}, the ledger implies {self.expected} "
            f"(difference {self.difference}), within the {self.pending} {self.asset} of fee "
            "estimates the venue has not posted yet"
        )


@dataclass(frozen=True)
class ReconcileReport:
    at: datetime
    broker: str
    executions: tuple[Execution, ...] = ()  # changes the ledger had not booked
    foreign: tuple[ForeignOrder, ...] = ()
    balances: tuple[BalanceCheck, ...] = ()
    checked: tuple[str, ...] = ()  # what was compared, one short phrase each
    notes: tuple[str, ...] = ()  # explained events worth reading
    problems: tuple[str, ...] = ()  # anything unexplained: trading halts
    incomplete: str | None = None  # why it could not finish (the venue unreachable)
    dry_run: bool = False  # nothing was booked or cancelled (another process holds the ledger)
    fee_corrections: tuple[FeeCorrection, ...] = ()  # posted fees booked against estimates
    pending_fees: Mapping[str, Decimal] = field(default_factory=dict)  # still estimates, after
    posted_fees: Mapping[str, Decimal] = field(default_factory=dict)  # every posting, after
    positions: tuple[PositionRisk, ...] = ()  # a perpetual account's, as the venue reports them
    funding: tuple[VenueFunding, ...] = ()  # the venue's funding rows the ledger had not booked
    liquidations: tuple[VenueLiquidation, ...] = ()  # the venue's, their fills in `executions`

    @property
    def ok(self) -> bool:
        """Nothing unexplained, and everything was compared."""
        return not self.problems and self.incomplete is None

    @property
    def fills(self) -> list[Fill]:
        return [fill for execution in self.executions for fill in execution.fills]

    @property
    def summary(self) -> str:
        """One paragraph: the verdict, then what changed."""
        if self.problems:
            verdict = f"MISMATCH ({len(self.problems)} unexplained)"
        elif self.incomplete is not None:
            verdict = f"INCOMPLETE ({self.incomplete})"
        else:
            verdict = "ok"
        parts = [f"reconciliation with {self.broker} at {self.at.isoformat()}: {verdict}"]
        if self.checked:
            parts.append("checked " + ", ".join(self.checked))
        changed = [e for e in self.executions if not e.fills]
        fills = self.fills
        booked = "would book" if self.dry_run else "booked"
        parts.append(f"{booked} {len(fills)} fill(s) and {len(changed)} other order change(s)")
        if self.fee_corrections:
            parts.append(f"{booked} {len(self.fee_corrections)} posted fee correction(s)")
        if self.funding:
            parts.append(f"{booked} {len(self.funding)} funding row(s) from the venue")
        if self.liquidations:
            parts.append(f"{len(self.liquidations)} liquidation(s) at the venue")
        if self.foreign:
            parts.append(f"{len(self.foreign)} order(s) on the venue the ledger does not know")
        bad = [b for b in self.balances if not b.ok]
        if self.balances:
            parts.append(f"{len(self.balances) - len(bad)}/{len(self.balances)} balances agree")
        if self.problems:
            parts.append("first problem: " + self.problems[0])
        return "; ".join(parts) + "."

    def lines(self) -> list[str]:
        """The full report, one finding a line."""
        out = [self.summary]
        if self.dry_run:
            out.append("dry run: another process holds the ledger, nothing was booked")
        for execution in self.executions:
            order = execution.order
            out.append(
                f"order {order.client_order_id} {order.symbol} {order.side} {order.amount}: "
                f"now {order.status}, filled {order.filled_amount}"
                + (f" ({execution.reason})" if execution.reason else "")
            )
            out += [
                f"  fill {f.fill_id}: {f.side} {f.amount} @ {f.price}, fee {f.fee} "
                f"{f.fee_currency}{' (estimate)' if f.fee_estimated else ''}, {f.at.isoformat()}"
                for f in execution.fills
            ]
        out += [f"fee posted: {c.describe()}" for c in self.fee_corrections]
        out += [
            f"fees posted by the venue, all told: {amount} {asset}"
            for asset, amount in sorted(self.posted_fees.items())
        ]
        out += [
            f"fees still estimated (not posted by the venue yet): {amount} {asset}"
            for asset, amount in sorted(self.pending_fees.items())
        ]
        for foreign in self.foreign:
            price = f" @ {foreign.price}" if foreign.price is not None else ""
            out.append(
                f"unknown order {foreign.exchange_order_id} "
                f"(client id {foreign.client_order_id or '-'}) {foreign.symbol} {foreign.side} "
                f"{foreign.amount}{price}: {foreign.action}"
            )
        for balance in self.balances:
            mark = "DIFFERS by " + str(balance.difference)
            if balance.difference == 0:
                mark = "ok"
            elif balance.ok:
                mark = f"ok within {balance.pending} of unposted fee estimates"
            out.append(
                f"balance {balance.asset}: venue {balance.actual}, ledger implies "
                f"{balance.expected}: {mark}"
            )
        out += [position.describe() for position in self.positions]
        out += [f"note: {note}" for note in self.notes]
        out += [f"PROBLEM: {problem}" for problem in self.problems]
        return out

    @property
    def text(self) -> str:
        return "\n".join(self.lines()) + "\n"


@dataclass
class ReportBuilder:
    """Collects a reconciliation's findings as a broker works through them."""

    at: datetime
    broker: str
    executions: list[Execution] = field(default_factory=list)
    foreign: list[ForeignOrder] = field(default_factory=list)
    balances: list[BalanceCheck] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    incomplete: str | None = None
    dry_run: bool = False
    fee_corrections: list[FeeCorrection] = field(default_factory=list)
    pending_fees: dict[str, Decimal] = field(default_factory=dict)
    posted_fees: dict[str, Decimal] = field(default_factory=dict)
    positions: list[PositionRisk] = field(default_factory=list)
    funding: list[VenueFunding] = field(default_factory=list)
    liquidations: list[VenueLiquidation] = field(default_factory=list)

    def build(self) -> ReconcileReport:
        return ReconcileReport(
            self.at, self.broker, tuple(self.executions), tuple(self.foreign),
            tuple(self.balances), tuple(self.checked), tuple(self.notes), tuple(self.problems),
            self.incomplete, self.dry_run, tuple(self.fee_corrections), dict(self.pending_fees),
            dict(self.posted_fees), tuple(self.positions), tuple(self.funding),
            tuple(self.liquidations),
        )  # fmt: skip


def portfolio_after(
    portfolio: Portfolio,
    executions: Iterable[Execution],
    corrections: Iterable[FeeCorrection] = (),
) -> Portfolio:
    """The portfolio after the report's fills, then its fee corrections (booked in that order)."""
    for execution in executions:
        for fill in execution.fills:
            portfolio = portfolio.apply(fill)
    for correction in corrections:
        portfolio = corrected(portfolio, correction)
    return portfolio


def funded(portfolio: Portfolio, rows: Iterable[VenueFunding]) -> Portfolio:
    """`portfolio` with the venue's funding rows in its cash (income: + received)."""
    with exact():
        income = sum((row.amount for row in rows), ZERO)
    if income == 0:
        return portfolio
    with exact():
        cash = portfolio.cash + income
    return Portfolio(
        portfolio.currency, cash, portfolio.positions, portfolio.realized_pnl, portfolio.fees_paid
    )


def base_asset(symbol: str) -> str:
    return symbol.split("/", 1)[0]


def expected_balances(
    book: LedgerBook, portfolio: Portfolio, symbols: Iterable[str]
) -> dict[str, Decimal]:
    """What the venue should hold of each asset the daemon trades: the baseline plus what the
    ledger's fills moved (cash since the starting cash, and every position)."""
    baseline = book.baseline or {}
    with exact():
        expected = {
            portfolio.currency: baseline.get(portfolio.currency, ZERO)
            + portfolio.cash
            - book.starting_cash
        }
        for symbol in symbols:
            asset = base_asset(symbol)
            expected[asset] = baseline.get(asset, ZERO) + portfolio.amount(symbol)
    return expected


def compare_balances(
    expected: Mapping[str, Decimal],
    actual: Mapping[str, Decimal],
    pending: Mapping[str, Decimal] | None = None,
) -> list[BalanceCheck]:
    """Each asset's check; `pending`: fee estimates not yet posted, by asset."""
    unposted = pending or {}
    return [
        BalanceCheck(asset, expected[asset], actual.get(asset, ZERO), unposted.get(asset, ZERO))
        for asset in sorted(expected)
    ]
