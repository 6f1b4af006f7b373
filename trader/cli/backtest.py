"""`trader backtest --data FILE...`: every strategy over history, beside buy-and-hold."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import (
    Verbs,
    add_reading_options,
    loader,
    out_refused,
    positive,
    reading_options,
    utc_date,
    utc_end,
)

STRATEGIES = ("simple", "ci_guard", "maxdiff")
RANKINGS = ("sharpe", "sortino", "return", "annual", "drawdown")  # grid_report.METRICS


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "backtest",
        parents=[common],
        help="run the engine over history and report honest statistics",
        description="Walk-forward backtest: the daemon's engine with the paper broker over "
        "recorded bars, every strategy on the same cached forecasts, beside buy-and-hold.",
    )
    add = parser.add_argument
    add(
        "--data", nargs="+", type=Path, required=True, metavar="FILE",
        help="CSV or Parquet bars, or a directory of them (one instrument a file)",
    )  # fmt: skip
    add(
        "--symbol", action="append",
        help="symbol of each file, in order, or several of one file of several instruments "
        "(default: from its name, e.g. SOLUSDT_1h.csv or AAPL_USD_1d.csv, or its Ticker column)",
    )  # fmt: skip
    add("--model", choices=["toto", "toto2", "kronos", "baseline"], help="default: forecast.model")
    add(
        "--strategy",
        nargs="+",
        action="extend",
        choices=STRATEGIES,
        help="one or more, or repeated (default: backtest.strategies)",
    )
    add("--from", dest="begin", type=utc_date, metavar="D", help="first tick, UTC date or time")
    add("--to", dest="end", type=utc_end, metavar="D", help="last tick, UTC (a date: all that day)")
    add("--out", type=Path, metavar="DIR", help="write the report, plots and ledgers here")
    add(
        "--costs-from", type=Path, metavar="FILE",
        help="costs measured from a daemon's fills (the costs.json `trader shortfall` writes): "
        "its slippage, fees and spread replace the settings' (the report says which costs are "
        "measured and which modelled)",
    )  # fmt: skip
    add(
        "--assume-zero-funding", action="store_true",
        help="market.kind = perp: backtest bars without a funding recording beside them as if "
        "no funding were paid (the report says so first); refused without it",
    )  # fmt: skip
    add(
        "--allow-skips",
        action="store_true",
        help="exit 0 even when symbols skipped more than backtest.max_skipped_share of their "
        "ticks or a tick failed (the summary still lists them first)",
    )
    grid = parser.add_argument_group(
        "grids of runs", "every combination of the values, for every strategy and symbol, each a "
        "whole backtest in parallel, summarised in one table with the multiple-testing penalty",
    )  # fmt: skip
    grid.add_argument(
        "--grid", action="append", default=[], metavar="KEY=V1,V2",
        help="a setting and its values (e.g. strategy.position_fraction=0.1,0.2, ci_guard.k=1,2); "
        "repeat for more",
    )  # fmt: skip
    grid.add_argument(
        "--walk-forward", metavar="TRAIN/TEST",
        help="choose the grid's values on each training window, report only the test window "
        "after it (bars, e.g. 2000/500, or spans, e.g. 180d/30d)",
    )  # fmt: skip
    grid.add_argument(
        "--rank-by", choices=RANKINGS, default="sharpe", help="sort the runs by (default: sharpe)"
    )
    grid.add_argument(
        "--jobs", type=positive, metavar="N",
        help="worker processes: a grid's runs (default: all cores), or a backtest's strategies "
        "side by side (default: one each, up to twice the cores)",
    )  # fmt: skip
    grid.add_argument(
        "--ray", metavar="ADDRESS",
        help="run on a Ray cluster (host:port); data and the forecast cache at shared paths",
    )  # fmt: skip
    grid.add_argument(
        "--yes", action="store_true", help="run a grid of more than backtest.max_trials runs"
    )
    add_reading_options(parser).set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if (refused := out_refused("backtest", args.out)) is not None:
        return refused  # before any work: a report that cannot be written is not a run
    from trader.backtest.command import BacktestRequest, run_backtest_command  # noqa: PLC0415

    # Decisions, orders and fills are in the backtest's ledgers: the log keeps to warnings
    # unless asked for more (a grid's runs to errors: each run's report says what happened).
    asked_level = args.log_level
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
        grid=args.grid,
        walk_forward=args.walk_forward,
        rank_by=args.rank_by,
        jobs=args.jobs,
        ray=args.ray,
        yes=args.yes,
        log_level=asked_level,
        log_format=args.log_format,
        costs_from=args.costs_from,
        assume_zero_funding=args.assume_zero_funding,
    )
    return run_backtest_command(request, loader(args))
