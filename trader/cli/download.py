"""`trader download`: bar history from an exchange to Parquet, resumable and rate-limited."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from trader.cli.options import Verbs, load, utc_date


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    fetch = verbs.add_parser(
        "download", parents=[common], help="bar history to Parquet (resumable, rate-limited)"
    )
    fetch.add_argument(
        "--venue", choices=["ccxt", "alpaca"], help="ccxt or alpaca (default: exchange.venue)"
    )
    fetch.add_argument("--exchange", help="ccxt exchange id (default: exchange.id)")
    fetch.add_argument("--symbols", help="comma-separated (default: market.symbols)")
    fetch.add_argument("--timeframe", help="bar length (default: market.timeframe)")
    fetch.add_argument("--since", type=utc_date, required=True, help="first bar, UTC date")
    fetch.add_argument("--until", type=utc_date, help="end, UTC date (default: now)")
    fetch.add_argument("--out", type=Path, default=Path("data"), help="folder (default: data)")
    fetch.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 - loads in 50 ms: not for --help

    # Imported here: ccxt takes most of a second to import, and other verbs do not need it.
    from trader.domain import Timeframe  # noqa: PLC0415
    from trader.market.download_cli import download_history  # noqa: PLC0415

    settings = load(args).settings
    exchange_settings = settings.exchange.model_copy(
        update={
            "id": args.exchange or settings.exchange.id,
            "venue": args.venue or settings.exchange.venue,
        }
    )
    symbols = args.symbols.split(",") if args.symbols else settings.market.symbols
    timeframe = Timeframe(args.timeframe or settings.market.timeframe)
    return asyncio.run(
        download_history(
            exchange_settings,
            symbols,
            timeframe,
            args.since,
            args.until or datetime.now(UTC),
            args.out,
            settings.market.kind,
        )
    )
