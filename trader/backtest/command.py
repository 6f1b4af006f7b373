"""`trader backtest --data FILE...`: the engine over history for every strategy, the comparison
in the terminal and, with --out, the report folder (`trader.cli.backtest` reads the arguments)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from trader.exit_codes import EX_ARGUMENTS, EX_CONFIG, EX_DATAERR, EX_FAILED

if TYPE_CHECKING:
    from trader.config import LoadedSettings
    from trader.config.loader import DataLayer
    from trader.market.files.options import ReadOptions
    from trader.market.replay import Recording


@dataclass(frozen=True)
class BacktestRequest:
    """What the person asked for: files (and their symbols), period, model, strategies."""

    data: list[Path]
    symbols: list[str] | None
    reading: ReadOptions
    begin: datetime | None = None
    end: datetime | None = None
    model: str | None = None
    strategies: list[str] | None = None
    out: Path | None = None
    allow_skips: bool = False


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _recordings(request: BacktestRequest) -> tuple[list[Recording], DataLayer]:
    from trader.market.replay import (  # noqa: PLC0415
        RecordingsRequestError,
        ReplayDataError,
        read_recordings,
        settings_from,
    )

    if request.begin and request.end and request.begin > request.end:
        raise _Refused(EX_ARGUMENTS, "--from is after --to")
    try:
        recordings = read_recordings(request.data, request.symbols, request.reading)
        return recordings, settings_from(recordings)
    except RecordingsRequestError as error:
        raise _Refused(EX_ARGUMENTS, f"{error} (--data FILE, --symbol NAME)") from None
    except ReplayDataError as error:
        raise _Refused(EX_DATAERR, str(error)) from None


def run_backtest_command(
    request: BacktestRequest, load: Callable[[DataLayer], LoadedSettings]
) -> int:
    """`load`: the settings (and logging) with the files' own layer on top: the files decide
    the symbols, the timeframe and the account's currency."""
    try:  # bad input is told before the engine, torch and matplotlib are loaded
        recordings, layer = _recordings(request)
    except _Refused as refused:
        sys.stderr.write(f"trader backtest: {refused}\n")
        return refused.code
    settings = load(layer).settings
    # Imported here: numpy, matplotlib and the engine load only for this verb.
    from trader.backtest.findings import findings  # noqa: PLC0415
    from trader.backtest.prepare import Period  # noqa: PLC0415
    from trader.backtest.report import terminal_summary, write_report  # noqa: PLC0415
    from trader.backtest.run import run_backtest  # noqa: PLC0415
    from trader.forecast.build import ModelUnavailable  # noqa: PLC0415

    if request.model:
        settings = settings.model_copy(
            update={"forecast": settings.forecast.model_copy(update={"model": request.model})}
        )
    strategies = list(dict.fromkeys(request.strategies or settings.backtest.strategies))
    try:
        result = asyncio.run(
            run_backtest(
                settings,
                {r.symbol: r for r in recordings},
                strategies=strategies,
                period=Period(request.begin, request.end),
                ledgers=request.out / "ledgers" if request.out else None,
            )
        )
    except ModelUnavailable as error:
        sys.stderr.write(f"trader backtest: {error}\n")
        return EX_CONFIG
    except ValueError as error:  # the data cannot be backtested as it is (too short, ...)
        sys.stderr.write(f"trader backtest: {error}\n")
        return EX_DATAERR
    sys.stdout.write(terminal_summary(result, accepted=request.allow_skips))
    if request.out:
        write_report(result, request.out)
        sys.stdout.write(f"report: {request.out / 'report.html'} (and report.md, stats.json)\n")
    else:
        sys.stdout.write("(--out DIR writes the report, its plots and the ledgers)\n")
    failing = [f.text for f in findings(result) if f.fails]
    if failing and not request.allow_skips:
        sys.stderr.write(
            "trader backtest: the run did not do what was asked (--allow-skips accepts it):\n"
        )
        sys.stderr.writelines(f"  {text}\n" for text in failing)
        return EX_FAILED
    return 0
