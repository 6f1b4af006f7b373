"""The backtest's trading simulation, forecasts cached, beside backtesting.py. Prints JSON.

Both run in this process, one after the other, on the same bars of SOLUSDT_1h.csv and the same
signal: the baseline forecaster's median return at each bar close, computed once and cached.

- ours: `trader backtest`'s simulation of the `simple` strategy, i.e. the daemon's own engine
  tick by tick (data step with hygiene, forecast lookup, strategy, sizing, every risk check,
  the paper broker and a SQLite ledger of every tick, written when the run ends); and of
  `maxdiff` (resting limits placed and cancelled every bar: the busiest case), for reference;
- backtesting.py: the same rule as `simple` under our risk engine's minimum edge (buy 20% of
  equity when the median return clears 2 x taker fee + spread + min edge, close when it turns
  non-positive), with the same fee and spread, trading on the close.

Two cases: `costs`, the daemon's default fees, spread and risk limits (the baseline's small
forecasts never clear them: the cost of a bar with nothing to do), and `free`, no fees, a
spread of 0.01 bps (a locked book is no quote) and no risk limits: both trade at every turn of
the forecast's sign (ours also tops a position up to its target as price and equity move, so
it has more fills than backtesting.py has trades). `*_bars_per_s` is bars simulated per second
of wall time; `*_ours_over_backtesting_py` their ratio. Forecasting (cold cache) is timed on
its own, as `forecast_windows_per_s`.

What a bar costs, in microseconds, beside what bounds it: `*_ours_us_per_bar` (the whole
simulation), of which `*_ours_plan_us_per_bar` is the data step's plan,
`*_ours_quiet_us_per_bar` the quiet ticks (booked without the engine's stages: nothing sent or
filled) and `*_ours_engine_us_per_bar` the engine's stages in the `*_ours_engine_ticks` ticks
it ran itself, both from the last run's tick timings in its ledger, without the ticks' rows;
`*_ledger_floor_us_per_bar`, writing the run's own ledger rows again (ticks, forecasts,
decisions, equity: four rows a bar) into a fresh ledger in one transaction with every row
already made, which any backtest that keeps this ledger pays at least; and
`*_backtesting_py_us_per_bar`. A ratio of 0.25 leaves ours four times backtesting.py's
microseconds for everything.

    .venv/bin/python bench/backtest.py [--data DIR|FILE] [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from backtesting import Backtest, Strategy
from harness import SHARED_DATA, interpreter

from trader.backtest.cache import ForecastCache
from trader.backtest.forecasts import CachedForecaster, forecast_ahead
from trader.backtest.session import Replay, simulate
from trader.backtest.windows import SymbolWindows
from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.cycle_collector import collector_paused
from trader.forecast.baseline import BaselineForecaster
from trader.ledger.buffered import StatementBuffer
from trader.ledger.database import migrate
from trader.logging import configure_logging
from trader.market.calendars.calendar import TradingCalendar
from trader.market.replay import Recording, read_recording
from trader.market.replay_calendars import replay_calendars
from trader.market.replay_plan import plan_replay
from trader.runner import replay_settings, spread_model, tick_times


def signal_strategy(hurdle_bps: float, fraction: float) -> type[Strategy]:
    class Simple(Strategy):
        def init(self) -> None:
            self.move = self.I(lambda: np.asarray(self.data.Move), name="move")

        def next(self) -> None:
            move = self.move[-1]
            if not self.position and move > hurdle_bps:
                self.buy(size=fraction)
            elif self.position and move <= 0:
                self.position.close()

    return Simple


def time_backtesting_py(frame: pd.DataFrame, settings: Settings, repeats: int) -> dict[str, Any]:
    broker, risk = settings.broker, settings.risk
    hurdle = 2 * float(broker.taker_fee_bps) + settings.market.replay_spread_bps
    strategy = signal_strategy(hurdle + risk.min_edge_bps, settings.strategy.position_fraction)
    seconds, trades = [], 0
    for _ in range(repeats):
        test = Backtest(
            frame, strategy, cash=float(broker.starting_cash),
            commission=float(broker.taker_fee_bps) / 10_000,
            spread=settings.market.replay_spread_bps / 10_000, trade_on_close=True,
            finalize_trades=True,
        )  # fmt: skip
        began = time.perf_counter()
        stats = test.run()
        seconds.append(time.perf_counter() - began)
        trades = int(stats["# Trades"])
    return {"seconds": statistics.median(seconds), "trades": trades}


# The same bars under two sets of costs: the daemon's defaults (fees, spread and the minimum
# edge keep the baseline's small forecasts from trading: the cost of a bar with nothing to do)
# and none at all, nor risk limits (both trade on every turn of the forecast's sign: the cost
# of trading).
CASES: dict[str, dict[str, Any]] = {
    "costs": {},
    "free": {
        "broker": {"maker_fee_bps": 0, "taker_fee_bps": 0, "slippage_bps": 0},
        # A locked book (bid = ask) is no quote: the smallest spread that is one.
        "market": {"replay_spread_bps": 0.01},
        "risk": {"min_edge_bps": 0, "max_order_notional": "1000000000",
                 "max_position_notional": "1000000000", "max_total_exposure": "1000000000",
                 "max_orders_per_minute": 1000, "max_daily_loss": 1.0, "max_drawdown": 1.0},
    },
}  # fmt: skip


def case_settings(recording: Recording, cache: Path, case: str) -> Settings:
    overrides = CASES[case]
    return replay_settings(
        Settings(
            market={"symbols": [recording.symbol], **overrides.get("market", {})},
            forecast={"model": "baseline"},
            broker=overrides.get("broker", {}),
            risk=overrides.get("risk", {}),
            backtest={"cache_dir": cache},
        ),
        {recording.symbol: recording},
    )


async def ours(
    settings: Settings,
    recording: Recording,
    cached: CachedForecaster,
    strategy: str,
    folder: Path,
    repeats: int,
) -> tuple[float, float, int, Path]:
    """Median seconds of the simulation (the data step's plan included: a one-strategy
    backtest makes it for that strategy alone), of the plan alone, the fills, and the last
    run's ledger."""
    replay = replay_calendars(settings.market, {recording.symbol: recording})
    times = tick_times(replay.recordings, settings.market.context_bars, replay.calendars)
    seconds, planning, fills = [], [], 0
    for i in range(repeats):
        gc.collect()  # the last run's garbage, not this run's
        began = time.perf_counter()
        # As `trader backtest` runs it (`run_backtest`): the cyclic collector paused
        # throughout, the plan made from the rows its windows parsed (`Prepared.plan`).
        with collector_paused():
            parsed = {s: w.parsed for s, w in cached.windows.items()}
            plan = plan_replay(
                replay.recordings,
                replay.calendars,
                settings.market,
                spread_model(settings),
                times,
                parsed,
            )
            assert plan is not None
            planning.append(time.perf_counter() - began)
            ledger = folder / f"{strategy}-{i}.sqlite3"
            run = await simulate(
                settings, Replay(replay, times, plan), [cached], strategy, ledger, progress=False
            )
        seconds.append(time.perf_counter() - began)
        fills = len(run.fills)
    return statistics.median(seconds), statistics.median(planning), fills, ledger


