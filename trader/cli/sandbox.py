"""`trader sandbox --data FILE...`: the emulator served as a live venue on loopback."""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

from trader.cli.options import Verbs, load
from trader.exit_codes import EX_ARGUMENTS, EX_DATAERR


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "sandbox",
        parents=[common],
        help="serve a local Binance spot emulator to trade against live, without an account",
        description=(
            "Replays recorded bars on the wall clock (each compressed to --bar-seconds) as a "
            "Binance spot venue on loopback, with one funded test account, and prints how to "
            "point the daemon at it (broker.mode = live). Stops on SIGTERM/SIGINT."
        ),
    )
    parser.add_argument(
        "--data", nargs="+", type=Path, required=True, metavar="FILE",
        help="CSV or Parquet recordings, one per symbol",
    )  # fmt: skip
    parser.add_argument("--symbol", action="append", help="symbol of each file, in order")
    parser.add_argument(
        "--bar-seconds", type=int, default=1, help="real seconds per recorded bar (default 1)"
    )
    parser.add_argument(
        "--warmup", type=int, default=600, help="bars already closed at the start (default 600)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default loopback)")
    parser.add_argument("--port", type=int, default=9380, help="listen port (0: any free one)")
    parser.add_argument(
        "--cash", type=_decimal, default=Decimal(10_000), help="test USDT in the account"
    )
    parser.add_argument("--api-key", help="the test account's key (default: random)")
    parser.add_argument("--api-secret", help="the test account's secret (default: random)")
    parser.add_argument(
        "--ready-file", type=Path, help="write the address and test keys here as JSON"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 - loads in 50 ms: not for --help

    from trader.emulator.sandbox import SandboxSettings, serve_sandbox  # noqa: PLC0415 - aiohttp
    from trader.market.replay import ReplayDataError, read_recording  # noqa: PLC0415

    load(args)
    if args.symbol and len(args.symbol) != len(args.data):
        sys.stderr.write("trader sandbox: give one --symbol per --data file, or none\n")
        return EX_ARGUMENTS
    if args.bar_seconds < 1 or args.warmup < 1:
        sys.stderr.write("trader sandbox: --bar-seconds and --warmup must be at least 1\n")
        return EX_ARGUMENTS
    try:
        recordings = [
            read_recording(path, args.symbol[i] if args.symbol else None)
            for i, path in enumerate(args.data)
        ]
    except ReplayDataError as error:
        sys.stderr.write(f"trader sandbox: {error}\n")
        return EX_DATAERR
    settings = SandboxSettings(
        recordings,
        bar_seconds=args.bar_seconds,
        warmup=args.warmup,
        host=args.host,
        port=args.port,
        cash=args.cash,
        api_key=args.api_key,
        api_secret=args.api_secret,
    )
    return asyncio.run(serve_sandbox(settings, args.ready_file))


def _decimal(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_finite() or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative amount")
    return value
