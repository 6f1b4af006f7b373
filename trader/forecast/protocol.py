"""The forecaster port. A forecaster takes a batch of symbols in one call: model inference is
batched across symbols, on a worker thread, never on the event loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from trader.domain import Bar, Forecast

FIELDS = ("close", "high", "low")


class ModelUnavailable(Exception):
    """A forecaster the settings ask for cannot be built here; the message says why."""


@dataclass(frozen=True)
class CompileStats:
    """What compiling cost a model after its warm-up, as torch reported it; `forced_eager`
    says why the guard switched it to eager, when it did. Eager models report zeros."""

    recompiles: int = 0
    graph_breaks: int = 0
    cudagraph_skips: int = 0
    forced_eager: str | None = None


@dataclass(frozen=True)
class ForecastRequest:
    """Forecast `horizon` bars after the last of `bars` (closed bars, oldest first)."""

    symbol: str
    bars: Sequence[Bar]
    horizon: int
    quantiles: Sequence[float]


class Forecaster(Protocol):
    name: str

    @property
    def mode(self) -> str:
        """What runs now: "eager", or "compile" (a compiled model the guard switched back
        reports "eager" and says why in `compile_stats.forced_eager`)."""
        ...

    @property
    def compile_stats(self) -> CompileStats:
        """torch's recompiles, graph breaks and CUDA-graph skips after warm-up (zeros when
        eager)."""
        ...

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        """One forecast per request, in the same order. Blocking: callers run it off the loop."""
        ...