PER_BAR_TABLES = ("ticks", "forecasts", "decisions", "equity")


def per_bar_rows(ledger: Path) -> dict[str, list[tuple[Any, ...]]]:
    """`ledger`'s rows of `PER_BAR_TABLES`, table by table."""
    source = sqlite3.connect(ledger)
    try:
        return {
            t: source.execute(f"SELECT * FROM {t}").fetchall()  # noqa: S608 - our own names
            for t in PER_BAR_TABLES
        }
    finally:
        source.close()


def tick_seconds(ticks: list[tuple[Any, ...]]) -> tuple[float, float, int]:
    """From the timings a ledger keeps of each tick (the last column of its `ticks` rows):
    the seconds of the quiet ticks (booked by the quiet stretch: forecasts, strategy, sizing
    and checks, settling; not their ledger rows), of the engine's stages in the ticks the
    engine ran itself (an order sent, rested or filled), and how many of those there were."""
    quiet, engine, ran = 0.0, 0.0, 0
    for row in ticks:
        stages = json.loads(row[-1])
        if "quiet" in stages:
            quiet += stages["quiet"]
        else:
            engine += sum(stages.values())
            ran += 1
    return quiet, engine, ran


def ledger_floor(rows: dict[str, list[tuple[Any, ...]]], scratch: Path, repeats: int) -> float:
    """Median seconds to write `rows` (`per_bar_rows`) into a fresh ledger as a backtest's
    ledger writes them when its run ends (`BufferedDatabase`: no syncs, the journal in memory,
    one transaction), with the rows already made."""
    seconds = []
    for i in range(repeats):
        path = scratch / f"floor-{i}.sqlite3"
        path.unlink(missing_ok=True)
        fresh = sqlite3.connect(path, isolation_level=None)
        try:
            migrate(fresh)
            fresh.execute("PRAGMA synchronous=OFF")
            fresh.execute("PRAGMA journal_mode=MEMORY")
            buffer = StatementBuffer()
            for table, values in rows.items():
                marks = ", ".join("?" * len(values[0]))
                insert = f"INSERT INTO {table} VALUES ({marks})"  # noqa: S608 - our own names
                buffer.executemany(insert, values)
            began = time.perf_counter()
            buffer.write_to(fresh)
            seconds.append(time.perf_counter() - began)
        finally:
            fresh.close()
    return statistics.median(seconds)


