"""The tick's ledger stage: value the portfolio, let the risk engine see the equity, and write
everything the tick did (fills, orders, positions, how far the market was read, the tick's
record, a change of the trading state) to the ledger in one transaction. And the rollback: a
tick whose fills or orders failed half-way goes back to what the ledger holds, so half of its
money is never booked. A tick the disk refuses halts trading, and the first tick it takes
again resumes it (`write_outage`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from structlog.typing import FilteringBoundLogger

from trader.domain import Portfolio
from trader.engine.account import Account
from trader.engine.report import EngineHooks, TickReport, announce
from trader.engine.valuation import Valuation, current_marks, valuation
from trader.engine.write_outage import WriteOutage
from trader.ledger.trading import TickRecord, TradingLedger
from trader.market.step import MarketDataStep, TickData
from trader.risk.engine import RiskEngine
from trader.risk.state import TradingStatus


@dataclass(frozen=True, kw_only=True)
class TickBooking:
    market: MarketDataStep
    risk: RiskEngine
    ledger: TradingLedger
    account: Account
    outage: WriteOutage
    log: FilteringBoundLogger

    async def commit(
        self, data: TickData | None, at: datetime, report: TickReport, hooks: EngineHooks
    ) -> None:
        account, risk = self.account, self.risk
        # The orders stage valued the same windows and quotes already, when it ran.
        marks = report.marks or {**current_marks(self.market.windows, data), **account.perp_marks}
        record, change = settle(report, marks, account.portfolio, risk)
        change = change or account.halted_by
        account.halted_by = None
        outage = self.outage
        try:
            await self.ledger.commit_tick(
                account.executions, account.portfolio, account.cursor_moves, record,
                change or outage.unrecorded,  # a halt for a refused write, booked once it can be
                account.perp,
            )  # fmt: skip
        except Exception as error:
            # Stop trading at once: until writes succeed again (a refused write), else until a
            # person has looked. Then nothing of this tick is booked: forget it here too.
            if not outage.failed("ledger", error, at):
                risk.halt("the ledger could not book a tick", at)
            account.recover(await self.ledger.load())
            raise
        outage.unrecorded = None
        account.cursor.update(account.cursor_moves)
        account.last_tick = at
        report.portfolio = account.portfolio
        if change is not None:
            announce(change, hooks, self.log)
        resumed = await outage.recover(self.ledger, at)
        if resumed is not None:
            report.status = resumed
            announce(resumed, hooks, self.log)

    async def roll_back(self, at: datetime) -> None:
        """Back to what the ledger holds, after a tick's fills or orders failed half-way."""
        try:
            self.account.recover(await self.ledger.load())
        except Exception:
            # Memory and ledger may now disagree: nothing trades until a person looks.
            self.risk.halt("a failed tick could not be rolled back", at)
            raise


def settle(
    report: TickReport,
    marks: dict[str, Decimal],
    portfolio: Portfolio,
    risk: RiskEngine,
    valued: Valuation | None = None,
) -> tuple[TickRecord, TradingStatus | None]:
    """The tick's end, before the ledger: the portfolio valued at `marks` (`valued`, when the
    caller has), the risk engine seeing the equity (its new status when it changes), the
    report's figures, and the ledger's record of the tick. The record's drawdown is from the
    account's all-time high (the backtest report's max drawdown is its maximum); the report's
    is the one `max_drawdown` limits, from the peak re-based when trading last resumed."""
    equity, _, exposure = valued or valuation(portfolio, marks)
    change = risk.observe_equity(report.at, equity)
    drawdown = risk.drawdown(equity)  # the ledger's: from the account's all-time high
    report.equity, report.status = equity, risk.status
    # Telemetry's figures are the limits' own, so that each compares with its limit.
    report.marks, report.drawdown = marks, risk.limit_drawdown(equity)
    report.daily_loss = risk.daily_loss(equity)
    record = TickRecord(
        at=report.at,
        outcome=report.outcome,
        ready=len(report.ready),
        skipped=report.skipped,
        timings=report.timings,
        forecasts=report.forecasts,
        decisions=report.decisions,
        equity=equity,
        cash=portfolio.cash,
        exposure=exposure,
        drawdown=drawdown,
        status=risk.status,
        day=risk.day,
        quotes=report.quotes,
        refusals=report.refusals,
    )
    return record, change
