"""The trading state: ACTIVE, REDUCING (only orders that shrink exposure) or HALTED, always
with its reason. Changes are explicit transitions; the engine logs and persists each one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from trader.domain import DomainError, ensure_utc


class TradingState(StrEnum):
    ACTIVE = "active"
    REDUCING = "reducing"
    HALTED = "halted"


_ALLOWED = {
    TradingState.ACTIVE: {TradingState.REDUCING, TradingState.HALTED},
    TradingState.REDUCING: {TradingState.ACTIVE, TradingState.HALTED},
    TradingState.HALTED: {TradingState.ACTIVE, TradingState.REDUCING},
}


@dataclass(frozen=True)
class TradingStatus:
    state: TradingState
    reason: str
    since: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "since", ensure_utc(self.since, "since"))
        if not self.reason:
            raise DomainError("a trading state always has its reason")

    def to(self, state: TradingState, reason: str, at: datetime) -> TradingStatus:
        if state not in _ALLOWED[self.state]:
            raise DomainError(f"trading state {self.state} -> {state} is not a transition")
        return TradingStatus(state, reason, at)
