"""Reconciling a perp account: the spot reconciliation's orders, trades and foreign orders
(`reconcile.Reconciler`), then, in place of spot balances, positions, funding and the wallet.

- Positions: the venue's (side, size, entry, leverage, margin mode, liquidation price,
  unrealised P&L on the mark) against the ledger's signed size per symbol; a position at
  another leverage or margin mode than start-up set, or in hedge mode, is a problem.
- Funding: the venue's FUNDING_FEE rows since the baseline; those the ledger has not booked
  go in the report (`funding`, booked by the engine with the fills; or, for a book that keeps
  none, through `perp_funding.FundingLedger`), and are said in the notes. A row the ledger
  booked that the venue no longer lists is a problem.
- Liquidations: the venue's own closing orders ("autoclose-"), booked as fills and recorded
  (`perp_reconcile_liquidation`).
- Wallet (USDT): what moved it besides fills and fees is funding, so
      expected wallet = baseline + (ledger cash - starting cash) + Σ size x mark
                        + Σ funding the ledger's cash does not hold yet
                        - Σ unrealised P&L (venue, on the mark).
  The ledger books a perp fill as spot (cash moves by the notional), so cash + Σ size x mark
  is the account's margin balance (wallet + unrealised P&L on the mark): Binance's
  "margin balance = wallet balance + unrealised PnL" (USDⓈ-M futures balances FAQ). The mark
  and the unrealised P&L are the venue's, the fills, fees and funding the ledger's. The venue
  writes its figures to 8 decimals: a difference within `DUST` per position and fill is its
  rounding, said in the notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from trader.broker.live.book import LIVE
from trader.broker.live.perp_funding import FundingLedger, FundingRow, venue_funding
from trader.broker.live.perp_positions import Sizes, VenuePosition, read_positions
from trader.broker.live.perp_reconcile_liquidation import book_liquidations
from trader.broker.live.perp_setup import wallet_balance
from trader.broker.live.reconcile import RECENT_TRADES, Reconciler
from trader.domain import ZERO, DomainError, exact
from trader.domain.perp.position_risk import PositionRisk
from trader.domain.portfolio import Portfolio
from trader.domain.reconciliation import (
    BalanceCheck,
    LedgerBook,
    ReportBuilder,
    portfolio_after,
)

DUST = Decimal("0.00000001")  # the venue's last decimal place, per figure it rounded


@dataclass
class PerpState:
    """What the perp broker's parts share: the settings start-up applied, the sizes the
    reduce-only decision reads, and where funding is booked."""

    leverage: int
    margin_mode: str
    sizes: Sizes
    funding: FundingLedger
    currency: str = "USDT"
    positions: dict[str, VenuePosition] = field(default_factory=dict)  # the last read
    reads: int = 0  # how many reconciliations read the positions
    funding_paid: dict[str, Decimal] = field(default_factory=dict)  # by symbol, + paid


@dataclass(frozen=True)
class PerpReconciler(Reconciler):
    perp: PerpState

    async def _recent_trades(self, book: LedgerBook, at: datetime, report: ReportBuilder) -> None:
        """The venue's liquidations first (their trades belong to its own orders), then the
        spot reconciliation's late fills and foreign trades."""
        await book_liquidations(
            self.client, self.booking, book, at - RECENT_TRADES, self.perp.positions,
            self.perp.margin_mode, report,
        )  # fmt: skip
        await super()._recent_trades(book, at, report)

    async def _balances(self, book: LedgerBook, at: datetime, report: ReportBuilder) -> None:
        symbols = sorted(self.client.instruments)
        funding = await self._funding(book, symbols, report)
        account = await self._read(symbols)
        if self._compare(book, symbols, funding, account, report, record=False):
            # A resting order may have filled between reading the orders and the account:
            # read the orders again, then the account, before calling it unexplained.
            latest = {o.client_order_id: o for o in book.open_orders}
            latest |= {e.order.client_order_id: e.order for e in report.executions}
            again = [o for o in latest.values() if o.status in LIVE]
            await self._open_orders(again, at, report, first=False)
            account = await self._read(symbols)
            # A funding time may pass while the account is read (the wallet then holds rows
            # the first read lacked): the rows read after it too, and the wallet taken with
            # those posted up to some instant of the read, in time order.
            after = await self._funding(book, symbols, report, again=True)
            funding = next(
                (
                    rows
                    for rows in posted_during(funding, after)
                    if not self._compare(book, symbols, rows, account, report, record=False)
                ),
                after,
            )
        report.problems += self._compare(book, symbols, funding, account, report, record=True)
        self.perp.positions = dict(account[0])
        self.perp.sizes.reset(account[0])
        self.perp.reads += 1

    async def _read(
        self, symbols: Sequence[str]
    ) -> tuple[dict[str, VenuePosition], Decimal | None]:
        """The venue's positions and its wallet balance."""
        exchange = self.client.exchange
        positions = read_positions(await self.client.ask(exchange.fetch_positions(list(symbols))))
        balance = await self.client.ask(exchange.fetch_balance())
        return positions, wallet_balance(balance, self.perp.currency)

    def _compare(
        self,
        book: LedgerBook,
        symbols: Sequence[str],
        funding: Sequence[FundingRow],
        account: tuple[dict[str, VenuePosition], Decimal | None],
        report: ReportBuilder,
        *,
        record: bool,
    ) -> list[str]:
        """The positions and the wallet, after the report's executions, compared: the
        problems found; `record`: the checks and notes are added to the report (last pass)."""
        positions, wallet = account
        executions = report.executions
        portfolio = portfolio_after(book.portfolio, executions, report.fee_corrections)
        problems = self._positions(portfolio, symbols, positions, report if record else None)
        if book.baseline is None:
            if record:
                report.notes.append("no baseline of the venue's wallet yet: wallet not compared")
            return problems
        if wallet is None:
            return [*problems, f"the venue's balance names no {self.perp.currency} wallet"]
        fills = len(book.booked_fills) + sum(len(e.fills) for e in executions)
        check = self._wallet_check(book, portfolio, positions, funding, wallet, fills)
        if record:
            report.balances.append(check)
            report.checked.append(f"the {check.asset} wallet, funding included")
            if check.difference != 0 and check.ok:
                report.notes.append(
                    f"{check.asset} wallet: the venue holds {check.actual}, the ledger implies "
                    f"{check.expected}: within {check.pending}, the venue's rounding to 8 "
                    "decimals"
                )
        if not check.ok:
            problems.append(
                f"{check.asset} wallet: the venue holds {check.actual}, the ledger implies "
                f"{check.expected} (difference {check.difference})"
            )
        return problems

    def _positions(
        self,
        portfolio: Portfolio,
        symbols: Sequence[str],
        positions: Mapping[str, VenuePosition],
        report: ReportBuilder | None,
    ) -> list[str]:
        problems = []
        for symbol in symbols:
            ledger = portfolio.amount(symbol)
            venue = positions.get(symbol)
            held = venue.size if venue is not None else ZERO
            if held != ledger:
                problems.append(
                    f"{symbol}: the venue's position is {plain(held)}, the ledger's {plain(ledger)}"
                )
            if venue is None:
                continue
            wrong = venue.disagrees(self.perp.leverage, self.perp.margin_mode)
            if wrong is not None:
                problems.append(wrong)
            if report is not None:
                report.notes.append(describe(venue))
                risk = position_risk(venue, self.perp.funding_paid.get(symbol))
                if risk is not None:
                    report.positions.append(risk)
        for symbol in sorted(set(positions) - set(symbols)):
            problems.append(
                f"{symbol}: a position at the venue in a symbol the daemon does not trade"
            )
        if report is not None:
            report.checked.append(f"positions of {len(symbols)} symbol(s)")
        return problems

    def _wallet_check(
        self,
        book: LedgerBook,
        portfolio: Portfolio,
        positions: Mapping[str, VenuePosition],
        funding: Sequence[FundingRow],
        wallet: Decimal,
        fills: int,
    ) -> BalanceCheck:
        currency = self.perp.currency
        baseline = (book.baseline or {}).get(currency, ZERO)
        with exact():
            expected = baseline + portfolio.cash - book.starting_cash
            expected += sum((r.amount for r in funding), ZERO)
            for position in positions.values():
                mark = position.mark if position.mark is not None else position.entry
                expected += portfolio.amount(position.symbol) * mark
                expected -= position.unrealised or ZERO
        dust = DUST * (1 + len(positions) + fills + len(funding))
        return BalanceCheck(currency, expected, wallet, dust)

    async def _funding(
        self,
        book: LedgerBook,
        symbols: Sequence[str],
        report: ReportBuilder,
        *,
        again: bool = False,
    ) -> list[FundingRow]:
        """The venue's funding rows since the baseline that the ledger's cash does not hold
        yet (all of them, for a ledger that keeps funding apart from its cash; else the new
        ones); the new ones in the report (or booked through `FundingLedger`). `again`: a
        second read in the same reconciliation, which adds only rows the first did not see."""
        ledger = self.perp.funding
        in_ledger = book.venue_funding is not None
        venue: list[FundingRow] = []
        for symbol in symbols:
            venue += await venue_funding(
                self.client.exchange, symbol, ledger.since, self.client.ask
            )
        booked = book.venue_funding if book.venue_funding is not None else await ledger.booked()
        new = [row for row in venue if row.venue_id not in booked]
        listed = {row.venue_id for row in venue}
        seen = {row.venue_id for row in report.funding}
        fresh = [row for row in new if row.venue_id not in seen]
        for gone in sorted(
            v for v in set(booked) - listed if booked[v].symbol in symbols and not again
        ):
            report.problems.append(
                f"funding {gone} ({booked[gone].symbol} {booked[gone].amount}) is in the ledger, "
                "the venue no longer lists it"
            )
        if in_ledger:
            report.funding += fresh  # booked with the report, in the fills' transaction
        elif fresh and not report.dry_run:
            await ledger.record(fresh)
        for row in fresh:
            verb = "would book" if report.dry_run else "booked"
            report.notes.append(
                f"funding {row.venue_id} {row.symbol} {row.amount} {self.perp.currency} at "
                f"{row.at.isoformat()}: {verb} from the venue"
            )
        if not again:
            report.checked.append(f"{len(venue)} funding row(s) since {ledger.since.isoformat()}")
        paid: dict[str, Decimal] = {}
        for row in venue:
            paid[row.symbol] = paid.get(row.symbol, ZERO) - row.amount
        self.perp.funding_paid = paid
        return new if in_ledger or ledger.in_cash else venue


