"""`trader backtest --data FILE...`: the engine over history for every strategy, the comparison
in the terminal and, with --out, the report folder."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from trader.market.file_options import add_reading_options, reading_options

if TYPE_CHECKING:
    from trader.config import LoadedSettings
    from trader.config.loader import DataLayer
    from trader.market.replay import Recording

EX_FAILED, EX_USAGE, EX_DATAERR, EX_CONFIG = 1, 2, 65, 78
STRATEGIES = ("simple", "ci_guard", "maxdiff")


def period_bound(text: str, *, end: bool) -> datetime:
    """A UTC date or time; a bare date as an end means the whole of that day."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date like 2024-01-31") from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if end and len(text) <= len("2024-01-31"):
        return parsed + timedelta(days=1) - timedelta(milliseconds=1)
    return parsed


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
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
    add("--model", choices=["toto", "kronos", "baseline"], help="default: forecast.model")
    add("--strategy", nargs="+", choices=STRATEGIES, help="default: backtest.strategies")
    add("--from", dest="begin", type=_begin, metavar="D", help="first tick, UTC date or time")
    add("--to", dest="end", type=_end, metavar="D", help="last tick, UTC (a date: all that day)")
    add("--out", type=Path, metavar="DIR", help="write the report, plots and ledgers here")
    add(
        "--allow-skips",
        action="store_true",
        help="exit 0 even when symbols skipped more than backtest.max_skipped_share of their "
        "ticks or a tick failed (the summary still lists them first)",
    )
    add_reading_options(parser)
    return parser


def _begin(text: str) -> datetime:
    return period_bound(text, end=False)


def _end(text: str) -> datetime:
    return period_bound(text, end=True)


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _recordings(args: argparse.Namespace) -> tuple[list[Recording], DataLayer]:
    from trader.market.replay import (  # noqa: PLC0415
        RecordingsRequestError,
        ReplayDataError,
        read_recordings,
        settings_from,
    )

    if args.begin and args.end and args.begin > args.end:
        raise _Refused(EX_USAGE, "--from is after --to")
    try:
        recordings = read_recordings(args.data, args.symbol, reading_options(args))
        return recordings, settings_from(recordings)
    except RecordingsRequestError as error:
        raise _Refused(EX_USAGE, f"{error} (--data FILE, --symbol NAME)") from None
    except ReplayDataError as error:
        raise _Refused(EX_DATAERR, str(error)) from None


def run_backtest_command(
    args: argparse.Namespace, load: Callable[[DataLayer], LoadedSettings]
) -> int:
    """`load`: the settings (and logging) with the files' own layer on top: the files decide
    the symbols, the timeframe and the account's currency."""
    try:  # bad input is told before the engine, torch and matplotlib are loaded
        recordings, layer = _recordings(args)
    except _Refused as refused:
        sys.stderr.write(f"trader backtest: {refused}\n")
        return refused.code
    settings = load(layer).settings
    # Imported here: numpy, matplotlib and the engine load only for this verb.
    from trader.backtest.findings import findings  # noqa: PLC0415
    from trader.backtest.report import terminal_summary, write_report  # noqa: PLC0415
    from trader.backtest.run import Period, run_backtest  # noqa: PLC0415
    from trader.forecast.build import ModelUnavailable  # noqa: PLC0415

    if args.model:
        settings = settings.model_copy(
            update={"forecast": settings.forecast.model_copy(update={"model": args.model})}
        )
    strategies = list(dict.fromkeys(args.strategy or settings.backtest.strategies))
    try:
        result = asyncio.run(
            run_backtest(
                settings,
                {r.symbol: r for r in recordings},
                strategies=strategies,
                period=Period(args.begin, args.end),
                ledgers=args.out / "ledgers" if args.out else None,
            )
        )
    except ModelUnavailable as error:
        sys.stderr.write(f"trader backtest: {error}\n")
        return EX_CONFIG
    except ValueError as error:  # the data cannot be backtested as it is (too short, ...)
        sys.stderr.write(f"trader backtest: {error}\n")
        return EX_DATAERR
    sys.stdout.write(terminal_summary(result, accepted=args.allow_skips))
    if args.out:
        write_report(result, args.out)
        sys.stdout.write(f"report: {args.out / 'report.html'} (and report.md, stats.json)\n")
    else:
        sys.stdout.write("(--out DIR writes the report, its plots and the ledgers)\n")
    failing = [f.text for f in findings(result) if f.fails]
    if failing and not args.allow_skips:
        sys.stderr.write(
            "trader backtest: the run did not do what was asked (--allow-skips accepts it):\n"
        )
        sys.stderr.writelines(f"  {text}\n" for text in failing)
        return EX_FAILED
    return 0
