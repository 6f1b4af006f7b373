"""Posted fees in the ledger: corrections of estimated fees (migration 8), booked once per
posting, and the portfolio derived from the fills and the corrections in the order booked.

A fill's estimated fee stays in `fills`; its posted fee is a `fee_corrections` row beside it.
The portfolio moved by the difference when the correction was booked, after the fills booked
before it (`after_fill`), so deriving the portfolio again replays both in that order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from trader.domain import Fill, Portfolio
from trader.domain.fee_posting import FeeCorrection, corrected, pending_by_asset
from trader.ledger.codec import money_text, time_text

_CORRECTIONS = (
    "SELECT after_fill, symbol, currency, day, estimated, posted, price, fills, postings "
    "FROM fee_corrections ORDER BY id"
)


@dataclass(frozen=True)
class FeeRecord:
    """The ledger's fees: those posted (corrections), and the fills still estimated."""

    corrections: tuple[FeeCorrection, ...]
    pending: tuple[Fill, ...]
    booked_postings: frozenset[str]

    def pending_by_asset(self) -> dict[str, Decimal]:
        return pending_by_asset(self.pending)


def _correction(row: Sequence[object]) -> tuple[int, FeeCorrection]:
    after, symbol, currency, day, estimated, posted, price, fills, postings = row
    return int(str(after)), FeeCorrection(
        tuple(json.loads(str(postings))), tuple(json.loads(str(fills))), str(symbol),
        str(currency), date.fromisoformat(str(day)), Decimal(str(estimated)),
        Decimal(str(posted)), Decimal(str(price)),
    )  # fmt: skip


def derive_portfolio(
    c: sqlite3.Connection, currency: str, starting: Decimal, fills: Sequence[tuple[int, Fill]]
) -> Portfolio:
    """Cash and positions from the fills (with their rowids) and the fee corrections, each
    correction after the fills booked before it."""
    corrections = [_correction(row) for row in c.execute(_CORRECTIONS)]
    if not corrections:  # every ledger without posted fees: the fills alone
        return Portfolio.from_fills(currency, starting, (fill for _, fill in fills))
    portfolio = Portfolio(currency, starting)
    waiting = iter(corrections)
    upcoming = next(waiting, None)
    for rowid, fill in fills:
        while upcoming is not None and upcoming[0] < rowid:
            portfolio = corrected(portfolio, upcoming[1])
            upcoming = next(waiting, None)
        portfolio = portfolio.apply(fill)
    while upcoming is not None:
        portfolio = corrected(portfolio, upcoming[1])
        upcoming = next(waiting, None)
    return portfolio


def write_corrections(
    c: sqlite3.Connection, corrections: Iterable[FeeCorrection], at: datetime
) -> list[FeeCorrection]:
    """Each correction whose postings are not booked yet, after every fill booked so far; the
    ones written (a posting corrects once, however often it is reported)."""
    written = []
    for correction in corrections:
        ids = correction.posting_ids
        marks = ", ".join("?" * len(ids))
        seen = c.execute(
            f"SELECT count(*) FROM fee_postings WHERE posting_id IN ({marks})",  # noqa: S608 - placeholders only
            ids,
        ).fetchone()[0]
        if seen:
            continue
        cursor = c.execute(
            "INSERT INTO fee_corrections (after_fill, symbol, currency, day, estimated, posted, "
            "price, fills, postings, booked_at) VALUES ((SELECT coalesce(max(rowid), 0) FROM "
            "fills), ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (correction.symbol, correction.currency, correction.day.isoformat(),
             money_text(correction.estimated), money_text(correction.posted),
             money_text(correction.price), json.dumps(list(correction.fill_ids)),
             json.dumps(list(ids)), time_text(at)),
        )  # fmt: skip
        c.executemany(
            "INSERT INTO fee_postings VALUES (?, ?)", [(i, cursor.lastrowid) for i in ids]
        )
        written.append(correction)
    return written


def fee_record(c: sqlite3.Connection, fills: Iterable[Fill]) -> FeeRecord:
    """The corrections booked, and `fills` whose fee is still an estimate none corrected."""
    corrections = tuple(correction for _, correction in map(_correction, c.execute(_CORRECTIONS)))
    covered = {fill_id for correction in corrections for fill_id in correction.fill_ids}
    pending = tuple(f for f in fills if f.fee_estimated and f.fill_id not in covered)
    postings = frozenset(row[0] for row in c.execute("SELECT posting_id FROM fee_postings"))
    return FeeRecord(corrections, pending, postings)
