"""`trader download`, the command: one exchange client, each symbol in turn, a summary each."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import ccxt.async_support as ccxt

from trader.clock import WallClock
from trader.config.market_settings import ExchangeSettings
from trader.domain import Timeframe
from trader.exit_codes import EX_DATAERR, EX_UNAVAILABLE, EX_USAGE
from trader.logging import get_logger
from trader.market.download import download
from trader.market.download_perp import download_perp
from trader.market.feed import ExchangeCallFailed, UnknownSymbols
from trader.market.files.funding import PerpDataError
from trader.market.live_source import exchange_feed


async def download_history(
    settings: ExchangeSettings,
    symbols: Sequence[str],
    timeframe: Timeframe,
    since: datetime,
    until: datetime,
    out: Path,
    kind: str = "spot",
) -> int:
    """`kind` perp: the funding rates and mark-price candles too (`download_perp`)."""
    log = get_logger("trader.download")
    warn = lambda kind: log.warning("exchange error, retrying", kind=kind)  # noqa: E731
    if kind == "perp" and settings.venue != "ccxt":
        sys.stderr.write("trader download: market.kind = perp needs exchange.venue = ccxt\n")
        return EX_USAGE
    try:
        # Stocks are fetched as Alpaca has them: no trading calendar is needed to download.
        feed = exchange_feed(settings, WallClock(), on_error=warn)
    except ValueError as error:
        sys.stderr.write(f"trader download: {error}\n")
        return EX_USAGE
    try:
        await feed.start(symbols)
        for symbol in symbols:
            report = await download(feed, settings.name, symbol, timeframe, since, until, out)
            sys.stdout.write(
                f"{symbol}: {report.bars} bars in {report.path} ({report.added} new, "
                f"{sum(report.skipped.values())} invalid rows skipped, {report.gaps} gaps)\n"
            )
            if kind == "perp":
                perp = await download_perp(
                    feed.exchange, symbol, timeframe, since, until, report.path
                )
                sys.stdout.write(perp.line(symbol))
    except UnknownSymbols as error:
        sys.stderr.write(f"trader download: {error}\n")
        return EX_USAGE
    except PerpDataError as error:
        sys.stderr.write(f"trader download: {error}\n")
        return EX_DATAERR
    except (ExchangeCallFailed, ccxt.BaseError) as error:
        sys.stderr.write(f"trader download: {error}; run it again to resume\n")
        return EX_UNAVAILABLE
    finally:
        await feed.close()
    return 0
