"""`trader forecast --data FILE`: one forecast of the last window of a file of bars."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import Verbs, add_reading_options, load, positive, reading_options


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    forecast = verbs.add_parser(
        "forecast", parents=[common], help="one forecast of the last window of a file of bars"
    )
    forecast.add_argument("--model", choices=["toto", "toto2", "kronos", "baseline"])
    forecast.add_argument("--data", type=Path, required=True, help="CSV or Parquet of bars")
    forecast.add_argument("--symbol", help="symbol of the data (default: from the file name)")
    forecast.add_argument(
        "--weights", type=Path, metavar="DIR", help="checkpoint directory (default: HF cache)"
    )
    forecast.add_argument("--tokenizer", type=Path, metavar="DIR", help="Kronos tokenizer")
    forecast.add_argument(
        "--download", action="store_true", help="fetch missing weights from the Hugging Face hub"
    )
    forecast.add_argument("--context", type=positive, help="bars of context (the last N)")
    forecast.add_argument("--horizon", type=positive, help="bars ahead")
    forecast.add_argument("--samples", type=positive, help="sample paths")
    forecast.add_argument("--seed", type=int, help="sampler seed")
    forecast.add_argument("--device", help="auto, cpu, cuda or cuda:N")
    forecast.add_argument("--json", action="store_true", help="print JSON")
    add_reading_options(forecast).set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: torch and the models load only for the verbs that need them.
    from trader.forecast.oneshot import OneShot, run_forecast_command  # noqa: PLC0415

    settings = load(args).settings
    return run_forecast_command(
        settings.forecast,
        OneShot(
            model=args.model or settings.forecast.model,
            data=args.data,
            symbol=args.symbol,
            context=args.context or settings.market.context_bars,
            horizon=args.horizon or settings.forecast.horizon,
            samples=args.samples,
            seed=args.seed,
            device=args.device,
            weights=args.weights,
            tokenizer=args.tokenizer,
            download=args.download,
            as_json=args.json,
            reading=reading_options(args),
        ),
    )
