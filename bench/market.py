"""Market-data figures, printed as JSON.

- replay: rows/s reading SOLUSDT_1h.csv, and bars/s the replay feed delivers through the full
  data step (hygiene, window of 512, modelled quote), tick by tick over the whole file.
- gap: the same replay with a candle dropped and a bar made invalid near the start: bars/s
  beside the clean file's, and the step's cost in the first ticks after the holes against the
  last ticks of the file (a tick must cost the same however long ago a gap was).
- exchange: the cost of one tick's data step for 20 symbols through the real ccxt client
  against the local Binance emulator (one new closed bar per symbol plus a batch quote call),
  with ccxt's rate limiter on (as the daemon runs: it spaces requests to Binance's limits) and
  off (what the code itself costs). The emulator shares the event loop, so its own work is
  inside both figures.

    .venv/bin/python bench/market.py [--data DIR|FILE] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from harness import SHARED_DATA, interpreter

from trader.clock import SimulatedClock
from trader.config.daemon_settings import LogSettings
from trader.config.market_settings import ExchangeSettings, MarketSettings
from trader.domain import Bar, from_epoch_ms
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.logging import configure_logging
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.hygiene import parse_row
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData, read_recording
from trader.market.step import MarketDataStep


async def bench_replay(path: Path, limit: int | None, context: int) -> dict[str, float]:
    began = time.perf_counter()
    recording = read_recording(path)
    read_s = time.perf_counter() - began
    rows = recording.rows if limit is None else recording.rows[:limit]
    clock = SimulatedClock(from_epoch_ms(rows[context][0]))
    feed = ReplayMarketData({recording.symbol: recording}, clock, FixedSpread(5))
    step = MarketDataStep(feed, MarketSettings(symbols=[recording.symbol], context_bars=context))
    await step.start(clock.now())
    ticks = 0
    began = time.perf_counter()
    for row in rows[context + 1 :]:
        await clock.sleep_until(from_epoch_ms(row[0]))
        data = await step.run(clock.now())
        ticks += len(data.ready)
    replay_s = time.perf_counter() - began
    return {
        "replay_file_rows": len(recording.rows),
        "replay_read_rows_per_s": round(len(recording.rows) / read_s),
        "replay_ticks": ticks,
        "replay_context_bars": context,
        "replay_step_bars_per_s": round(ticks / replay_s),
    }


async def bench_gap(path: Path, limit: int | None, context: int) -> dict[str, float]:
    """The replay data step over a file with a candle dropped and a NaN bar soon after the
    first window, beside the clean file: bars/s and per-tick cost early against late."""
    recording = read_recording(path)
    rows = recording.rows if limit is None else recording.rows[:limit]
    holed = list(rows)
    holed[context + 20] = (*holed[context + 20][:4], math.nan, *holed[context + 20][5:])
    del holed[context + 10]
    figures: dict[str, float] = {}
    for name, series in (("clean", rows), ("gap", holed)):
        clock = SimulatedClock(from_epoch_ms(rows[context][0]))
        data = {recording.symbol: replace(recording, rows=series)}
        feed = ReplayMarketData(data, clock, FixedSpread(5))
        settings = MarketSettings(symbols=[recording.symbol], context_bars=context)
        step = MarketDataStep(feed, settings)
        await step.start(clock.now())
        durations = []
        for row in rows[context + 1 :]:  # the clean file's closes: the dropped one's included
            await clock.sleep_until(from_epoch_ms(row[0]))
            began = time.perf_counter()
            await step.run(clock.now())
            durations.append(time.perf_counter() - began)
        figures[f"{name}_bars_per_s"] = round(len(durations) / sum(durations))
        if name == "gap":
            early = statistics.median(durations[40:240])  # just after the holes
            late = statistics.median(durations[-200:])
            figures["gap_step_us_median_early"] = round(early * 1e6, 1)
            figures["gap_step_us_median_late"] = round(late * 1e6, 1)
            figures["gap_late_over_early"] = round(late / early, 3)
            figures["gap_missing_bars"] = step.missing[recording.symbol]
    figures["gap_over_clean_bars_per_s"] = round(
        figures["gap_bars_per_s"] / figures["clean_bars_per_s"], 3
    )
    return {f"replay_{key}": value for key, value in figures.items()}


async def bench_exchange(
    path: Path, symbols: int, ticks: int, rate_limit: bool
) -> dict[str, float]:
    recording = read_recording(path)
    base = [parse_row(row, "SOL/USDT", recording.timeframe) for row in recording.rows[:2000]]
    bars = [b for b in base if isinstance(b, Bar)]
    clock = SimulatedClock(bars[1000].start + timedelta(seconds=5))
    market = EmulatedMarket(clock.now)
    names = [f"C{n}/USDT" for n in range(symbols)]
    for n, name in enumerate(names):
        factor = 1 + n / 10
        series = [
            Bar(name, b.timeframe, b.start, b.open * factor, b.high * factor, b.low * factor,
                b.close * factor, b.volume)
            for b in bars
        ]  # fmt: skip
        market.add_listing(Instrument(name), series)
    async with EmulatorServer(market) as server:
        exchange = create_exchange(ExchangeSettings(api_base_url=server.base_url))
        exchange.enableRateLimit = rate_limit
        feed = CcxtMarketData(exchange, clock)
        # Market-list reloads (hourly by default) are left out of the per-tick figure.
        settings = MarketSettings(symbols=names, context_bars=512, markets_refresh_s=86400)
        step = MarketDataStep(feed, settings)
        try:
            await step.start(clock.now())
            await step.run(clock.now())  # fills the windows: not part of a tick's cost
            durations = []
            for i in range(ticks):
                clock.advance_to(bars[1001 + i].start + timedelta(seconds=5))
                requests = len(server.requests)
                began = time.perf_counter()
                data = await step.run(clock.now())
                durations.append(time.perf_counter() - began)
                assert len(data.ready) == symbols, data.skipped
            per_tick = len(server.requests) - requests
        finally:
            await feed.close()
    durations.sort()
    label = "throttled" if rate_limit else "unthrottled"
    return {
        "exchange_symbols": symbols,
        "exchange_ticks": ticks,
        "exchange_requests_per_tick": per_tick,
        f"exchange_step_ms_median_{label}": round(statistics.median(durations) * 1000, 2),
        f"exchange_step_ms_p90_{label}": round(
            durations[int(0.9 * (len(durations) - 1))] * 1000, 2
        ),
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    # The gap case logs its skips; stdout carries the JSON alone.
    configure_logging(LogSettings(level="ERROR", format="json"), stream=sys.stderr)
    # A directory holding SOLUSDT_1h.csv, or a file of bars (tests pass an excerpt).
    path = args.data if args.data.is_file() else args.data / "SOLUSDT_1h.csv"
    if not path.is_file():
        sys.stderr.write(f"no {path}: pass --data DIR or FILE\n")
        return 2
    report = {
        **interpreter(),
        **await bench_replay(path, 1200 if args.quick else None, 64 if args.quick else 512),
        **await bench_gap(path, 1200 if args.quick else None, 64 if args.quick else 512),
        # ccxt's rate limiter on (as the daemon runs) and off (the code's own cost).
        **await bench_exchange(path, 20, 5 if args.quick else 50, rate_limit=True),
        **await bench_exchange(path, 20, 5 if args.quick else 50, rate_limit=False),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