async def bench(recording: Recording, repeats: int, cache: Path | None) -> dict[str, Any]:
    sink = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 - kept open while the logger uses it
    configure_logging(LogSettings(level="ERROR", format="json"), stream=sink)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cache = cache or folder / "cache"
        settings = case_settings(recording, cache, "costs")
        context = settings.market.context_bars
        times = tick_times({recording.symbol: recording}, context)
        ticks = [int(t.timestamp() * 1000) for t in times]
        calendar = TradingCalendar.always_open()
        windows = {
            recording.symbol: SymbolWindows(
                recording,
                context,
                calendar=calendar,
                min_contiguous=settings.market.min_contiguous_bars,
            )
        }
        began = time.perf_counter()
        cached = forecast_ahead(
            BaselineForecaster(settings.forecast.baseline_lookback), windows,
            {recording.symbol: ticks}, ForecastCache(settings.backtest.cache_dir),
            horizon=settings.forecast.horizon, quantiles=settings.forecast.quantiles,
            context=context, batch=settings.backtest.batch_windows, progress=False,
        )  # fmt: skip
        forecast_seconds = time.perf_counter() - began
        report: dict[str, Any] = {
            "bars": len(times),
            "first": times[0].isoformat(),
            "last": times[-1].isoformat(),
            "forecast_windows_per_s": (
                round(cached.use.computed / forecast_seconds, 1) if cached.use.computed else None
            ),
        }
        # The signal both simulations trade on: the cached median return at each close.
        rows = {row[0] + recording.timeframe.seconds * 1000: row for row in recording.rows}
        moves = []
        for end in ticks:
            forecast = cached.cached(recording.symbol, end)
            assert forecast is not None
            moves.append((forecast.quantile("close", 0.5) / rows[end][4] - 1) * 10_000)
        frame = pd.DataFrame(
            {
                "Open": [rows[e][1] for e in ticks],
                "High": [rows[e][2] for e in ticks],
                "Low": [rows[e][3] for e in ticks],
                "Close": [rows[e][4] for e in ticks],
                "Volume": [rows[e][5] for e in ticks],
                "Move": moves,
            },
            index=pd.to_datetime(ticks, unit="ms"),
        )
        per_bar = 1e6 / len(times)
        for case in CASES:
            settings = case_settings(recording, cache, case)
            seconds, planning, fills, ledger = await ours(
                settings, recording, cached, "simple", folder, repeats
            )
            kept = per_bar_rows(ledger)
            floor = ledger_floor(kept, folder, repeats)
            quiet, engine, ran = tick_seconds(kept["ticks"])
            theirs = time_backtesting_py(frame, settings, repeats)
            report[f"{case}_ours_simple_bars_per_s"] = round(len(times) / seconds)
            report[f"{case}_ours_simple_fills"] = fills
            report[f"{case}_backtesting_py_bars_per_s"] = round(len(times) / theirs["seconds"])
            report[f"{case}_backtesting_py_trades"] = theirs["trades"]
            report[f"{case}_ours_over_backtesting_py"] = round(theirs["seconds"] / seconds, 4)
            report[f"{case}_ours_us_per_bar"] = round(seconds * per_bar, 2)
            report[f"{case}_ours_plan_us_per_bar"] = round(planning * per_bar, 2)
            report[f"{case}_ours_quiet_us_per_bar"] = round(quiet * per_bar, 2)
            report[f"{case}_ours_engine_us_per_bar"] = round(engine * per_bar, 2)
            report[f"{case}_ours_engine_ticks"] = ran
            report[f"{case}_ledger_floor_us_per_bar"] = round(floor * per_bar, 2)
            report[f"{case}_backtesting_py_us_per_bar"] = round(theirs["seconds"] * per_bar, 2)
        settings = case_settings(recording, cache, "costs")
        seconds, _, fills, _ = await ours(settings, recording, cached, "maxdiff", folder, repeats)
        report["costs_ours_maxdiff_bars_per_s"] = round(len(times) / seconds)
        report["costs_ours_maxdiff_fills"] = fills
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--quick", action="store_true", help="the first 3,000 bars")
    parser.add_argument("--repeats", type=int, default=1, help="median of this many runs")
    parser.add_argument(
        "--cache", type=Path, help="forecast cache to keep between runs (default: a fresh one)"
    )
    args = parser.parse_args()
    # A directory holding SOLUSDT_1h.csv, or a file of bars (tests pass an excerpt).
    path = args.data if args.data.is_file() else args.data / "SOLUSDT_1h.csv"
    if not path.is_file():
        sys.stderr.write(f"no {path}: pass --data DIR or FILE\n")
        return 2
    recording = read_recording(path)
    if args.quick:
        recording = Recording(
            recording.symbol, recording.timeframe, recording.rows[:3000], recording.path
        )
    report: dict[str, Any] = {**interpreter(), "quick": args.quick}
    report |= asyncio.run(bench(recording, repeats=args.repeats, cache=args.cache))
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
