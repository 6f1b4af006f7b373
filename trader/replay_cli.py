"""`trader run --replay FILE... [--speed X]`: the daemon itself (scheduler, metrics, MQTT,
systemd notify, signals) over recorded bars, on a simulated clock, with the paper broker and
modelled quotes. It resumes where the ledger stopped and exits 0 at the end of the bars or
on SIGTERM/SIGINT (after the running tick). The files decide the symbols, the timeframe and the
account's currency; each file's market calendar is named in the settings or inferred."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from trader.config import LoadedSettings
from trader.config.loader import DataLayer
from trader.market.file_options import reading_options
from trader.market.replay import (
    RecordingsRequestError,
    ReplayDataError,
    read_recordings,
    settings_from,
)
from trader.market.replay_calendars import replay_calendars
from trader.service import EX_DATAERR, ReplayRequest, Service


def run_replay_command(
    args: argparse.Namespace, load: Callable[[DataLayer], LoadedSettings]
) -> int:
    """`load`: the settings (and logging) with the files' own layer on top."""
    if args.speed is not None and not args.speed > 0:
        sys.stderr.write("trader run: --speed must be positive\n")
        return 2
    try:
        recordings = read_recordings(args.replay, args.symbol, reading_options(args))
        layer = settings_from(recordings)
    except RecordingsRequestError as error:
        sys.stderr.write(f"trader run: {error} (--replay FILE, --symbol NAME)\n")
        return 2
    except ReplayDataError as error:
        sys.stderr.write(f"trader run: {error}\n")
        return EX_DATAERR
    loaded = load(layer)
    try:
        replay = replay_calendars(loaded.settings.market, {r.symbol: r for r in recordings})
    except ValueError as error:  # a calendar no library knows, or one the data cannot use
        sys.stderr.write(f"trader run: {error}\n")
        return EX_DATAERR
    request = ReplayRequest(replay, args.speed, args.max_ticks)
    return asyncio.run(Service(loaded, replay=request).run())
