"""The tick's forecast stage: every model forecasts every ready symbol in one batched call, on
the inference worker (never on the event loop). A model that fails costs only its own
forecasts; one that answers for the wrong symbol or horizon has that answer dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from structlog.typing import FilteringBoundLogger

from trader.config.forecast_settings import ForecastSettings
from trader.domain import Forecast
from trader.engine.report import TickReport
from trader.forecast.protocol import Forecaster, ForecastRequest
from trader.market.step import TickData

T = TypeVar("T")


class InlineExecutor(Executor):
    """Runs the forecaster in the calling thread, for a backtest: its forecasts are cache
    lookups (microseconds) and nothing else waits on its loop, so a hop to a worker thread
    (or even through the event loop) per tick would cost more than the lookup."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the awaiting caller, as a thread would
            future.set_exception(error)
        return future


class Forecasting:
    def __init__(
        self,
        forecasters: list[Forecaster],
        inference: Executor | None,
        log: FilteringBoundLogger,
    ) -> None:
        self._forecasters = forecasters
        # One worker per device: inference never runs on the event loop.
        self._inference = inference or ThreadPoolExecutor(1, thread_name_prefix="inference")
        self._log = log

    async def run(
        self, data: TickData, forecast: ForecastSettings, report: TickReport
    ) -> dict[str, dict[str, Forecast]]:
        """Each model's usable forecasts, by model name and then symbol."""
        requests = [
            ForecastRequest(d.symbol, d.bars, forecast.horizon, forecast.quantiles)
            for d in data.ready.values()
        ]
        by_model: dict[str, dict[str, Forecast]] = {}
        if not requests:
            return by_model
        for forecaster in self._forecasters:
            try:
                results = await self._call(forecaster, requests)
            except Exception:
                self._log.exception("forecast failed", model=forecaster.name)
                report.failed_stages.append(f"forecast:{forecaster.name}")
                continue
            usable = {
                f.symbol: f
                for request, f in zip(requests, results, strict=False)
                if f.symbol == request.symbol and f.steps == request.horizon
            }
            by_model[forecaster.name] = usable
            report.forecasts += usable.values()
        return by_model

    async def _call(
        self, forecaster: Forecaster, requests: list[ForecastRequest]
    ) -> list[Forecast]:
        if isinstance(self._inference, InlineExecutor):
            return forecaster.forecast(requests)  # no trip through the event loop
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._inference, forecaster.forecast, requests)

    def close(self) -> None:
        self._inference.shutdown(wait=True)
