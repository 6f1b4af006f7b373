"""Reconcile a ledger with its broker now, outside the daemon (`trader reconcile`): book what
the ledger missed, record the report, and leave trading HALTED on a mismatch nobody explained.
A dry run takes no locks and books nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trader.broker.protocol import Broker
from trader.clock import Clock
from trader.config.schema import Settings
from trader.domain.reconciliation import ReconcileReport
from trader.engine.reconciling import reconcile_ledger
from trader.ledger.database import Database
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger
from trader.market.live_source import exchange_feed, venue_clock
from trader.risk.marks import DayMarks
from trader.risk.state import TradingState, TradingStatus


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
        "fees": {  # by asset: posted by the venue (all booked), and still estimates
            "posted": {asset: str(v) for asset, v in sorted(report.posted_fees.items())},
            "estimated": {asset: str(v) for asset, v in sorted(report.pending_fees.items())},
            "corrections": [c.describe() for c in report.fee_corrections],
        },
        "lines": report.lines(),
    }


async def reconcile_now(settings: Settings, dry_run: bool) -> ReconcileReport | None:
    """The report, or None when the ledger has no account yet."""
    database = await Database.open(settings.ledger.path)
    try:
        if not await ReconciliationLedger(database).has_account():
            return None
        ledger = TradingLedger(database)
        clock = venue_clock(settings.exchange)  # the ledger's times are the venue's
        now = clock.now()
        broker, close = await _broker(settings, database, clock, dry_run)
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
    settings: Settings, database: Database, clock: Clock, dry_run: bool
) -> tuple[Broker, Any]:
    """The ledger's broker, and what closes its connection. A dry run takes no locks.
    Raises ValueError for exchange settings that cannot work."""
    if settings.broker.mode == "paper":
        from trader.broker.paper import PaperBroker  # noqa: PLC0415

        async def nothing() -> None:
            return None

        return PaperBroker(settings.broker, {}), nothing
    # ccxt (or Alpaca's SDK) loads only for a live ledger.
    from trader.broker.factory import build_broker  # noqa: PLC0415
    from trader.broker.live.broker import LiveBroker  # noqa: PLC0415

    feed = exchange_feed(settings.exchange, clock)
    try:
        await feed.start(settings.market.symbols)
        instruments = {s: feed.instrument(s) for s in settings.market.symbols}
        broker: Broker
        if dry_run and settings.market.kind == "perp":
            # Nothing set at the venue: the account is compared as start-up would leave it.
            from trader.broker.factory import baseline_time  # noqa: PLC0415
            from trader.broker.live.perp import PerpLiveBroker  # noqa: PLC0415
            from trader.broker.live.perp_funding import MemoryFunding  # noqa: PLC0415

            since = await baseline_time(database) or clock.now()
            broker = PerpLiveBroker(
                feed.exchange, settings.broker, instruments,
                max_leverage=settings.risk.max_leverage, funding=MemoryFunding(since),
            )  # fmt: skip
        elif dry_run:
            broker = LiveBroker(feed.exchange, settings.broker, instruments)
        else:
            broker, _cash = await build_broker(settings, feed, instruments, database, clock.now())
    except BaseException:
        await feed.close()
        raise
    return broker, feed.close
