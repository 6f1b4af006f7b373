"""`trader reconcile`: reconcile the ledger with its broker now, and print the report.

It books what the ledger missed (fills while no daemon ran, orders that ended) and records the
report; an unexplained mismatch leaves trading HALTED in the ledger, so a daemon started
after it will not trade until a person has looked. While a daemon holds the ledger it only
reads (a dry run): the daemon reconciles on its own schedule, and two writers must never
book the same fill. Exit status: 0 ok, 1 mismatch, 75 could not finish (venue unreachable).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from trader.broker.protocol import Broker
from trader.broker.reconcile import ReconcileReport
from trader.broker.safety import StartRefused, config_refusal, ledger_holder
from trader.config import LoadedSettings
from trader.config.schema import Settings
from trader.engine.reconciling import reconcile_ledger
from trader.ledger.database import Database, LedgerError
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger
from trader.market.feed import ExchangeCallFailed, UnknownSymbols
from trader.risk.engine import DayMarks
from trader.risk.state import TradingState, TradingStatus

EX_MISMATCH = 1
EX_TEMPFAIL = 75  # sysexits.h: try again later
EX_CONFIG = 78


def add_reconcile_parser(verbs: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = verbs.add_parser(
        "reconcile",
        parents=[common],
        help="reconcile the ledger with the broker now and print the report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="book and cancel nothing, only report"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def report_json(report: ReconcileReport) -> dict[str, object]:
    return {
        "ok": report.ok,
        "summary": report.summary,
        "broker": report.broker,
        "at": report.at.isoformat(),
        "dry_run": report.dry_run,
        "incomplete": report.incomplete,
        "problems": list(report.problems),
        "notes": list(report.notes),
        "fills": [f.fill_id for f in report.fills],
        "orders": {e.order.client_order_id: str(e.order.status) for e in report.executions},
        "foreign": [
            {"id": f.exchange_order_id, "symbol": f.symbol, "action": f.action}
            for f in report.foreign
        ],
        "balances": {
            b.asset: {"venue": str(b.actual), "ledger": str(b.expected), "ok": b.ok}
            for b in report.balances
        },
        "lines": report.lines(),
    }


def run_reconcile_command(loaded: LoadedSettings, args: argparse.Namespace) -> int:
    settings = loaded.settings
    refusal = config_refusal(settings, loaded.origins)
    if refusal is None and not settings.ledger.path.exists():
        refusal = f"no ledger at {settings.ledger.path}"
    if refusal is not None:
        sys.stderr.write(f"trader reconcile: {refusal}\n")
        return EX_CONFIG
    holder = ledger_holder(settings.ledger.path)
    dry_run = bool(args.dry_run) or holder is not None
    if holder is not None:
        sys.stderr.write(f"trader reconcile: the ledger is held by {holder}: a dry run only\n")
    try:
        report = asyncio.run(_reconcile(settings, dry_run))
    except (StartRefused, LedgerError, UnknownSymbols) as error:
        sys.stderr.write(f"trader reconcile: {error}\n")
        return EX_CONFIG
    except ExchangeCallFailed as error:
        sys.stderr.write(f"trader reconcile: the venue cannot be reached: {error}\n")
        return EX_TEMPFAIL
    if report is None:
        sys.stdout.write("the ledger has no account yet: nothing to reconcile\n")
        return 0
    if args.json:
        sys.stdout.write(json.dumps(report_json(report), indent=2) + "\n")
    else:
        sys.stdout.write(report.text)
    if report.problems:
        return EX_MISMATCH
    return EX_TEMPFAIL if report.incomplete is not None else 0


async def _reconcile(settings: Settings, dry_run: bool) -> ReconcileReport | None:
    database = await Database.open(settings.ledger.path)
    try:
        if not await ReconciliationLedger(database).has_account():
            return None
        ledger = TradingLedger(database)
        now = datetime.now(UTC)
        broker, close = await _broker(settings, database, now, dry_run)
        try:
            state = await ledger.load()
            broker.restore(state.open_orders, state.fill_counts)
            report = await reconcile_ledger(broker, ledger, now, dry_run=dry_run)
            if report.problems and not dry_run:
                await _halt(ledger, state.status, state.day, report, now)
        finally:
            broker.close()
            await close()
        return report
    finally:
        await database.close()


async def _halt(
    ledger: TradingLedger,
    status: TradingStatus | None,
    day: DayMarks | None,
    report: ReconcileReport,
    now: datetime,
) -> None:
    """Trading stays halted until a person has looked: the next daemon reads it."""
    reason = f"reconciliation: {report.problems[0]}"
    if status is None:
        await ledger.record_status(TradingStatus(TradingState.HALTED, reason, now), day)
    elif status.state is not TradingState.HALTED:
        await ledger.record_status(status.to(TradingState.HALTED, reason, now), day)


async def _broker(
    settings: Settings, database: Database, now: datetime, dry_run: bool
) -> tuple[Broker, Any]:
    """The ledger's broker, and what closes its connection. A dry run takes no locks."""
    if settings.broker.mode == "paper":
        from trader.broker.paper import PaperBroker  # noqa: PLC0415

        async def nothing() -> None:
            return None

        return PaperBroker(settings.broker, {}), nothing
    # ccxt loads only for a live ledger.
    from trader.broker.factory import build_broker  # noqa: PLC0415
    from trader.broker.live import LiveBroker  # noqa: PLC0415
    from trader.clock import WallClock  # noqa: PLC0415
    from trader.market.ccxt_feed import CcxtMarketData, create_exchange  # noqa: PLC0415

    feed = CcxtMarketData(create_exchange(settings.exchange), WallClock())
    try:
        await feed.start(settings.market.symbols)
        instruments = {s: feed.instrument(s) for s in settings.market.symbols}
        broker: Broker
        if dry_run:
            broker = LiveBroker(feed.exchange, settings.broker, instruments)
        else:
            broker, _cash = await build_broker(settings, feed, instruments, database, now)
    except BaseException:
        await feed.close()
        raise
    return broker, feed.close
