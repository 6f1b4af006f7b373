"""Skipped ticks in the log, aggregated per symbol: a line when a symbol starts skipping and
when it first skips for another reason in the same run of skipped ticks, a reminder with the
counts by reason every `REMIND_EVERY` ticks it goes on skipping, and a line when it is priced
again, with how many ticks it skipped since when, by reason. A line per tick would bury the
log (a symbol behind a hole skips for hours) and say nothing the first line did not; every
tick's skips are in the ledger and the metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from structlog.typing import FilteringBoundLogger

from trader.market.hygiene import SkipReason

REMIND_EVERY = 100  # ticks of one run of skips between two "still skipped" lines


@dataclass
class _Run:
    """A symbol's ticks skipped in a row, by reason."""

    since: datetime
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def ticks(self) -> int:
        return self.reasons.total()

    def said(self) -> dict[str, object]:
        return {"since": self.since.isoformat(), "ticks": self.ticks, "reasons": dict(self.reasons)}


class SkipLog:
    def __init__(self, log: FilteringBoundLogger) -> None:
        self._log = log
        self._runs: dict[str, _Run] = {}

    def tick(
        self, now: datetime, skipped: Mapping[str, SkipReason], status: Mapping[str, str]
    ) -> None:
        """The data step's tick at `now`: `skipped` symbols and their reasons; `status`:
        each one's reason in words (the gap's length, the history it has)."""
        if not skipped and not self._runs:
            return  # every symbol priced, as before: the common tick, nothing to say
        for symbol, ended in list(self._runs.items()):
            if symbol not in skipped:
                del self._runs[symbol]
                self._log.warning(  # a warning too: a log of warnings says both ends
                    "symbol no longer skipped", symbol=symbol, at=now.isoformat(), **ended.said()
                )
        for symbol, reason in skipped.items():
            run = self._runs.get(symbol)
            if run is None:
                run = self._runs[symbol] = _Run(now)
            new = reason not in run.reasons
            run.reasons[reason] += 1
            if new:  # the run's first tick, or its first for this reason
                words = status.get(symbol, str(reason))
                self._log.warning("symbol skipped", symbol=symbol, reason=words, **run.said())
            elif run.ticks % REMIND_EVERY == 0:
                self._log.warning("symbol still skipped", symbol=symbol, **run.said())
