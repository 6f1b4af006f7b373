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
    feed = CcxtMarketData(
        create_exchange(settings),
        WallClock(),
        retry=RetryPolicy(settings.retry_attempts, max_delay_s=settings.retry_max_delay_s),
        on_error=lambda kind: log.warning("exchange error, retrying", kind=kind),
    )
    try:
        await feed.start(symbols)
        for symbol in symbols:
            report = await download(feed, settings.id, symbol, timeframe, since, until, out)
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