def posted_during(
    before: Sequence[FundingRow], after: Sequence[FundingRow]
) -> list[list[FundingRow]]:
    """The funding rows a wallet read between two reads of them can hold: those read before,
    plus those first read after up to each of their times in turn (the venue settles a
    funding time for every symbol at once; its rows only ever appear)."""
    known = {r.venue_id for r in before}
    later = sorted((r for r in after if r.venue_id not in known), key=lambda r: r.at)
    times = sorted({r.at for r in later})
    return [list(before)] + [[*before, *(r for r in later if r.at <= t)] for t in times]


def position_risk(position: VenuePosition, funding_paid: Decimal | None) -> PositionRisk | None:
    """What the report shows of a position (helper F's `PositionRisk`), from the venue's own
    figures; None where the venue left one out."""
    if position.mark is None or position.leverage is None or position.margin_mode is None:
        return None
    try:
        return PositionRisk.from_figures(
            position.symbol, size=position.size, entry_price=position.entry,
            mark=position.mark, leverage=position.leverage, margin_mode=position.margin_mode,
            margin=position.margin or ZERO, liquidation_price=position.liquidation,
            unrealised_pnl=position.unrealised or ZERO, funding_paid=funding_paid,
        )  # fmt: skip
    except DomainError:
        return None


def plain(value: Decimal) -> str:
    """A size as people write it: 2.00000000 -> 2, 1.50 -> 1.5."""
    return format(value.normalize(), "f") if value else "0"


def describe(position: VenuePosition) -> str:
    liquidation = position.liquidation if position.liquidation is not None else "--"
    return (
        f"{position.symbol}: {position.side} {plain(abs(position.size))} @ entry {position.entry}, "
        f"{position.leverage}x {position.margin_mode}, liquidation {liquidation}, unrealised "
        f"{position.unrealised} on mark {position.mark}"
    )
