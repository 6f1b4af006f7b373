"""The verdict of a run: the base model, the fine-tuned model and the naive forecast (the random
walk with the empirical quantiles of the past moves, `forecast.naive_window`: the baseline's
construction, as `trader evaluate` and the backtest judge skill), scored on the same windows
of the held-out test tail, each model loaded from its folder the way `trader forecast` loads
weights (so the written checkpoint is proven to load).

Nothing is copied over the serving weights: the summary says whether fine-tuning helped, and
pointing `forecast.weights_dir` at the new weights is the operator's decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trader.config.finetune_settings import FinetuneSettings
from trader.config.forecast_settings import ForecastSettings
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.build import build_forecaster
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.protocol import ForecastRequest
from trader.skill import Figures, as_returns, forecast_table, score
from trader.training.base import Base
from trader.training.data import Refs, Series

CHUNK = 16  # windows per model call
# Every 5%: the 50, 80 and 90% central intervals, and a quantile CRPS that leaves out little.
LEVELS = tuple(round(0.05 * k, 2) for k in range(1, 20))
ESTIMATOR = (
    "trader.skill on returns of the close relative to the context's last close: CRPS by "
    "scoringrules' quantile (pinball) approximation over levels 0.05..0.95; skill = 1 - "
    "CRPS / CRPS of the naive random walk with the empirical quantiles of the past moves "
    "(forecast.naive_window bars of the context); skill_no_change against the no-change "
    "point; MASE = MAE of the median / MAE of the no-change forecast; coverage of the "
    "central intervals"
)


@dataclass(frozen=True)
class Evaluation:
    scores: dict[str, Figures]  # base, finetuned, naive
    windows: int
    horizon: int
    context: int

    def _crps(self, name: str) -> float:
        crps = self.scores[name].crps
        assert crps is not None  # every window is realised: the test tail is history
        return crps

    @property
    def helped(self) -> bool:
        return self._crps("finetuned") < self._crps("base")

    @property
    def beats_naive(self) -> bool:
        return self._crps("finetuned") < self._crps("naive")

    def verdict(self) -> str:
        change = "helped" if self.helped else "did NOT help"
        naive_part = "beats" if self.beats_naive else "does NOT beat"
        return (
            f"fine-tuning {change}: CRPS {self._crps('finetuned'):.6g} fine-tuned against "
            f"{self._crps('base'):.6g} for the base on {self.windows} held-out test windows; "
            f"the fine-tuned model {naive_part} the naive random walk with the empirical "
            f"quantiles of the past moves ({self._crps('naive'):.6g})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {name: asdict(figures) for name, figures in self.scores.items()} | {
            "helped": self.helped,
            "beats_naive": self.beats_naive,
            "windows": self.windows,
            "horizon": self.horizon,
            "context": self.context,
            "levels": list(LEVELS),
            "estimator": ESTIMATOR,
        }


def evaluate(
    base: Base,
    weights: Path,
    series: Sequence[Series],
    refs: Refs,
    settings: FinetuneSettings,
    forecast: ForecastSettings,
    choice: DeviceChoice,
) -> Evaluation:
    """Score the windows `refs` (context + horizon bars each) of the test tail."""
    context, horizon = settings.context, settings.horizon
    requests, future = [], []
    for s, first in refs.tolist():
        bars = series[s].bars
        window = bars[first : first + context]
        future.append([b.close for b in bars[first + context : first + context + horizon]])
        requests.append(ForecastRequest(series[s].symbol, window, horizon, LEVELS))
    last = np.array([r.bars[-1].close for r in requests], dtype=np.float64)
    realised = as_returns(np.array(future, dtype=np.float64), last)
    used = _forecast_settings(forecast, settings)

    # The naive reference from each window's own context: the baseline's code, so it is
    # the same forecast `trader evaluate` and a backtest's report judge skill against.
    lookback = min(forecast.naive_window, context - horizon)  # >= 8: FinetuneSettings
    naive = as_returns(forecast_table(BaselineForecaster(lookback).forecast(requests)), last)

    def figures(values: NDArray[np.float64]) -> Figures:
        return score(LEVELS, values, realised, reference=naive).figures()

    def model(path: Path, tokenizer: Path | None) -> Figures:
        values = _forecast(base.model, path, tokenizer, requests, used, choice)
        return figures(as_returns(values, last))

    scores = {
        "base": model(base.path, base.tokenizer),
        "finetuned": model(weights, None),
        "naive": figures(naive),
    }
    return Evaluation(scores, len(requests), horizon, context)


def _forecast_settings(forecast: ForecastSettings, settings: FinetuneSettings) -> ForecastSettings:
    return forecast.model_copy(
        update={
            "seed": settings.seed,
            "download": False,
            "toto": forecast.toto.model_copy(
                update={"num_samples": settings.evaluation_samples, "runtime": "eager"}
            ),
            "kronos": forecast.kronos.model_copy(
                update={
                    "sample_count": settings.evaluation_samples,
                    "runtime": "eager",
                    "max_context": max(forecast.kronos.max_context, settings.context),
                }
            ),
        }
    )


def _forecast(
    model: str,
    path: Path,
    tokenizer: Path | None,
    requests: Sequence[ForecastRequest],
    forecast: ForecastSettings,
    choice: DeviceChoice,
) -> NDArray[np.float64]:
    """The model's close quantiles [window, step, level], loaded from `path` as `trader
    forecast` loads weights."""
    forecaster = build_forecaster(
        model, forecast, choice, model_path=path, tokenizer_path=tokenizer
    )
    results = []
    for start in range(0, len(requests), CHUNK):
        results += forecaster.forecast(requests[start : start + CHUNK])
    return forecast_table(results)
