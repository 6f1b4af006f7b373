"""The exchange the settings name, as the daemon, `trader reconcile` and `trader download`
reach it: its clock (the wall clock, or a sandbox's accelerated one, `exchange.clock`) and
its market data (through ccxt, or Alpaca's SDK: `exchange.venue`).

Each builder raises ValueError for settings that cannot work (an exchange ccxt does not know,
Alpaca without the keys of the environment it is asked for, a bar length Alpaca has not):
the callers turn it into a configuration error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trader.clock import Clock, ScaledClock, WallClock
from trader.config.market_settings import ExchangeSettings, MarketSettings
from trader.domain import Timeframe
from trader.market.calendars.registry import CONTINUOUS
from trader.market.retry import RetryPolicy

if TYPE_CHECKING:
    from trader.market.ccxt_feed import CcxtMarketData


def calendar_names(market: MarketSettings) -> dict[str, str]:
    """Each symbol's calendar by name; `auto` is continuous (crypto trades around the clock;
    a stock must name its exchange's)."""
    names = {s: market.calendars.get(s, market.calendar) for s in market.symbols}
    return {s: CONTINUOUS if n == "auto" else n for s, n in names.items()}


def venue_clock(settings: ExchangeSettings) -> Clock:
    """The wall clock, or the accelerated one a sandbox keeps (`exchange.clock`)."""
    start = settings.clock.start()
    return WallClock() if start is None else ScaledClock(*start)


def exchange_feed(
    settings: ExchangeSettings,
    clock: Clock,
    market: MarketSettings | None = None,
    on_error: Callable[[str], None] = lambda kind: None,
) -> CcxtMarketData:
    """The exchange's market data (with the client the live broker shares). `market`: the
    daemon's, whose bar length must be the venue's and whose stocks' calendars are compared
    with Alpaca's at start; None for a download or a reconciliation, which need neither."""
    retry = RetryPolicy(attempts=settings.retry_attempts, max_delay_s=settings.retry_max_delay_s)
    if settings.venue == "alpaca":
        from trader.market.alpaca.feed import AlpacaMarketData, alpaca_exchange  # noqa: PLC0415
        from trader.market.alpaca.wire import alpaca_timeframe  # noqa: PLC0415

        names: dict[str, str] = {}
        if market is not None:
            alpaca_timeframe(Timeframe(market.timeframe))  # ValueError: Alpaca has no such bars
            names = calendar_names(market)
        feed = AlpacaMarketData(
            alpaca_exchange(settings, clock), clock, names, retry=retry, on_error=on_error
        )
        feed.check_sessions = market is not None
        return feed
    from trader.market.ccxt_feed import CcxtMarketData, create_exchange  # noqa: PLC0415 - slow

    return CcxtMarketData(create_exchange(settings), clock, retry=retry, on_error=on_error)
