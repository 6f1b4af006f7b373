"""The ledger's side of reconciliation: what a broker needs to compare against, booking what
it found (in one transaction with the report), and the venue's baseline balances.

A perpetual account's funding as the venue booked it (`ReconcileReport.funding`) is written to
the funding table (source "venue", once per symbol and time: a row that comes again is not
booked twice) with the cash it moved, and a liquidation at the venue to the liquidations table
after its fill, all in the same transaction as the fills (helper D's `trader.ledger.funding`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal

from trader.domain import Order, Portfolio
from trader.domain.fee_posting import posted_by_asset
from trader.domain.reconciliation import (
    LedgerBook,
    ReconcileReport,
    VenueFunding,
    VenueLiquidation,
    funded,
)
from trader.ledger.codec import money_text, parse_time, time_text
from trader.ledger.database import Database, LedgerError, transaction
from trader.ledger.fees import FeeRecord, fee_record, write_corrections
from trader.ledger.funding import FundingRow, LiquidationRow, PerpRows, write_perp_rows
from trader.ledger.trading import LedgerState, _fill, _order, _write_executions, _write_portfolio

order_from_row = _order
fill_from_row = _fill


class ReconciliationLedger:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def book_view(self, state: LedgerState, recent_since: datetime) -> LedgerBook:
        """`state` with every order id and fill id the ledger has, the orders with a venue id
        changed since `recent_since`, and the baseline."""

        def read(
            c: sqlite3.Connection,
        ) -> tuple[frozenset[str], frozenset[str], list[Order], FeeRecord, list[VenueFunding]]:
            orders = frozenset(r[0] for r in c.execute("SELECT client_order_id FROM orders"))
            fills = frozenset(r[0] for r in c.execute("SELECT fill_id FROM fills"))
            recent = c.execute(
                "SELECT * FROM orders WHERE exchange_order_id IS NOT NULL AND updated_at >= ?",
                (time_text(recent_since),),
            ).fetchall()
            estimated = c.execute("SELECT * FROM fills WHERE fee_estimated = 1 ORDER BY rowid")
            fees = fee_record(c, [fill_from_row(row) for row in estimated])
            recent_orders = [order_from_row(row) for row in recent]
            return orders, fills, recent_orders, fees, venue_funding(c)

        orders, fills, recent, fees, funding = await self._db.run(read)
        return LedgerBook(
            portfolio=state.portfolio,
            starting_cash=state.starting_cash,
            open_orders=state.open_orders,
            known_orders=orders,
            booked_fills=fills,
            baseline=await self.baseline(),
            recent_orders={o.exchange_order_id: o for o in recent if o.exchange_order_id},
            pending_fees=fees.pending,
            booked_postings=fees.booked_postings,
            posted_fees=posted_by_asset(fees.corrections),
            venue_funding={row.venue_id: row for row in funding},
        )

    async def book(self, report: ReconcileReport, portfolio: Portfolio) -> list[FundingRow]:
        """The report's order changes and fills, its fee corrections after them (`portfolio`
        is the portfolio after both), the venue's funding (not yet booked) with the cash it
        moved, its liquidations, and the report. Returns the funding rows it booked (for the
        funding counters: `PerpMetrics.funding_booked`)."""

        def write(c: sqlite3.Connection) -> list[FundingRow]:
            with transaction(c):
                _write_executions(c, report.executions, portfolio, report.at, "reconciliation")
                written = write_corrections(c, report.fee_corrections, report.at)
                if len(written) != len(report.fee_corrections):
                    # `portfolio` counted them all: booking a part would break the ledger.
                    raise LedgerError("a fee posting in the report was booked already")
                if written:
                    _write_portfolio(c, portfolio, {x.symbol for x in written})
                new = unbooked(venue_funding(c), report.funding)
                rows = PerpRows(
                    [funding_row(r) for r in new], [liquidation_row(r) for r in report.liquidations]
                )
                write_perp_rows(c, rows, funded(portfolio, new))
                c.execute(
                    "INSERT INTO reconciliations (at, broker, ok, summary, report) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (time_text(report.at), report.broker, int(report.ok), report.summary,
                     report.text),
                )  # fmt: skip
            return rows.funding

        return await self._db.run(write)

    async def has_account(self) -> bool:
        row = await self._db.run(lambda c: c.execute("SELECT count(*) FROM account").fetchone())
        return bool(row[0])

    async def baseline(self) -> dict[str, Decimal] | None:
        rows = await self._db.run(
            lambda c: c.execute("SELECT asset, amount FROM venue_baseline").fetchall()
        )
        return {asset: Decimal(amount) for asset, amount in rows} if rows else None

    async def set_baseline(self, balances: Mapping[str, Decimal], at: datetime) -> None:
        """The venue's balances before the daemon's first trade; written once."""

        def write(c: sqlite3.Connection) -> None:
            with transaction(c):
                if c.execute("SELECT count(*) FROM venue_baseline").fetchone()[0]:
                    return
                c.executemany(
                    "INSERT INTO venue_baseline VALUES (?, ?, ?)",
                    [(a, money_text(v), time_text(at)) for a, v in sorted(balances.items())],
                )

        await self._db.run(write)

    async def last(self) -> tuple[datetime, bool, str] | None:
        """The last reconciliation: when, whether it was ok, and its summary."""
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT at, ok, summary FROM reconciliations ORDER BY id DESC LIMIT 1"
            ).fetchone()
        )
        return (parse_time(row[0]), bool(row[1]), row[2]) if row else None


def venue_funding(c: sqlite3.Connection) -> list[VenueFunding]:
    """The funding rows booked from the venue (the table keeps what was paid: + paid)."""
    rows = c.execute("SELECT venue_id, symbol, paid, at FROM funding WHERE source = 'venue'")
    return [
        VenueFunding(str(venue_id), symbol, -Decimal(paid), parse_time(at))
        for venue_id, symbol, paid, at in rows
    ]


def unbooked(booked: Sequence[VenueFunding], rows: Sequence[VenueFunding]) -> list[VenueFunding]:
    """`rows` whose symbol and time the ledger has not booked from the venue, each once."""
    new: dict[tuple[str, datetime], VenueFunding] = {(r.symbol, r.at): r for r in booked}
    return [new.setdefault((r.symbol, r.at), r) for r in rows if (r.symbol, r.at) not in new]


def funding_row(row: VenueFunding) -> FundingRow:
    """The venue's row as the ledger keeps it: the rate, mark and position it does not say."""
    return FundingRow(row.symbol, row.at, None, None, None, -row.amount, "venue", row.venue_id)


def liquidation_row(row: VenueLiquidation) -> LiquidationRow:
    return LiquidationRow(
        row.fill_id, row.symbol, row.at, row.position, row.trigger_mark, row.liquidation_price,
        row.close_price, row.fee, row.margin_mode,
    )  # fmt: skip
