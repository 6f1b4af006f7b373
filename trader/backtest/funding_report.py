"""A perpetual's funding in the backtest's report: "funding paid/received" as its own line
for every strategy (and buy-and-hold) in the terminal, report.md/html and stats.json, and
every payment in funding.csv. Nothing for a spot backtest."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trader.backtest.document import Block, Heading, Paragraph, Table
from trader.backtest.funding import FundingTotals
from trader.private_files import write_file

if TYPE_CHECKING:
    from trader.backtest.run import Backtest

RECORDS = "funding.csv"


def _money(value: Decimal | float, currency: str) -> str:
    return f"{float(value):,.2f} {currency}"


def funding_line(strategy: str, found: FundingTotals, currency: str) -> str:
    """`simple: funding paid/received: paid 1.20 USDT, received 0.40 USDT: net paid 0.80 USDT
    at 3 funding times`."""
    net = found.net
    verdict = f"net {'paid' if net > 0 else 'received'} {_money(abs(net), currency)}"
    return (
        f"{strategy}: funding paid/received: paid {_money(found.paid, currency)}, received "
        f"{_money(found.received, currency)}: {verdict} at {found.times} funding times"
    )


def terminal_lines(result: Backtest) -> list[str]:
    """The funding lines, one per strategy, for the terminal (none for spot)."""
    book = result.funding
    if book is None:
        return []
    currency = result.settings.broker.currency
    lines = [funding_line(s, book.totals(s), currency) for s in result.runs]
    lines += [
        f"buy & hold on {symbol}: funding paid/received: net "
        f"{'paid' if paid > 0 else 'received'} {_money(abs(paid), currency)}"
        for symbol, paid in book.hold_paid.items()
    ]
    return lines


def funding_blocks(result: Backtest) -> list[Block]:
    """The report's funding section (none for spot)."""
    book = result.funding
    if book is None:
        return []
    currency = result.settings.broker.currency
    rows = []
    for strategy in result.runs:
        for symbol in result.symbols:
            found = book.totals(strategy, symbol)
            rows.append([
                strategy, symbol, str(found.times), _money(found.paid, currency),
                _money(found.received, currency), _money(found.net, currency),
            ])  # fmt: skip
    for symbol, paid in book.hold_paid.items():
        rows.append(["buy & hold", symbol, "-", "-", "-", _money(paid, currency)])
    assumed = ", ".join(book.perp.assumed_zero)
    return [
        Heading(2, "Funding paid/received"),
        Paragraph(
            "A perpetual pays or receives funding at every funding time: mark price x "
            "position held then x the rate, a positive rate paid by longs and received by "
            "shorts. Booked from the recorded funding times (their intervals as the exchange "
            "had them) on its own lines, not among the fees; every curve and figure above "
            f"is after it. Every payment is in `{RECORDS}`."
            + (f" No funding recording for {assumed}: assumed zero." if assumed else "")
        ),
        *[Paragraph(funding_line(s, book.totals(s), currency)) for s in result.runs],
        Table(
            ["strategy", "symbol", "funding times", "paid", "received", "net paid"],
            rows,
            [False, False, True, True, True, True],
        ),
    ]


def funding_json(result: Backtest) -> dict[str, Any] | None:
    book = result.funding
    if book is None:
        return None

    def plain(found: FundingTotals) -> dict[str, Any]:
        return {
            "times": found.times,
            "paid": str(found.paid),
            "received": str(found.received),
            "net_paid": str(found.net),
        }

    return {
        "assumed_zero": list(book.perp.assumed_zero),
        "strategies": {
            strategy: {
                "total": plain(book.totals(strategy)),
                **{s: plain(book.totals(strategy, s)) for s in result.symbols},
            }
            for strategy in result.runs
        },
        "buy_and_hold_net_paid": dict(book.hold_paid),
    }


def write_records(result: Backtest, folder: Path) -> list[Path]:
    """Every funding payment of every strategy in `folder`/funding.csv (none for spot)."""
    book = result.funding
    if book is None:
        return []
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["strategy", "symbol", "fundingTime", "time", "fundingRate", "markPrice",
                     "mark_from", "position", "paid"])  # fmt: skip
    for strategy, by_symbol in book.payments.items():
        for payments in by_symbol.values():
            for p in payments:
                when = datetime.fromtimestamp(p.at_ms / 1000, UTC).isoformat()
                writer.writerow([strategy, p.symbol, p.at_ms, when, p.rate, p.mark, p.mark_from,
                                 p.position, p.paid])  # fmt: skip
    return [write_file(folder / RECORDS, out.getvalue(), what="the report folder")]
