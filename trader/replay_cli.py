"""`trader run --replay FILE...`: the engine over recorded bars, paper broker, simulated clock.
It resumes where the ledger stopped, and SIGTERM/SIGINT end it after the running tick."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from trader.config.schema import Settings
from trader.forecast.build import ModelUnavailable
from trader.logging import get_logger
from trader.market.replay import ReplayDataError, read_recording
from trader.runner import run_replay

EX_DATAERR, EX_CONFIG = 65, 78


def run_replay_command(
    settings: Settings,
    files: Sequence[Path],
    symbols: Sequence[str] | None,
    speed: float | None,
    max_ticks: int | None,
) -> int:
    log = get_logger("trader.replay")
    if symbols and len(symbols) != len(files):
        sys.stderr.write("trader run: give one --symbol per --replay file, or none\n")
        return 2
    try:
        recordings = [
            read_recording(path, symbols[i] if symbols else None) for i, path in enumerate(files)
        ]
    except ReplayDataError as error:
        sys.stderr.write(f"trader run: {error}\n")
        return EX_DATAERR

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            summary = await run_replay(
                settings,
                {r.symbol: r for r in recordings},
                speed=speed,
                max_ticks=max_ticks,
                stop=stop,
            )
        except (ModelUnavailable, ValueError) as error:
            log.error("replay cannot start", error=str(error))
            return EX_CONFIG
        log.info(
            "replay finished" if not stop.is_set() else "replay stopped",
            ticks=summary.ticks,
            last=summary.last.isoformat() if summary.last else None,
            equity=str(summary.equity),
        )
        return 0

    return asyncio.run(main())
