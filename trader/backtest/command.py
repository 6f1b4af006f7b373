"""`trader backtest --data FILE...`: the engine over history for every strategy, the comparison
in the terminal and, with --out, the report folder (`trader.cli.backtest` reads the arguments)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from trader.exit_codes import (
    EX_ARGUMENTS,
    EX_CANTCREAT,
    EX_CONFIG,
    EX_DATAERR,
    EX_FAILED,
    EX_IOERR,
)
from trader.private_files import UnsafePath

if TYPE_CHECKING:
    from trader.backtest.funding import PerpData
    from trader.backtest.measured_costs import CostsFile
    from trader.backtest.run import Backtest
    from trader.config import LoadedSettings
    from trader.config.loader import DataLayer
    from trader.config.schema import Settings
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
    grid: list[str] = field(default_factory=list)  # KEY=V1,V2 each
    walk_forward: str | None = None
    rank_by: str = "sharpe"
    jobs: int | None = None
    ray: str | None = None
    yes: bool = False
    log_level: str | None = None  # what the command line asked of logging (grid workers too)
    log_format: str | None = None
    costs_from: Path | None = None  # a measured-costs file (`trader shortfall` writes it)
    assume_zero_funding: bool = False  # a perpetual's bars without funding: run them anyway

    @property
    def is_grid(self) -> bool:
        return bool(self.grid or self.walk_forward)

    def grid_misuse(self) -> str | None:
        """What is wrong with the grid's options, if anything."""
        if self.jobs is not None and self.ray is not None:
            return "--jobs and --ray: the runs go to worker processes here or to Ray, not both"
        if not self.is_grid:
            given = [f for f, v in (("--ray", self.ray), ("--yes", self.yes or None))
                     if v is not None]  # fmt: skip
            if given:
                return (
                    f"{', '.join(given)} apply to a grid: give --grid KEY=V1,V2 or --walk-forward"
                )
        return None


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


def _costs_file(request: BacktestRequest) -> CostsFile | None:
    if request.costs_from is None:
        return None
    from trader.backtest.measured_costs import (  # noqa: PLC0415
        CostsFileError,
        grid_conflicts,
        read_costs_file,
    )

    try:
        measured = read_costs_file(request.costs_from)
    except CostsFileError as error:
        raise _Refused(EX_DATAERR, f"--costs-from {error}") from None
    if conflicts := grid_conflicts(measured, request.grid):
        raise _Refused(
            EX_ARGUMENTS,
            f"--grid {', '.join(conflicts)} and --costs-from {measured.path} both set it: "
            "leave the key out of the grid, or the file out",
        )
    return measured


def run_backtest_command(
    request: BacktestRequest, load: Callable[[DataLayer], LoadedSettings]
) -> int:
    """`load`: the settings (and logging) with the files' own layer on top: the files decide
    the symbols, the timeframe and the account's currency."""
    try:  # bad input is told before the engine, torch and matplotlib are loaded
        if misuse := request.grid_misuse():
            raise _Refused(EX_ARGUMENTS, misuse)
        recordings, layer = _recordings(request)
        measured = _costs_file(request)
        loaded = load(layer)
        perp = _perp_data(request, loaded.settings, recordings)  # refused before any work
    except _Refused as refused:
        sys.stderr.write(f"trader backtest: {refused}\n")
        return refused.code
    settings, calibration = loaded.settings, None
    if measured is not None:
        from trader.backtest.measured_costs import calibrate  # noqa: PLC0415

        calibration = calibrate(measured, settings, loaded.origins)
        settings = calibration.apply(settings)
        # First, before any work: the costs this run takes from the file.
        sys.stdout.write(f"{calibration.headline()}\n")
    # Imported here: numpy, matplotlib and the engine load only for this verb.
    from trader.backtest.findings import findings  # noqa: PLC0415
    from trader.backtest.report import (  # noqa: PLC0415
        forecast_plots,
        terminal_summary,
        write_report,
    )

    if request.model:
        settings = settings.model_copy(
            update={"forecast": settings.forecast.with_model(request.model)}
        )
    from trader.forecast.provenance import origins  # noqa: PLC0415 - with the models
    from trader.runner import model_names  # noqa: PLC0415

    for origin in (o for name in model_names(settings) for o in origins(name, settings.forecast)):
        sys.stderr.writelines(f"{line}\n" for line in origin.lines())  # said first
    strategies = list(dict.fromkeys(request.strategies or settings.backtest.strategies))
    if request.is_grid:
        return _grid(request, settings, recordings, strategies)
    out, drawn = request.out, []  # the forecasts' plots, drawn while the strategies run
    try:
        result = _backtest(
            request, settings, recordings, strategies,
            (lambda done: drawn.append(forecast_plots(done, out))) if out else None, perp,
        )  # fmt: skip
    except _Refused as refused:
        sys.stderr.write(f"trader backtest: {refused}\n")
        return refused.code
    result.costs = calibration
    sys.stdout.write(terminal_summary(result, accepted=request.allow_skips))
    if request.out:
        try:
            write_report(result, request.out, drawn[0] if drawn else None)
        except (UnsafePath, OSError) as error:  # a link planted in --out, a disk that refuses
            sys.stderr.write(f"trader backtest: the report was not written: {error}\n")
            return EX_CANTCREAT
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


