"""The verdict of a run: the base model, the fine-tuned model and the naive no-change forecast,
scored on the same windows of the held-out test tail, each model loaded from its folder the
way `trader forecast` loads weights (so the written checkpoint is proven to load).

Nothing is copied over the serving weights: the summary says whether fine-tuning helped, and
pointing `forecast.weights_dir` at the new weights is the operator's decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trader.config.finetune_settings import FinetuneSettings
from trader.config.forecast_settings import ForecastSettings
from trader.forecast.build import build_forecaster
from trader.forecast.device import DeviceChoice
from trader.forecast.protocol import ForecastRequest
from trader.training.base import Base
from trader.training.data import Refs, Series
from trader.training.scoring import ESTIMATOR, LEVELS, Scores, score

CHUNK = 16  # windows per model call


@dataclass(frozen=True)
class Evaluation:
    scores: dict[str, Scores]  # base, finetuned, naive
    horizon: int
    context: int

    @property
    def helped(self) -> bool:
        return self.scores["finetuned"].quantile_loss < self.scores["base"].quantile_loss

    @property
    def beats_naive(self) -> bool:
        return self.scores["finetuned"].quantile_loss < self.scores["naive"].quantile_loss

    def verdict(self) -> str:
        tuned, base, naive = (self.scores[k] for k in ("finetuned", "base", "naive"))
        change = "helped" if self.helped else "did NOT help"
        naive_part = "beats" if self.beats_naive else "does NOT beat"
        return (
            f"fine-tuning {change}: quantile loss {tuned.quantile_loss:.6g} fine-tuned against "
            f"{base.quantile_loss:.6g} for the base on {tuned.windows} held-out test windows; "
            f"the fine-tuned model {naive_part} the naive no-change forecast "
            f"({naive.quantile_loss:.6g})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {name: s.as_dict() for name, s in self.scores.items()} | {
            "helped": self.helped,
            "beats_naive": self.beats_naive,
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
    requests, actual = [], []
    for s, first in refs.tolist():
        bars = series[s].bars
        window = bars[first : first + context]
        future = bars[first + context : first + context + horizon]
        requests.append(ForecastRequest(series[s].symbol, window, horizon, LEVELS))
        actual.append([b.close / window[-1].close - 1 for b in future])
    realised = np.array(actual, dtype=np.float64)
    used = _forecast_settings(forecast, settings)

    def scores_of(path: Path, tokenizer: Path | None) -> Scores:
        return _scores(base.model, path, tokenizer, requests, realised, used, choice)

    scores = {
        "base": scores_of(base.path, base.tokenizer),
        "finetuned": scores_of(weights, None),
        "naive": score(np.zeros((*realised.shape, len(LEVELS))), LEVELS, realised),
    }
    return Evaluation(scores, horizon, context)


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


def _scores(
    model: str,
    path: Path,
    tokenizer: Path | None,
    requests: Sequence[ForecastRequest],
    realised: NDArray[np.float64],
    forecast: ForecastSettings,
    choice: DeviceChoice,
) -> Scores:
    forecaster = build_forecaster(
        model, forecast, choice, model_path=path, tokenizer_path=tokenizer
    )
    rows = []
    for start in range(0, len(requests), CHUNK):
        chunk = requests[start : start + CHUNK]
        for request, result in zip(chunk, forecaster.forecast(chunk), strict=True):
            last = request.bars[-1].close
            table = result.quantiles["close"]
            rows.append([[table[q][k] / last - 1 for q in LEVELS] for k in range(request.horizon)])
    return score(np.array(rows, dtype=np.float64), LEVELS, realised)
