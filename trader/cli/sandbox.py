"""`trader sandbox --data FILE...`: the emulator served as a live venue on loopback (Binance
spot, Alpaca with `--venue alpaca`, Binance USDⓈ-M or Aster perps with `--venue binanceusdm`
or `--venue aster`)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

from trader.cli.options import Verbs, load
from trader.exit_codes import EX_ARGUMENTS, EX_DATAERR


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "sandbox",
        parents=[common],
        help="serve a local exchange emulator (Binance or Alpaca) to trade against live, "
        "without an account",
        description=(
            "Replays recorded bars (each compressed to --bar-seconds of real time) as a Binance "
            "spot venue, or with --venue alpaca as Alpaca (US stocks and crypto, on an "
            "accelerated clock the daemon keeps too), on loopback, with one funded test "
            "account, and prints the command that runs the daemon against it in live mode. "
            "Stops on SIGTERM/SIGINT."
        ),
    )
    parser.add_argument(
        "--venue", choices=["binance", "alpaca", "binanceusdm", "aster"], default="binance",
        help="whose API it speaks (default binance spot; binanceusdm and aster: USDⓈ-M perps, "
        "with the mark candles and funding rows recorded beside each bar file)",
    )  # fmt: skip
    parser.add_argument(
        "--data", nargs="+", type=Path, required=True, metavar="FILE",
        help="CSV or Parquet recordings, one per symbol",
    )  # fmt: skip
    parser.add_argument("--symbol", action="append", help="symbol of each file, in order")
    parser.add_argument(
        "--bar-seconds",
        type=float,
        default=1.0,
        help="real seconds per recorded bar (default 1; Binance: whole seconds)",
    )
    parser.add_argument(
        "--timeframe",
        help="alpaca: the bars' length at the venue (default 1m, Alpaca's shortest); its "
        "clock runs timeframe / bar-seconds times as fast as the wall clock",
    )
    parser.add_argument(
        "--start",
        type=_instant,
        help="alpaca: the venue's time when the sandbox starts, ISO 8601 with a zone "
        "(default: now)",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="alpaca: the venue's clock stands at --start this long before it runs (time to "
        "start the daemon; default 0)",
    )
    parser.add_argument(
        "--calendar", action="append", default=[], type=_pair, metavar="SYMBOL=CALENDAR",
        help="alpaca: this symbol is a US stock trading in that exchange's sessions, e.g. "
        "AAPL/USD=XNYS (its bars are laid on them); others are crypto pairs",
    )  # fmt: skip
    parser.add_argument(
        "--data-plan", choices=["plus", "free"], default="plus",
        help="alpaca: the account's market data plan: plus (Algo Trader Plus: IEX and SIP) or "
        "free (IEX; SIP refused for the last 15 minutes, as Alpaca refuses it)",
    )  # fmt: skip
    parser.add_argument(
        "--iex-sparsity", type=float, default=None, metavar="SHARE",
        help="alpaca: the share of minutes with no IEX trade, left out of feed=iex bars "
        "(default 0.3, a mid-cap's; 0: complete)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", type=int, default=600, help="bars already closed at the start (default 600)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default loopback)")
    parser.add_argument("--port", type=int, default=9380, help="listen port (0: any free one)")
    parser.add_argument(
        "--cash",
        type=_decimal,
        default=Decimal(10_000),
        help="test cash in the account (USDT at Binance, USD at Alpaca)",
    )
    parser.add_argument(
        "--liquidity-share", type=_share, default=Decimal("0.1"), metavar="SHARE",
        help="the share of a bar's volume a resting limit order may fill per bar (default "
        "0.1; smaller: partial fills)",
    )  # fmt: skip
    parser.add_argument(
        "--slippage-bps", type=_decimal, default=Decimal(0), metavar="BPS",
        help="market orders fill this many bps beyond the quoted touch (default 0), to test "
        "what slippage costs",
    )  # fmt: skip
    parser.add_argument(
        "--market-fill-share", type=_share, default=Decimal(1), metavar="SHARE",
        help="a market order fills at most this share of its quantity, the rest expires "
        "(default 1; less: partial fills)",
    )  # fmt: skip
    parser.add_argument("--api-key", help="the test account's key (default: random)")
    parser.add_argument("--api-secret", help="the test account's secret (default: random)")
    parser.add_argument(
        "--ready-file", type=Path, help="write the address and test keys here as JSON"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 - loads in 50 ms: not for --help

    from trader.emulator.alpaca_feeds import DEFAULT_IEX_SPARSITY, DataPlan  # noqa: PLC0415
    from trader.emulator.sandbox import SandboxSettings, serve_sandbox  # noqa: PLC0415 - aiohttp
    from trader.market.replay import ReplayDataError, read_recording  # noqa: PLC0415

    load(args)
    if args.symbol and len(args.symbol) != len(args.data):
        sys.stderr.write("trader sandbox: give one --symbol per --data file, or none\n")
        return EX_ARGUMENTS
    if not args.bar_seconds > 0 or args.warmup < 1:
        sys.stderr.write("trader sandbox: --bar-seconds must be positive, --warmup at least 1\n")
        return EX_ARGUMENTS
    alpaca_only = (args.start, args.calendar, args.timeframe, args.hold,
                   args.data_plan != "plus", args.iex_sparsity is not None)  # fmt: skip
    if args.venue != "alpaca" and any(alpaca_only):
        sys.stderr.write(
            "trader sandbox: --start, --hold, --calendar, --timeframe, --data-plan and "
            "--iex-sparsity are Alpaca's\n"
        )
        return EX_ARGUMENTS
    sparsity = DEFAULT_IEX_SPARSITY if args.iex_sparsity is None else args.iex_sparsity
    if not 0 <= sparsity < 1:
        sys.stderr.write("trader sandbox: --iex-sparsity must be at least 0 and below 1\n")
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
        liquidity_share=args.liquidity_share,
        slippage_bps=args.slippage_bps,
        market_fill_share=args.market_fill_share,
        venue=args.venue,
        timeframe=args.timeframe or "1m",
        start=args.start,
        hold_s=max(0.0, args.hold),
        calendars=dict(args.calendar),
        data_plan=DataPlan(free=args.data_plan == "free", iex_sparsity=sparsity),
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


def _share(text: str) -> Decimal:
    value = _decimal(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share above 0 and at most 1")
    return value


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no zone: add one, e.g. +00:00")
    return value


def _pair(text: str) -> tuple[str, str]:
    symbol, equals, calendar = text.partition("=")
    if not equals or not symbol or not calendar:
        raise argparse.ArgumentTypeError(f"{text!r} is not SYMBOL=CALENDAR, e.g. AAPL/USD=XNYS")
    return symbol, calendar
