"""A ledger whose disk refuses writes (full, failing, read-only: `ledger.write_failure`): trading
halts at the first refused write of a tick, with the reason, and the halt is published at once
(the hooks: metrics and MQTT) although the ledger cannot take it; each tick that meets refused
writes is one error line, with no traceback.

Trading resumes by itself at the first tick whose writes all succeed, back to the state the
outage stopped (ACTIVE, or REDUCING with its reason; a halt that was there before stays). That is
safe without a person: a refused write rolls its transaction back, so no fill, order or position
changed in the ledger or in memory (the engine takes the ledger's state up again), and the
halted ticks sent nothing. Both changes go into the ledger once it can take them. A person may
still `pause`; a `resume` during the outage lasts until the next refused write."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from trader.engine.report import EngineHooks, announce
from trader.ledger.trading import TradingLedger
from trader.ledger.write_failure import cannot_write, write_failure
from trader.risk.engine import RiskEngine
from trader.risk.state import TradingStatus

RESUMES = "trading resumes by itself at the first tick whose writes succeed"
FIX = "free space on the ledger's disk (or make it writable again): " + RESUMES


class WriteOutage:
    def __init__(self, risk: RiskEngine, path: Path, log: FilteringBoundLogger) -> None:
        self._risk, self.path, self._log = risk, path, log
        self.reason: str | None = None  # why the disk refuses writes, while it does
        self.failures = 0  # refused writes since the engine started
        # Told the reason when an outage begins (a replay stops: nobody will free the space).
        self.on_start: Callable[[str], None] | None = None
        self._halt: TradingStatus | None = None  # the halt it made (None: halted already)
        self._before: TradingStatus | None = None  # the status that halt replaced
        self.unrecorded: TradingStatus | None = None  # the halt, not yet in the ledger
        self._errors: list[BaseException] = []  # this tick's refused writes
        self._stages: list[str] = []
        self._announce: TradingStatus | None = None  # a halt this tick made

    @property
    def refused_this_tick(self) -> bool:
        return bool(self._errors)

    def failed(self, stage: str, error: BaseException, at: datetime) -> bool:
        """Whether `error` is a refused write (counted once, however often it is told): the
        first one halts trading at once."""
        reason = write_failure(error)
        if reason is None:
            return False
        if any(seen is error for seen in self._errors):
            return True
        self._errors.append(error)
        self._stages.append(stage)
        self.failures += 1
        began, self.reason = self.reason is None, reason
        before = self._risk.status
        halt = self._risk.halt(f"{cannot_write(self.path, reason)}: {RESUMES}", at)
        if halt is not None:
            self._halt, self._before = halt, before
            self.unrecorded = self._announce = halt
        if began and self.on_start is not None:
            self.on_start(str(cannot_write(self.path, reason)))
        return True

    def end_tick(self, hooks: EngineHooks) -> int:
        """The tick's one line when writes were refused, and a halt it made told to the hooks
        (it is not in the ledger yet); the number of refused writes."""
        refused, stages = len(self._errors), self._stages
        self._errors, self._stages = [], []
        if self._announce is not None:
            announce(self._announce, hooks, self._log)
            self._announce = None
        if refused:
            self._log.error(
                "ledger write failed", path=str(self.path), reason=self.reason, stages=stages,
                trading_state=str(self._risk.state), failures=self.failures, fix=FIX,
            )  # fmt: skip
        return refused

    async def recover(self, ledger: TradingLedger, at: datetime) -> TradingStatus | None:
        """After a tick whose writes all succeeded (the tick's own is the probe): the outage
        ends, and trading goes back to the state it stopped (the change, to announce). The halt
        was booked with the tick (`unrecorded`); the change is recorded before it is taken,
        so a write refused again leaves trading halted."""
        if self.reason is None or self._errors:
            return None
        self._log.warning("ledger writable again", path=str(self.path), failures=self.failures)
        self.reason, self.unrecorded = None, None
        halt, before = self._halt, self._before
        if halt is None or before is None or self._risk.status is not halt:
            self._halt = self._before = None
            return None  # it halted nothing, or a person or another halt has taken over since
        resumed = halt.to(before.state, f"the ledger can be written again; {before.reason}", at)
        try:
            await ledger.record_status(resumed, self._risk.day)
        except Exception as error:
            if not self.failed("ledger", error, at):  # refused again: still halted
                raise
            return None
        self._halt = self._before = None
        return resumed if self._risk.restore(halt, resumed) else None
