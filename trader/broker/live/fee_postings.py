"""Reconciliation's fee step, for a venue that posts fees after the fills (Alpaca, whose
exchange answers `fetch_fee_postings`): the postings since the oldest fill whose fee is still
an estimate, matched to those fills (`trader.domain.fee_posting.match`) and booked as
corrections with the report; the estimates still waiting, by asset, for the balance check.
A ccxt venue has no such call: its fills are never estimates, and this step does nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Any

from trader.broker.live.venue import VenueClient
from trader.domain import DomainError
from trader.domain.fee_posting import FeePosting, match, pending_by_asset, posted_by_asset
from trader.domain.reconciliation import LedgerBook, ReportBuilder

POSTED_WITHIN = timedelta(days=2)  # "calculated and posted end of day", with a day to spare


async def book_fee_postings(client: VenueClient, book: LedgerBook, report: ReportBuilder) -> None:
    """Adds the corrections the venue's postings make, and the estimates left, to `report`."""
    new = [f for e in report.executions for f in e.fills if f.fee_estimated]
    pending = [*book.pending_fees, *new]
    report.posted_fees = dict(book.posted_fees)
    fetch = getattr(client.exchange, "fetch_fee_postings", None)
    if fetch is None or not pending:
        report.pending_fees = pending_by_asset(pending)
        return
    zone: tzinfo = getattr(client.exchange, "fee_day_zone", UTC)
    since = min(f.at for f in pending)
    raw = await client.ask(fetch(since))
    postings, skipped = _read(raw, book.booked_postings)
    corrections, unmatched = match(postings, pending, lambda at: at.astimezone(zone).date())
    report.fee_corrections += corrections
    report.posted_fees = dict(posted_by_asset(corrections, book.posted_fees))
    covered = {fill_id for c in corrections for fill_id in c.fill_ids}
    left = [f for f in pending if f.fill_id not in covered]
    report.pending_fees = pending_by_asset(left)
    # Alpaca posts by the next morning: an estimate much older is a posting this cannot read
    # (a FEE naming no symbol), and it keeps widening the balance check until someone looks.
    stale = [f for f in left if report.at - f.at > POSTED_WITHIN]
    if stale:
        report.notes.append(
            f"{len(stale)} fill(s) older than {POSTED_WITHIN.days} days still have only an "
            f"estimated fee ({', '.join(sorted({f.symbol for f in stale}))}): the venue's "
            "postings for them were not found"
        )
    report.checked.append(
        f"{len(raw)} fee posting(s) since {since.astimezone(zone).date().isoformat()}"
    )
    if skipped:
        report.notes.append(f"{skipped} fee posting(s) the venue sent were unreadable: skipped")
    if unmatched:
        days = sorted({f"{p.symbol} {p.day.isoformat()}" for p in unmatched})
        report.notes.append(
            f"{len(unmatched)} fee posting(s) meet no estimated fill of the ledger "
            f"({', '.join(days)}): left alone"
        )


def _read(raw: Sequence[Mapping[str, Any]], booked: frozenset[str]) -> tuple[list[FeePosting], int]:
    """The postings not booked yet, and how many could not be read."""
    out, skipped = [], 0
    for record in raw:
        try:
            if str(record["id"]) in booked:
                continue
            price = record.get("price")
            posting = FeePosting(
                str(record["id"]), str(record.get("kind")), str(record["symbol"]),
                str(record["currency"]), Decimal(str(record["amount"])),
                date.fromisoformat(str(record["day"])), Decimal(str(price)) if price else None,
            )  # fmt: skip
            out.append(posting)
        except (KeyError, ValueError, InvalidOperation, DomainError):
            skipped += 1
    return out, skipped
