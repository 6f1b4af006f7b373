"""`trader run`: the daemon. With `--replay FILE...`, the daemon itself (scheduler, metrics, MQTT,
systemd notify, signals) over recorded bars, on a simulated clock, with the paper broker and
modelled quotes: it resumes where the ledger stopped and exits 0 at the end of the bars or on
SIGTERM/SIGINT (after the running tick). The files decide the symbols, the timeframe and the
account's currency; each file's market calendar is named in the settings or inferred. A replay
ends as a backtest does: its skipped ticks per symbol by reason on stdout, and exit 1 when a
symbol skipped more than backtest.max_skipped_share of them (unless --allow-skips)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trader.cli.options import Verbs, add_reading_options, load, reading_options
from trader.exit_codes import EX_ARGUMENTS, EX_DATAERR


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    run_ = verbs.add_parser("run", parents=[common], help="run the daemon")
    run_.add_argument(
        "--replay", nargs="+", type=Path, metavar="FILE", help="paper-trade recorded bars instead"
    )
    run_.add_argument(
        "--symbol", action="append", help="symbol of each replay file, in order (default: its name)"
    )
    run_.add_argument(
        "--speed", type=float, help="replay at this multiple of real time (default: at once)"
    )
    run_.add_argument("--max-ticks", type=int, help="stop after this many ticks")
    run_.add_argument(
        "--allow-skips",
        action="store_true",
        help="with --replay: exit 0 even when a symbol skipped more than "
        "backtest.max_skipped_share of the ticks (the summary still says so first)",
    )
    add_reading_options(run_).set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 - loads in 50 ms: not for --help

    from trader.service.service import Service  # noqa: PLC0415 - torch, ccxt, the whole daemon

    if args.replay:
        return _replay(args)
    if args.allow_skips:
        sys.stderr.write("trader run: --allow-skips applies to --replay\n")
        return EX_ARGUMENTS
    return asyncio.run(Service(load(args)).run())


def _replay(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 - loads in 50 ms: not for --help

    # Imported here: the daemon's modules load only when it runs.
    from trader.market.replay import (  # noqa: PLC0415
        RecordingsRequestError,
        ReplayDataError,
        read_recordings,
        settings_from,
    )
    from trader.market.replay_calendars import replay_calendars  # noqa: PLC0415
    from trader.service.parts import ReplayRequest  # noqa: PLC0415
    from trader.service.service import Service  # noqa: PLC0415

    if args.speed is not None and not args.speed > 0:
        sys.stderr.write("trader run: --speed must be positive\n")
        return EX_ARGUMENTS
    try:
        recordings = read_recordings(args.replay, args.symbol, reading_options(args))
        layer = settings_from(recordings)
    except RecordingsRequestError as error:
        sys.stderr.write(f"trader run: {error} (--replay FILE, --symbol NAME)\n")
        return EX_ARGUMENTS
    except ReplayDataError as error:
        sys.stderr.write(f"trader run: {error}\n")
        return EX_DATAERR
    loaded = load(args, layer)
    try:
        replay = replay_calendars(loaded.settings.market, {r.symbol: r for r in recordings})
    except ValueError as error:  # a calendar no library knows, or one the data cannot use
        sys.stderr.write(f"trader run: {error}\n")
        return EX_DATAERR
    request = ReplayRequest(replay, args.speed, args.max_ticks)
    service = Service(loaded, replay=request)
    code = asyncio.run(service.run())
    if service.write_failure is not None:  # stopped at its first refused write: said first
        sys.stdout.write(
            f"trader run --replay stopped: {service.write_failure}. Nothing half-done was "
            "booked; free space and run the same command again: it resumes after the "
            f"ledger's last tick (exit {code})\n"
        )
    ledger = loaded.settings.ledger.path
    if code != 0 or not ledger.exists():  # it did not run: the log said why
        return code
    from trader.backtest.replay_verdict import end_replay, read_verdict  # noqa: PLC0415

    limit = loaded.settings.backtest.max_skipped_share
    verdict = read_verdict(ledger, list(replay.recordings), limit)
    return end_replay(verdict, accepted=args.allow_skips, out=sys.stdout)
