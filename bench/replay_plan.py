"""The backtest's replay plan (`trader.market.replay_plan.plan_replay`): ticks/s. Prints JSON.

For each recorded file: the plan of the whole replay, as a backtest makes it (`prepare`: the
rows already judged by `parse_rows`, the calendar fitted by `replay_calendars`, the default
market settings), timed over `--repeats` runs (the median, and the fastest). Files:
SOLUSDT_1h.csv (crypto, always open) and, where it is there, XSHG_600977_5min.csv (a stock
market with sessions and a lunch break).

    BENCH_DATA=/work/shared/data .venv/bin/python bench/replay_plan.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from harness import SHARED_DATA

from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.logging import configure_logging
from trader.market.hygiene import parse_rows
from trader.market.replay import read_recording
from trader.market.replay_calendars import replay_calendars
from trader.market.replay_plan import plan_replay
from trader.runner import replay_settings, spread_model, tick_times

FILES = {"SOLUSDT_1h.csv": None, "XSHG_600977_5min.csv": "600977/CNY"}


def bench_file(path: Path, symbol: str | None, repeats: int) -> dict[str, Any]:
    recording = read_recording(path, symbol)
    recordings = {recording.symbol: recording}
    currency = recording.symbol.split("/")[1]
    plain = Settings(market={"symbols": [recording.symbol]}, broker={"currency": currency})
    settings = replay_settings(plain, recordings)
    market = settings.market
    replay = replay_calendars(market, recordings)
    times = tick_times(replay.recordings, market.context_bars, replay.calendars)
    parsed = {
        s: parse_rows(r.rows, s, r.timeframe) for s, r in replay.recordings.items()
    }  # as `prepare` hands them over
    spread = spread_model(settings)
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        plan = plan_replay(replay.recordings, replay.calendars, market, spread, times, parsed)
        seconds.append(time.perf_counter() - began)
        if plan is None:
            raise SystemExit(f"{path.name}: no plan (the calendar does not cover the file)")
    median, best = statistics.median(seconds), min(seconds)
    return {
        "rows": len(recording.rows),
        "ticks": len(times),
        "calendar": replay.calendars[recording.symbol].name,
        "seconds": round(median, 4),
        "ticks_per_s": round(len(times) / median),
        "us_per_tick": round(median / len(times) * 1e6, 2),
        "best_seconds": round(best, 4),  # the fastest run: the least disturbed by other work
        "best_us_per_tick": round(best / len(times) * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    configure_logging(LogSettings(level="ERROR", format="json"), stream=open(os.devnull, "w"))  # noqa: SIM115
    found = {name: args.data / name for name in FILES if (args.data / name).is_file()}
    if "SOLUSDT_1h.csv" not in found:
        print(f"no SOLUSDT_1h.csv in {args.data} (set BENCH_DATA)", file=sys.stderr)
        raise SystemExit(66)
    out = {
        "repeats": args.repeats,
        **{name: bench_file(path, FILES[name], args.repeats) for name, path in found.items()},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