def _backtest(
    request: BacktestRequest,
    settings: Settings,
    recordings: list[Recording],
    strategies: list[str],
    meanwhile: Callable[[Backtest], object] | None,
    perp: PerpData | None = None,
) -> Backtest:
    """The backtest asked for; `_Refused` where it could not be run or finished."""
    from trader.backtest.prepare import Period  # noqa: PLC0415
    from trader.backtest.run import run_backtest  # noqa: PLC0415
    from trader.backtest.side_by_side import ChildFailed, default_workers  # noqa: PLC0415
    from trader.forecast.build import ModelUnavailable  # noqa: PLC0415
    from trader.ledger.write_failure import LedgerWriteFailed  # noqa: PLC0415

    try:
        return asyncio.run(
            run_backtest(
                settings,
                {r.symbol: r for r in recordings},
                strategies=strategies,
                period=Period(request.begin, request.end),
                ledgers=request.out / "ledgers" if request.out else None,
                jobs=request.jobs or default_workers(len(strategies)),
                meanwhile=meanwhile,
                perp=perp,
            )
        )
    except ModelUnavailable as error:
        raise _Refused(EX_CONFIG, str(error)) from None
    except ValueError as error:  # the data cannot be backtested as it is (too short, ...)
        raise _Refused(EX_DATAERR, str(error)) from None
    except ChildFailed as error:  # killed (out of memory?), or its result could not come back
        raise _Refused(EX_FAILED, f"{error} (--jobs 1: one after the other, here)") from None
    except LedgerWriteFailed as error:  # a full disk: nothing to show, the run fails whole
        raise _Refused(EX_IOERR, f"{error}: free space and run it again") from None
    except UnsafePath as error:  # a link planted where --out's plots or ledgers go
        raise _Refused(EX_CANTCREAT, str(error)) from None


def _perp_data(
    request: BacktestRequest, settings: Settings, recordings: list[Recording]
) -> PerpData | None:
    """A perpetual's funding and mark prices beside its bars (None for spot); `_Refused` for
    bars without funding (unless --assume-zero-funding), or files that cannot be read."""
    from trader.backtest.funding import ASSUME_ZERO_FLAG, load_perp_data  # noqa: PLC0415
    from trader.domain import Timeframe  # noqa: PLC0415
    from trader.market.files.funding import PerpDataError  # noqa: PLC0415

    if settings.market.kind != "perp":
        if request.assume_zero_funding:
            raise _Refused(
                EX_ARGUMENTS, f"{ASSUME_ZERO_FLAG} is for perpetuals: market.kind = perp"
            )
        return None
    if request.is_grid:
        raise _Refused(
            EX_ARGUMENTS,
            "a grid or walk-forward over a perpetual does not pay its funding yet: run the "
            "backtests one at a time",
        )
    length = Timeframe(settings.market.timeframe).duration
    try:
        return load_perp_data(
            recordings, int(length.total_seconds() * 1000), request.assume_zero_funding
        )
    except PerpDataError as error:
        raise _Refused(EX_DATAERR, str(error)) from None


def _grid(
    request: BacktestRequest,
    settings: Settings,
    recordings: list[Recording],
    strategies: list[str],
) -> int:
    from trader.backtest.grid_command import GridRequest, run_grid_command  # noqa: PLC0415
    from trader.backtest.prepare import Period  # noqa: PLC0415

    asked = {"level": request.log_level or "ERROR", "format": request.log_format}
    log = settings.log.model_copy(update={k: v for k, v in asked.items() if v})
    grid = GridRequest(
        request.grid, strategies, Period(request.begin, request.end), request.rank_by,
        request.jobs, request.ray, request.walk_forward, request.yes, request.out,
        request.allow_skips,
    )  # fmt: skip
    settings = settings.model_copy(update={"log": log})
    return run_grid_command(grid, settings, recordings, request.reading)
