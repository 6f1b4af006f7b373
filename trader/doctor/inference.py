"""The inference smoke: load the model on the chosen device and forecast one window twice
(cold, then warm), with the time and memory each step took. Eager: compiled mode is what
`trader bench compile` checks."""

from __future__ import annotations

import math
import resource
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import torch

from trader.config.schema import Settings
from trader.domain import Bar, Forecast, Timeframe
from trader.forecast.build import build_forecaster
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.oneshot import read_bars
from trader.forecast.protocol import ForecastRequest
from trader.forecast.random_weights import random_walk_bars, weights_or_random


@dataclass(frozen=True)
class InferenceOptions:
    model: str  # toto, toto2 or kronos
    weights: Path | None = None
    tokenizer: Path | None = None
    size: str = "published"  # of random weights, when no real ones are at hand
    data: Path | None = None  # bars to forecast; else a random walk


@dataclass(frozen=True)
class InferenceSmoke:
    ok: bool
    summary: str  # one line
    lines: list[str] = field(default_factory=list)


def _bars(settings: Settings, data: Path | None) -> tuple[list[Bar], str]:
    context = settings.market.context_bars
    if data is not None:
        bars, _ = read_bars(data, None)
        return bars[-context:], f"the last {min(context, len(bars))} bars of {data}"
    timeframe = Timeframe(settings.market.timeframe)
    end = datetime(2025, 1, 1, tzinfo=UTC)
    bars = random_walk_bars("SMOKE/USDT", context, timeframe=timeframe, end=end)
    return bars, f"{context} bars of a random walk (no --data given)"


def _peak_memory(device: torch.device) -> str:
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / 2**20
        return f"peak GPU memory allocated {peak:.0f} MiB"
    # ru_maxrss is in KiB on Linux: the process's peak, weights and doctor included.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return f"peak process RSS {peak:.0f} MiB"


def _finite(forecast: Forecast) -> bool:
    return all(
        math.isfinite(v)
        for table in forecast.quantiles.values()
        for values in table.values()
        for v in values
    )


def run_inference_smoke(
    settings: Settings, choice: DeviceChoice, options: InferenceOptions, scratch: Path
) -> InferenceSmoke:
    """Never raises: a failure is the finding, reported with what was reached."""
    lines = [f"model: {options.model} (eager), device {choice.device}, {choice.precision}"]
    try:
        return _run(settings, choice, options, scratch, lines)
    except Exception as error:  # the report must be written whatever broke
        lines.append(f"FAILED: {type(error).__name__}: {error}")
        return InferenceSmoke(False, f"inference failed: {type(error).__name__}: {error}", lines)


def _run(
    settings: Settings,
    choice: DeviceChoice,
    options: InferenceOptions,
    scratch: Path,
    lines: list[str],
) -> InferenceSmoke:
    forecast_settings = settings.forecast.model_copy(
        update={
            "toto": settings.forecast.toto.model_copy(update={"runtime": "eager"}),
            "toto2": settings.forecast.toto2.model_copy(update={"runtime": "eager"}),
            "kronos": settings.forecast.kronos.model_copy(update={"runtime": "eager"}),
        }
    )
    began = time.perf_counter()
    weights = weights_or_random(
        options.model,
        forecast_settings,
        scratch,
        weights=options.weights,
        tokenizer=options.tokenizer,
        size=options.size,
    )
    lines.append(f"weights: {weights.label}")
    if choice.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(choice.device)
    prepared = time.perf_counter()
    forecaster = build_forecaster(
        options.model,
        forecast_settings,
        choice,
        model_path=weights.model,
        tokenizer_path=weights.tokenizer,
    )
    loaded = time.perf_counter()
    bars, source = _bars(settings, options.data)
    request = ForecastRequest(
        bars[-1].symbol, bars, settings.forecast.horizon, settings.forecast.quantiles
    )
    samples = {"toto": forecast_settings.toto.num_samples, "toto2": None}.get(
        options.model, forecast_settings.kronos.sample_count
    )
    paths = f"{samples} sample paths" if samples else "quantiles straight from the model"
    lines.append(f"input: {source}; horizon {request.horizon}; {paths}")
    timings = []
    forecast = None
    for _ in range(2):
        start = time.perf_counter()
        (forecast,) = forecaster.forecast([request])
        timings.append(time.perf_counter() - start)
    assert forecast is not None
    lines += [
        f"weights prepared in {prepared - began:.2f} s, loaded onto {choice.device} in "
        f"{loaded - prepared:.2f} s",
        f"first forecast {timings[0] * 1000:.0f} ms (cold), second {timings[1] * 1000:.0f} ms",
        _peak_memory(choice.device),
    ]
    median = forecast.quantiles["close"].get(0.5)
    if median:
        lines.append(f"close median, step 1: {median[0]:.6g} (last close {bars[-1].close:.6g})")
    if not _finite(forecast):
        lines.append("FAILED: the forecast holds non-finite values")
        return InferenceSmoke(False, "inference produced non-finite values", lines)
    random = " on RANDOM weights" if weights.random else ""
    summary = (
        f"{options.model} forecast on {choice.device}{random}: {timings[1] * 1000:.0f} ms warm, "
        f"{timings[0] * 1000:.0f} ms cold"
    )
    return InferenceSmoke(True, summary, lines)
