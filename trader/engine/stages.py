"""How the tick runs each of its stages: `with stage(report, "fills"): ...` times the block into
the report and never lets it raise. A failure is logged and counted in the report, and the
tick goes on without that stage's result. A broker that refuses our credentials halts trading;
the change is booked with the tick. A write the ledger's disk refused halts trading too, told
by `write_outage.WriteOutage` in one line at the tick's end. Cancellation and interrupts still
propagate."""

from __future__ import annotations

import time
from types import TracebackType

from structlog.typing import FilteringBoundLogger

from trader.broker.protocol import BrokerHalt
from trader.engine.account import Account
from trader.engine.report import TickReport
from trader.engine.write_outage import WriteOutage
from trader.risk.engine import RiskEngine


class StageRunner:
    def __init__(
        self, risk: RiskEngine, account: Account, outage: WriteOutage, log: FilteringBoundLogger
    ) -> None:
        self._risk = risk
        self._account = account
        self._outage = outage
        self._log = log

    def __call__(self, report: TickReport, name: str) -> Stage:
        return Stage(self, report, name)

    def failed(self, report: TickReport, name: str, error: Exception) -> None:
        if isinstance(error, BrokerHalt):
            # The venue refuses our credentials: nothing more may be sent until a person
            # has fixed them. The change is booked with the tick.
            self._log.error("stage failed", stage=name, reason=str(error))
            report.failed_stages.append(name)
            account = self._account
            account.halted_by = self._risk.halt(str(error), report.at) or account.halted_by
        elif self._outage.failed(name, error, report.at):
            report.failed_stages.append(name)  # a full disk: no traceback, it is no bug
        else:
            self._log.exception("stage failed", stage=name)
            report.failed_stages.append(name)


class Stage:
    """One stage of one tick, as a `with` block."""

    __slots__ = ("_began", "_name", "_report", "_runner")

    def __init__(self, runner: StageRunner, report: TickReport, name: str) -> None:
        self._runner, self._report, self._name = runner, report, name

    def __enter__(self) -> None:
        self._began = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        """True (swallowed) for a stage that failed with an Exception."""
        try:
            if isinstance(error, Exception):
                self._runner.failed(self._report, self._name, error)
                return True
            return False
        finally:
            self._report.timings[self._name] = time.perf_counter() - self._began
