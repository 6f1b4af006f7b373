"""The forecaster port. A forecaster takes a batch of symbols in one call: model inference is
batched across symbols, on a worker thread, never on the event loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from trader.domain import Bar, Forecast

FIELDS = ("close", "high", "low")


@dataclass(frozen=True)
class ForecastRequest:
    """Forecast `horizon` bars after the last of `bars` (closed bars, oldest first)."""

    symbol: str
    bars: Sequence[Bar]
    horizon: int
    quantiles: Sequence[float]


class Forecaster(Protocol):
    name: str

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        """One forecast per request, in the same order. Blocking: callers run it off the loop."""
        ...
