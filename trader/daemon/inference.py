"""Model inference off the event loop: one worker thread per device, and the slot each model
sits in, which times every batched call and reports torch's own compile counts.

One thread per device, not per model: two models on one GPU would only fight for it, and a
single thread keeps a device's calls in order. The engine hands each tick's symbols to a
model in one call (a batch), on that thread, while the loop keeps serving metrics, MQTT and
orders.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from trader.domain import Bar, Forecast, Timeframe
from trader.forecast.protocol import CompileStats, Forecaster, ForecastRequest

T = TypeVar("T")


class ModelNotLoaded(RuntimeError):
    """A forecast was asked of a slot whose model has not been loaded."""


class InferenceObserver(Protocol):
    def observe_inference(self, model: str, device: str, mode: str, seconds: float) -> None: ...

    def add_compile_counts(
        self, model: str, recompiles: int, graph_breaks: int, cudagraph_skips: int
    ) -> None: ...

    def set_gpu_memory(self, allocated: int, reserved: int, peak: int) -> None: ...

    def set_forced_eager(self, model: str, forced: bool) -> None: ...


def leave_a_core_to_the_loop() -> int:
    """For a model on the CPU: torch's intra-op threads on every core but one, which the event
    loop keeps. With every core busy in a matrix multiply the loop waits for a CPU, 10-15 ms at
    a time (bench/daemon.py measures both). torch's thread count is process-wide: the daemon
    calls this once at start-up. The thread count, for the log."""
    import torch  # noqa: PLC0415 - loaded where a model runs: the baseline needs no torch

    threads = max(1, (os.cpu_count() or 1) - 1)
    torch.set_num_threads(threads)
    return threads


class InferenceWorker:
    """The one thread that runs a device's model calls."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"inference-{device}")

    async def run(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, work)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)


def _compile_stats(model: Forecaster | None) -> CompileStats:
    # Read defensively: a stand-in forecaster (a test double, a bench's) may not carry them.
    stats = getattr(model, "compile_stats", None)
    return stats if isinstance(stats, CompileStats) else CompileStats()


class ModelSlot:
    """A forecaster as the engine sees it, before and after its model is loaded. Each call is
    timed and counted as `trader_inference_latency_seconds{model,device,mode}`; compile
    counters move by what torch reports after warm-up, and `trader_model_forced_eager{model}`
    says whether the compile guard switched the model to eager."""

    def __init__(self, name: str, device: str, observer: InferenceObserver | None = None) -> None:
        self.name = name
        self.device = device
        self._observer = observer
        self._model: Forecaster | None = None
        self._counted = CompileStats()

    @property
    def model(self) -> Forecaster | None:
        return self._model

    @property
    def mode(self) -> str:
        return str(getattr(self._model, "mode", "eager"))

    @property
    def compile_stats(self) -> CompileStats:
        return _compile_stats(self._model)

    def load(self, model: Forecaster) -> None:
        if model.name != self.name:
            raise ValueError(f"slot {self.name} cannot hold model {model.name}")
        self._model = model

    def warm_up(self, requests: Sequence[ForecastRequest]) -> float:
        """One untimed call (compiles, allocator pools, first-touch pages); its seconds. The
        compile counters start from what torch reports after it."""
        model = self._require()
        began = time.perf_counter()
        model.forecast(requests)
        self._counted = _compile_stats(model)
        return time.perf_counter() - began

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        model = self._require()
        began = time.perf_counter()
        try:
            return model.forecast(requests)
        finally:
            self._observe(model, time.perf_counter() - began)

    def _require(self) -> Forecaster:
        if self._model is None:
            raise ModelNotLoaded(f"model {self.name} is not loaded yet")
        return self._model

    def _observe(self, model: Forecaster, seconds: float) -> None:
        observer = self._observer
        if observer is None:
            return
        observer.observe_inference(self.name, self.device, self.mode, seconds)
        now = _compile_stats(model)
        before, self._counted = self._counted, now
        observer.add_compile_counts(
            self.name,
            now.recompiles - before.recompiles,
            now.graph_breaks - before.graph_breaks,
            now.cudagraph_skips - before.cudagraph_skips,
        )
        observer.set_forced_eager(self.name, now.forced_eager is not None)
        if self.device.startswith("cuda"):
            import torch  # noqa: PLC0415 - loaded already: the model on this GPU is torch's

            observer.set_gpu_memory(
                torch.cuda.memory_allocated(self.device),
                torch.cuda.memory_reserved(self.device),
                torch.cuda.max_memory_allocated(self.device),
            )


def warm_up_requests(
    symbols: Sequence[str],
    timeframe: Timeframe,
    context: int,
    horizon: int,
    quantiles: Sequence[float],
) -> list[ForecastRequest]:
    """A batch shaped like a tick's (every symbol, full context): a smooth made-up series,
    used only to exercise the model before the first real tick."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    requests = []
    for n, symbol in enumerate(symbols):
        bars = []
        for i in range(context):
            price = 100.0 * (1 + n) * (1 + 0.01 * math.sin(i / 7) + 0.0005 * i)
            at = start + timedelta(seconds=timeframe.seconds * i)
            bar = Bar(symbol, timeframe, at, price, price * 1.002, price * 0.998, price, 1e3)
            bars.append(bar)
        requests.append(ForecastRequest(symbol, tuple(bars), horizon, tuple(quantiles)))
    return requests
