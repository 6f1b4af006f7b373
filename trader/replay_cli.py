"""`trader run --replay FILE... [--speed X]`: the daemon itself (scheduler, metrics, MQTT,
systemd notify, signals) over recorded bars, on a simulated clock, with the paper broker and
modelled quotes. It resumes where the ledger stopped and exits 0 at the end of the bars or
on SIGTERM/SIGINT (after the running tick)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from trader.config import LoadedSettings
from trader.market.files import ReadOptions
from trader.market.replay import RecordingsRequestError, ReplayDataError, read_recordings
from trader.service import EX_DATAERR, ReplayRequest, Service


def run_replay_command(
    loaded: LoadedSettings,
    files: Sequence[Path],
    symbols: Sequence[str] | None,
    speed: float | None,
    max_ticks: int | None,
    options: ReadOptions,
) -> int:
    if speed is not None and not speed > 0:
        sys.stderr.write("trader run: --speed must be positive\n")
        return 2
    try:
        recordings = read_recordings(files, symbols, options)
    except RecordingsRequestError as error:
        sys.stderr.write(f"trader run: {error} (--replay FILE, --symbol NAME)\n")
        return 2
    except ReplayDataError as error:
        sys.stderr.write(f"trader run: {error}\n")
        return EX_DATAERR
    request = ReplayRequest({r.symbol: r for r in recordings}, speed, max_ticks)
    return asyncio.run(Service(loaded, replay=request).run())
