"""`trader backtest --data FILE...`: every strategy over history, beside buy-and-hold."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import (
    Verbs,
    add_reading_options,
    loader,
    reading_options,
    utc_date,
    utc_end,
)

STRATEGIES = ("simple", "ci_guard", "maxdiff")


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "backtest",
        parents=[common],
        help="run the engine over history and report honest statistics",
        description="Walk-forward backtest: the daemon's engine with the paper broker over "
        "recorded bars, every strategy on the same cached forecasts, beside buy-and-hold.",
    )
    add = parser.add_argument
    add("--data", nargs="+", type=Path, required=True, metavar="FILE", help="CSV or Parquet bars")
    add("--symbol", action="append", help="symbol of each file, in order (default: its name)")
    add("--model", choices=["toto", "toto2", "kronos", "baseline"], help="default: forecast.model")
    add("--strategy", nargs="+", choices=STRATEGIES, help="default: backtest.strategies")
    add("--from", dest="begin", type=utc_date, metavar="D", help="first tick, UTC date or time")
    add("--to", dest="end", type=utc_end, metavar="D", help="last tick, UTC (a date: all that day)")
    add("--out", type=Path, metavar="DIR", help="write the report, plots and ledgers here")
    add(
        "--allow-skips",
        action="store_true",
        help="exit 0 even when symbols skipped more than backtest.max_skipped_share of their "
        "ticks or a tick failed (the summary still lists them first)",
    )
    add_reading_options(parser).set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trader.backtest.command import BacktestRequest, run_backtest_command  # noqa: PLC0415

    # Decisions, orders and fills are in the backtest's ledgers: the log keeps to warnings
    # unless asked for more.
    args.log_level = args.log_level or "WARNING"
    request = BacktestRequest(
        data=args.data,
        symbols=args.symbol,
        reading=reading_options(args),
        begin=args.begin,
        end=args.end,
        model=args.model,
        strategies=args.strategy,
        out=args.out,
        allow_skips=args.allow_skips,
    )
    return run_backtest_command(request, loader(args))
