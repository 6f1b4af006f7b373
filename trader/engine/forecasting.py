"""The tick's forecast stage: every model forecasts every ready symbol in one batched call, on
the inference worker (never on the event loop). A model that fails costs only its own
forecasts; one that answers for the wrong symbol or horizon has that answer dropped."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor

from structlog.typing import FilteringBoundLogger

from trader.config.forecast_settings import ForecastSettings
from trader.domain import Forecast
from trader.engine.report import TickReport
from trader.forecast.protocol import Forecaster, ForecastRequest
from trader.market.step import TickData


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
        loop = asyncio.get_running_loop()
        for forecaster in self._forecasters:
            try:
                results = await loop.run_in_executor(self._inference, forecaster.forecast, requests)
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

    def close(self) -> None:
        self._inference.shutdown(wait=True)
