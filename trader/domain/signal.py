"""A strategy's decision for one symbol at one tick, with its reason and inputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from trader.domain.errors import DomainError
from trader.domain.symbols import check_symbol
from trader.domain.time import ensure_utc


class Direction(StrEnum):
    LONG = "long"
    FLAT = "flat"
    SHORT = "short"


@dataclass(frozen=True)
class Signal:
    """The position a strategy wants, and why ("no trade, because ..." is a FLAT signal)."""

    strategy: str
    symbol: str
    at: datetime
    direction: Direction
    reason: str
    inputs: Mapping[str, float | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.strategy:
            raise DomainError("signal strategy is empty")
        check_symbol(self.symbol)
        object.__setattr__(self, "at", ensure_utc(self.at, "signal time"))
        if not isinstance(self.direction, Direction):
            raise DomainError(f"signal direction must be a Direction, got {self.direction!r}")
        if not self.reason.strip():
            raise DomainError("every signal states its reason")
        object.__setattr__(self, "inputs", MappingProxyType(dict(self.inputs)))
