"""`trader forecast`: one forecast of the last window of a file of bars, with the time it took.

Weights come from `--weights` (and `--tokenizer` for Kronos), else from `forecast.weights_dir`
or the Hugging Face cache; the hub only with `--download`. Missing weights are said plainly.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trader.config.forecast_settings import ForecastSettings
from trader.domain import Bar, Forecast
from trader.exit_codes import EX_DATAERR, EX_UNAVAILABLE
from trader.forecast.build import ModelUnavailable, build_forecaster
from trader.forecast.device import choose_device
from trader.forecast.device_choice import DeviceUnavailable
from trader.forecast.protocol import ForecastRequest
from trader.forecast.provenance import origins as weights_origins
from trader.market.files.options import AS_WRITTEN, ReadOptions
from trader.market.hygiene import parse_row
from trader.market.replay import ReplayDataError, read_recording


@dataclass(frozen=True)
class OneShot:
    """What `trader forecast` was asked for, settings defaults already applied."""

    model: str
    data: Path
    symbol: str | None
    context: int
    horizon: int
    samples: int | None
    seed: int | None
    device: str | None
    weights: Path | None
    tokenizer: Path | None
    download: bool
    as_json: bool
    reading: ReadOptions = AS_WRITTEN


def read_bars(
    path: Path, symbol: str | None, reading: ReadOptions = AS_WRITTEN
) -> tuple[list[Bar], Counter[str]]:
    """The file's valid bars, oldest first, and counts of the rows skipped, by reason."""
    recording = read_recording(path, symbol, options=reading)
    bars, skipped = [], Counter[str]()
    for row in recording.rows:
        parsed = parse_row(row, recording.symbol, recording.timeframe)
        if isinstance(parsed, Bar):
            bars.append(parsed)
        else:
            skipped[str(parsed)] += 1
    return bars, skipped


def _settings(base: ForecastSettings, request: OneShot) -> ForecastSettings:
    update: dict[str, Any] = {"download": request.download}
    if request.seed is not None:
        update["seed"] = request.seed
    if request.device is not None:
        update["device"] = request.device
    if request.samples is not None:
        update["toto"] = base.toto.model_copy(update={"num_samples": request.samples})
        update["kronos"] = base.kronos.model_copy(update={"sample_count": request.samples})
    return base.model_copy(update=update).with_model(request.model)


def run_forecast_command(base: ForecastSettings, request: OneShot) -> int:
    settings = _settings(base, request)
    try:
        bars, skipped = read_bars(request.data, request.symbol, request.reading)
    except ReplayDataError as error:
        sys.stderr.write(f"trader forecast: {error}\n")
        return EX_DATAERR
    if not bars:
        sys.stderr.write(f"trader forecast: {request.data}: no valid bars\n")
        return EX_DATAERR
    window = bars[-request.context :]
    origins = weights_origins(
        request.model, settings, model_path=request.weights, tokenizer_path=request.tokenizer
    )
    sys.stderr.writelines(f"{line}\n" for o in origins for line in o.lines())
    started = time.perf_counter()
    try:
        device = choose_device(settings.device, settings.precision)
        forecaster = build_forecaster(
            request.model,
            settings,
            device,
            model_path=request.weights,
            tokenizer_path=request.tokenizer,
        )
    except (DeviceUnavailable, ModelUnavailable) as error:
        hint = "" if request.weights else " (or give --weights DIR)"
        sys.stderr.write(f"trader forecast: {error}{hint}\n")
        return EX_UNAVAILABLE
    loaded = time.perf_counter()
    (forecast,) = forecaster.forecast(
        [ForecastRequest(window[-1].symbol, window, request.horizon, settings.quantiles)]
    )
    done = time.perf_counter()
    report = {
        "model": request.model,
        "symbol": forecast.symbol,
        "timeframe": forecast.timeframe.text,
        "as_of": forecast.as_of.isoformat(),
        "context_bars": len(window),
        "skipped_rows": dict(skipped),
        "horizon": forecast.steps,
        "samples": _samples(request.model, settings),
        "random_weights": getattr(forecaster, "random", None),
        "weights_origin": [o.as_dict() for o in origins],
        "seed": settings.seed,
        **device.describe(),
        "load_seconds": round(loaded - started, 4),
        "forecast_seconds": round(done - loaded, 4),
        "fields": _fields(forecast),
    }
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if request.as_json else _text(report))
    return 0


def _samples(model: str, settings: ForecastSettings) -> int | None:
    return {"toto": settings.toto.num_samples, "kronos": settings.kronos.sample_count}.get(model)


def _fields(forecast: Forecast) -> dict[str, Any]:
    return {
        field: {
            "mean": list(forecast.mean[field]),
            "quantiles": {str(level): list(v) for level, v in forecast.quantiles[field].items()},
        }
        for field in forecast.quantiles
    }


def _text(report: dict[str, Any]) -> str:
    lines = [f"warning: {report['random_weights']}"] if report["random_weights"] else []
    lines += [
        f"{report['model']} forecast for {report['symbol']} {report['timeframe']} after "
        f"{report['as_of']}: {report['context_bars']} bars of context, "
        f"{report['samples'] or 'no'} samples, seed {report['seed']}, "
        f"{report['device']} {report['precision']}",
        f"loaded in {report['load_seconds']:.3f} s, forecast in {report['forecast_seconds']:.3f} s",
    ]
    if report["fallback"]:
        lines.append(f"warning: running on the CPU because {report['fallback']}")
    if report["skipped_rows"]:
        lines.append(f"skipped rows: {report['skipped_rows']}")
    for field, table in report["fields"].items():
        levels = list(table["quantiles"])
        header = ["mean", *(f"q{level}" for level in levels)]
        lines += ["", field, "step " + "".join(f"{h:>14}" for h in header)]
        for step, mean in enumerate(table["mean"]):
            row = [mean, *(table["quantiles"][level][step] for level in levels)]
            lines.append(f"{step + 1:>4} " + "".join(f"{v:>14.6g}" for v in row))
    return "\n".join(lines) + "\n"
