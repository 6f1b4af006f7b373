"""Funding as the venue books it: its FUNDING_FEE income rows (ccxt's `fetch_funding_history`:
binanceusdm GET /fapi/v1/income?incomeType=FUNDING_FEE, aster the same under /fapi/v3), and
where the daemon keeps the ones it has booked.

A row's `amount` is the venue's income: positive when the account received funding, negative
when it paid (Binance "Get Income History": income, tranId; "Introduction to Funding Rates":
longs pay shorts when the rate is positive). Rows are known by the venue's `tranId`.

The daemon's ledger keeps the rows it booked (`LedgerBook.venue_funding`): reconciliation puts
the new ones in its report (`ReconcileReport.funding`) and the engine books them with the
report's fills (`ReconciliationLedger.book`, source "venue"). A book that keeps none (None: a
test's ledger kept in memory) books through `FundingLedger` instead: `MemoryFunding` holds them
for the process's life only. Either way `FundingLedger.since` says from when the venue's rows
are the account's (the baseline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from trader.domain import from_epoch_ms
from trader.domain.reconciliation import VenueFunding

PAGE = 1000  # Binance's largest income page
FundingRow = VenueFunding  # venue_id: the venue's tranId; amount: income, + received, - paid


class FundingLedger(Protocol):
    since: datetime  # the venue's rows from this time on are the account's (the baseline)
    # Whether the ledger's cash already holds the rows booked (helper D's table: `load`
    # derives cash from the fills and the funding rows); False: kept apart from it.
    in_cash: bool

    async def booked(self) -> Mapping[str, FundingRow]:
        """Every row booked, by the venue's id."""
        ...

    async def record(self, rows: Sequence[FundingRow]) -> None: ...


class MemoryFunding:
    """The rows booked in this process (see the module's doc)."""

    in_cash = False

    def __init__(self, since: datetime) -> None:
        self.since = since
        self._rows: dict[str, FundingRow] = {}

    async def booked(self) -> Mapping[str, FundingRow]:
        return dict(self._rows)

    async def record(self, rows: Sequence[FundingRow]) -> None:
        self._rows |= {row.venue_id: row for row in rows}


def read_row(raw: Mapping[str, Any]) -> FundingRow:
    """One ccxt funding-history entry, from the venue's text where it kept it."""
    info = raw.get("info") or {}
    amount = info.get("income", raw.get("amount"))
    return FundingRow(
        venue_id=str(raw.get("id") or info.get("tranId")),
        symbol=str(raw.get("symbol")),
        amount=Decimal(str(amount)),
        at=from_epoch_ms(int(raw["timestamp"])),
    )


async def venue_funding(exchange: Any, symbol: str, since: datetime, ask: Any) -> list[FundingRow]:
    """Every FUNDING_FEE row of `symbol` since `since`, page by page (by time)."""
    rows: list[FundingRow] = []
    start = int(since.timestamp() * 1000)
    while True:
        page = await ask(exchange.fetch_funding_history(symbol, start, PAGE))
        got = [read_row(r) for r in page or ()]
        rows += got
        if len(got) < PAGE:
            break
        start = int(max(r.at for r in got).timestamp() * 1000) + 1
    seen: dict[str, FundingRow] = {}
    for row in rows:
        seen.setdefault(row.venue_id, row)
    return sorted(seen.values(), key=lambda r: (r.at, r.venue_id))
