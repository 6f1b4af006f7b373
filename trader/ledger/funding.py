"""A perpetual's funding and liquidations in the ledger (migration 11).

Funding moves cash without a fill: the account's cash row holds it, and a restart derives cash
from the fills *and* these rows (`with_funding`), so `load`'s check that the stored cash
equals what the record implies still holds. A row is unique per symbol, time and source: a
funding time is never booked twice, also not by a tick that runs again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from trader.domain import Portfolio
from trader.domain.money import ZERO, exact
from trader.ledger.codec import money_text, parse_time, time_text
from trader.ledger.database import Statements

FundingSource = Literal["modelled", "venue"]
# The same statement as the fills' portfolio write: a buffered ledger runs each statement's
# rows in the order made, so one statement for every cash update keeps the last one last.
UPDATE_CASH = "UPDATE account SET cash = ?, fees_paid = ?"
_INSERT_FUNDING = "INSERT INTO funding VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_LIQUIDATION = "INSERT INTO liquidations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"


@dataclass(frozen=True)
class FundingRow:
    """One funding time of one symbol: `paid` = mark x position x rate, positive paid by the
    account, negative received. A venue's income row may not say the rate, mark or position
    (None); the engine's own rows always do."""

    symbol: str
    at: datetime
    rate: Decimal | None
    mark: Decimal | None
    position: Decimal | None  # signed
    paid: Decimal
    source: FundingSource = "modelled"
    venue_id: str | None = None


@dataclass(frozen=True)
class LiquidationRow:
    """A position closed by liquidation, by the fill `fill_id` at `close_price`: the triggering
    mark while the margin was solvent, else the bankruptcy price (`liquidation_fills`)."""

    fill_id: str
    symbol: str
    at: datetime
    position: Decimal  # signed, before it was closed
    trigger_mark: Decimal  # the mark that crossed the liquidation price
    liquidation_price: Decimal
    close_price: Decimal
    fee: Decimal
    margin_mode: str


@dataclass
class PerpRows:
    """What a tick booked for perpetuals, written with the tick's fills."""

    funding: list[FundingRow] = field(default_factory=list)
    liquidations: list[LiquidationRow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.funding or self.liquidations)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else money_text(value)


def _number(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def _funding_row(row: FundingRow) -> tuple[object, ...]:
    return (
        row.symbol, time_text(row.at), None if row.rate is None else str(row.rate),
        _text(row.mark), _text(row.position), money_text(row.paid), row.source, row.venue_id,
    )  # fmt: skip


def record_funding(
    c: Statements, rows: Sequence[FundingRow], portfolio: Portfolio | None = None
) -> None:
    """Write funding rows (a second row of a symbol, time and source is refused: IntegrityError)
    and, given the portfolio that paid them, its cash."""
    c.executemany(_INSERT_FUNDING, [_funding_row(row) for row in rows])
    if portfolio is not None:
        c.execute(UPDATE_CASH, (money_text(portfolio.cash), money_text(portfolio.fees_paid)))


def write_perp_rows(c: Statements, rows: PerpRows, portfolio: Portfolio) -> None:
    """A tick's funding and liquidation rows, and the cash after them (the liquidations' fills
    are the tick's own fills, written before)."""
    if not rows:
        return
    record_funding(c, rows.funding, portfolio)
    c.executemany(
        _INSERT_LIQUIDATION,
        [
            (
                r.fill_id, r.symbol, time_text(r.at), money_text(r.position),
                money_text(r.trigger_mark), str(r.liquidation_price), str(r.close_price),
                money_text(r.fee), r.margin_mode,
            )
            for r in rows.liquidations
        ],
    )  # fmt: skip


def _row(values: Sequence[Any]) -> FundingRow:
    symbol, at, rate, mark, position, paid, source, venue_id = values
    return FundingRow(
        symbol, parse_time(at), _number(rate), _number(mark), _number(position), Decimal(paid),
        source, venue_id,
    )  # fmt: skip


def read_funding(c: sqlite3.Connection, symbol: str | None = None) -> list[FundingRow]:
    """The funding rows in time order (of one symbol, or all)."""
    if symbol is None:
        rows = c.execute("SELECT * FROM funding ORDER BY at, symbol, source")
    else:
        rows = c.execute("SELECT * FROM funding WHERE symbol = ? ORDER BY at, source", (symbol,))
    return [_row(values) for values in rows]


def read_liquidations(c: sqlite3.Connection) -> list[LiquidationRow]:
    rows = c.execute("SELECT * FROM liquidations ORDER BY at, symbol")
    return [
        LiquidationRow(
            fill_id,
            symbol,
            parse_time(at),
            Decimal(position),
            Decimal(mark),
            Decimal(lp),
            Decimal(close),
            Decimal(fee),
            mode,
        )
        for fill_id, symbol, at, position, mark, lp, close, fee, mode in rows
    ]


def funding_paid(c: sqlite3.Connection) -> Decimal:
    """All funding the account paid, net (received counts negative)."""
    with exact():
        return sum((Decimal(p) for (p,) in c.execute("SELECT paid FROM funding")), ZERO)


def with_funding(c: sqlite3.Connection, portfolio: Portfolio) -> Portfolio:
    """`portfolio` (derived from the fills) with the funding rows' cash taken out."""
    paid = funding_paid(c)
    if paid == 0:
        return portfolio
    with exact():
        cash = portfolio.cash - paid
    return Portfolio(
        portfolio.currency, cash, portfolio.positions, portfolio.realized_pnl, portfolio.fees_paid
    )


def funded_through(c: sqlite3.Connection) -> dict[str, datetime]:
    """Per symbol: the last funding time booked (by any source)."""
    return {
        symbol: parse_time(at)
        for symbol, at in c.execute("SELECT symbol, max(at) FROM funding GROUP BY symbol")
    }
