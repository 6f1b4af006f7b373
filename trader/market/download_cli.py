"""`trader download`, the command: one exchange client, each symbol in turn, a summary each."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from trader.clock import WallClock
from trader.config.market_settings import ExchangeSettings
from trader.domain import Timeframe
from trader.exit_codes import EX_UNAVAILABLE, EX_USAGE
from trader.logging import get_logger
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.download import download
from trader.market.feed import ExchangeCallFailed, UnknownSymbols
from trader.market.retry import RetryPolicy


async def download_history(
    settings: ExchangeSettings,
    symbols: Sequence[str],
    timeframe: Timeframe,
    since: datetime,
    until: datetime,
    out: Path,
) -> int:
    log = get_logger("trader.download")
    retry = RetryPolicy(settings.retry_attempts, max_delay_s=settings.retry_max_delay_s)
    warn = lambda kind: log.warning("exchange error, retrying", kind=kind)  # noqa: E731
    feed: CcxtMarketData
    if settings.venue == "alpaca":
        from trader.market.alpaca.feed import AlpacaMarketData, alpaca_exchange  # noqa: PLC0415

        try:
            exchange = alpaca_exchange(settings)
        except ValueError as error:
            sys.stderr.write(f"trader download: {error}\n")
            return EX_USAGE
        # Stocks are fetched as Alpaca has them: no calendar is needed to download.
        alpaca = AlpacaMarketData(exchange, WallClock(), {}, retry=retry, on_error=warn)
        alpaca.check_sessions = False
        feed = alpaca
    else:
        feed = CcxtMarketData(create_exchange(settings), WallClock(), retry=retry, on_error=warn)
    try:
        await feed.start(symbols)
        for symbol in symbols:
            report = await download(feed, settings.name, symbol, timeframe, since, until, out)
            sys.stdout.write(
                f"{symbol}: {report.bars} bars in {report.path} ({report.added} new, "
                f"{sum(report.skipped.values())} invalid rows skipped, {report.gaps} gaps)\n"
            )
    except UnknownSymbols as error:
        sys.stderr.write(f"trader download: {error}\n")
        return EX_USAGE
    except ExchangeCallFailed as error:
        sys.stderr.write(f"trader download: {error}; run it again to resume\n")
        return EX_UNAVAILABLE
    finally:
        await feed.close()
    return 0
