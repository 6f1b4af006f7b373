"""The engine's own cost per tick, ledger included, for 1 and 50 symbols. Prints JSON.

The forecaster is trivial (a fixed band around the last close, no model), so what is measured
is the pipeline: the replay data step, fills, strategy, risk, the paper broker, and the tick's
one durable SQLite commit. Two strategies: ci_guard (decides every tick, seldom trades) and
maxdiff (cancels and places two resting orders per symbol every tick). Each runs with decision
logs written as JSON (to /dev/null) and with logging off. `tick_ms` is the whole tick;
`engine_stages_ms` leaves out the data step (the market source's cost) and the forecast stage
(the model's), keeping fills, strategy, risk and orders, and the ledger commit.

    .venv/bin/python bench/engine.py [--data DIR|FILE] [--ticks N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from harness import SHARED_DATA, interpreter

from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.domain import Forecast
from trader.engine.report import STAGES, TickReport
from trader.forecast.protocol import FIELDS, ForecastRequest
from trader.logging import configure_logging
from trader.market.replay import Recording, read_recording
from trader.runner import run_replay


class BandForecaster:
    """Quantiles at fixed distances from the last close: the cheapest forecast there is."""

    name = "band"

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        out = []
        for r in requests:
            close = r.bars[-1].close
            table = {
                f: {q: [close * (1 + (q - 0.5) * 0.04)] * r.horizon for q in r.quantiles}
                for f in FIELDS
            }
            mean = {f: [close] * r.horizon for f in FIELDS}
            out.append(
                Forecast(
                    r.symbol,
                    self.name,
                    r.bars[-1].end,
                    r.bars[-1].timeframe,
                    r.horizon,
                    table,
                    mean,
                )
            )
        return out


class Timings:
    def __init__(self) -> None:
        self.reports: list[TickReport] = []
        self.walls: list[float] = []
        self._last = time.perf_counter()

    def on_tick(self, report: TickReport) -> None:
        now = time.perf_counter()
        self.walls.append(now - self._last)
        self._last = now
        self.reports.append(report)

    def on_state(self, status: object) -> None:
        return None


def copies(recording: Recording, n: int) -> dict[str, Recording]:
    out = {}
    for i in range(n):
        k = 1 + i / 10
        rows = [(t, o * k, h * k, lo * k, c * k, v, q) for t, o, h, lo, c, v, q in recording.rows]
        out[f"C{i}/USDT"] = Recording(f"C{i}/USDT", recording.timeframe, rows, recording.path)
    return out


async def bench(
    recording: Recording, symbols: int, ticks: int, logs: bool, strategy: str
) -> dict[str, float]:
    sink = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 - kept open while the logger uses it
    configure_logging(LogSettings(level="INFO" if logs else "ERROR", format="json"), stream=sink)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            market={"symbols": ["C0/USDT"], "context_bars": 64, "replay_amount_step": "0.001"},
            strategy={"name": strategy, "allow_short": True, "position_fraction": 0.015},
            # Loose limits: the bench measures the pipeline, and must keep trading to do so.
            risk={
                "max_orders_per_minute": 100_000,
                "max_total_exposure": "1000000",
                "max_daily_loss": 1.0,
                "max_drawdown": 1.0,
            },
            ledger={"path": Path(tmp) / "ledger.sqlite3"},
        )
        timings = Timings()
        warmup = 20
        await run_replay(
            settings, copies(recording, symbols), max_ticks=ticks + warmup,
            forecasters=[BandForecaster()], hooks=timings,
        )  # fmt: skip
    walls = timings.walls[warmup:]
    reports = timings.reports[warmup:]
    label = f"{strategy}_{symbols}_symbols_{'logs' if logs else 'nologs'}"
    stages = {
        f"{label}_{stage}_ms": round(
            statistics.median(r.timings.get(stage, 0.0) for r in reports) * 1000, 3
        )
        for stage in STAGES
    }
    own = ("fills", "strategy", "orders", "ledger")  # not the data source, not the model
    return {
        f"{label}_tick_ms_median": round(statistics.median(walls) * 1000, 3),
        f"{label}_engine_stages_ms_median": round(
            statistics.median(sum(r.timings.get(s, 0.0) for s in own) for r in reports) * 1000, 3
        ),
        f"{label}_tick_ms_p90": round(sorted(walls)[int(0.9 * (len(walls) - 1))] * 1000, 3),
        f"{label}_orders_per_tick": round(statistics.mean(len(r.orders) for r in reports), 1),
        **stages,
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    # A directory holding SOLUSDT_1h.csv, or a file of bars (tests pass an excerpt).
    path = args.data if args.data.is_file() else args.data / "SOLUSDT_1h.csv"
    if not path.is_file():
        sys.stderr.write(f"no {path}: pass --data DIR or FILE\n")
        return 2
    recording = read_recording(path)
    ticks = 20 if args.quick else args.ticks
    report: dict[str, object] = {**interpreter(), "ticks": ticks}
    # ci_guard: decides every tick, seldom trades. maxdiff: replaces two resting orders per
    # symbol every tick, the busiest the ledger gets.
    for strategy in ("ci_guard", "maxdiff"):
        for symbols in (1, 50):
            for logs in (False, True):
                report |= await bench(recording, symbols, ticks, logs, strategy)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
