"""`trader evaluate`'s cost: forecasting beside scoring. Prints JSON.

On SOLUSDT_1h.csv (the last `--bars` bars), every bar an origin, horizon 24, context 512, the
default 19 quantile levels: the baseline forecasts every window (cold cache, then served from
it), and `trader.skill` scores them with the naive reference, 1,000-resample block-bootstrap
intervals overall and per step and the Diebold-Mariano test. Reported: origins forecast per
second, origins scored per second (the point figures alone, and with the intervals), and the
scoring's share of the whole (`scoring_over_forecasting`: scoring seconds / forecasting
seconds, the baseline being the cheapest forecaster there is; Toto and Kronos cost far more).

    .venv/bin/python bench/evaluate.py [--data FILE] [--bars N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import SHARED_DATA

from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.evaluate.run import evaluate
from trader.forecast.baseline import BaselineForecaster
from trader.logging import configure_logging
from trader.market.replay import Recording, read_recording
from trader.skill import as_returns, score


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "SOLUSDT_1h.csv")
    parser.add_argument("--bars", type=int, default=8760 + 512 + 24)
    args = parser.parse_args()
    configure_logging(LogSettings(level="WARNING", format="json"))
    full = read_recording(args.data, "SOL/USDT")
    recording = Recording(full.symbol, full.timeframe, full.rows[-args.bars :], full.path)
    with tempfile.TemporaryDirectory(prefix="bench-evaluate-") as scratch:
        settings = Settings.model_validate({
            "forecast": {"model": "baseline", "horizon": 24},
            "market": {"context_bars": 512, "calendar": "continuous"},
            "backtest": {"cache_dir": str(Path(scratch) / "cache")},
        })  # fmt: skip
        model = BaselineForecaster(settings.forecast.baseline_lookback)
        began = time.perf_counter()
        cold = evaluate(settings, {"SOL/USDT": recording}, [model], progress=False)
        cold_s = time.perf_counter() - began
        began = time.perf_counter()
        warm = evaluate(settings, {"SOL/USDT": recording}, [model], progress=False)
        warm_s = time.perf_counter() - began
    origins = warm.origins["SOL/USDT"]
    n = len(origins.ends_ms)
    # The point figures alone: one model and the naive reference, no intervals.
    levels = np.asarray(warm.levels)
    realised = as_returns(origins.realised, origins.last)
    values = np.broadcast_to(np.linspace(-0.02, 0.02, levels.size), (n, 24, levels.size))
    began = time.perf_counter()
    scored = score(levels, values, realised, scale=origins.last)
    scored.figures()
    point_s = time.perf_counter() - began
    forecast_s = cold.forecast_seconds["baseline"]
    print(json.dumps({
        "data": str(args.data), "origins": n, "horizon": 24, "levels": int(levels.size),
        "forecast_origins_per_s": round(n / forecast_s, 1),
        "cached_forecast_origins_per_s": round(n / warm.forecast_seconds["baseline"], 1),
        "score_point_origins_per_s": round(n / point_s, 1),
        "score_with_intervals_origins_per_s": round(n / warm.scoring_seconds, 1),
        "scoring_seconds": round(warm.scoring_seconds, 3),
        "forecasting_seconds_cold": round(forecast_s, 3),
        "scoring_over_forecasting": round(warm.scoring_seconds / forecast_s, 3),
        "evaluate_seconds_cold": round(cold_s, 2), "evaluate_seconds_cached": round(warm_s, 2),
    }, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
