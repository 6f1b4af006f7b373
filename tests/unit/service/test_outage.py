"""An exchange outage as the metrics tell it: the quote poll and the ticks say the exchange is
unreachable, the quote age keeps growing from the newest quote seen (a stale one too), and a
reload moves the risk limits the rules compare against."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace

from tests.unit.engine.builders import T0
from tests.unit.service.test_parts import parts, sample
from trader.clock import SimulatedClock
from trader.config.trading_settings import RiskSettings
from trader.engine.report import TickReport
from trader.logging import get_logger
from trader.market.feed import ExchangeCallFailed
from trader.market.hygiene import RawQuote, SkipReason
from trader.market.no_trade import NoTradeBars
from trader.service.control_surface import ControlSurface
from trader.service.exchange import ExchangeConnection
from trader.service.jobs import ScheduledJobs
from trader.service.parts import Parts, StopRequest
from trader.service.shutdown import stop_background
from trader.service.telemetry import start_telemetry
from trader.service.ticking import Ticking

SYMBOL = "BTC/USDT"


class Feed:
    """An exchange that answers with a quote stamped `lag` seconds ago, or is away."""

    name = "ccxt:binance"

    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock
        self.up = True
        self.lag = timedelta(0)

    async def top_of_book(self, symbols):
        if not self.up:
            raise ExchangeCallFailed("fetch_bids_asks", "network", "connection refused")
        at = self.clock.now() - self.lag
        return {s: RawQuote(Decimal("99.9"), Decimal("100.1"), at, at) for s in symbols}


def running(clock: SimulatedClock) -> tuple[Parts, Feed, ExchangeConnection]:
    made = parts(market={"symbols": [SYMBOL], "max_quote_age_s": 30})
    feed = Feed(clock)
    market = SimpleNamespace(feed=feed, windows={}, missing={}, no_trade=NoTradeBars())
    made.engine = SimpleNamespace(market=market, risk=SimpleNamespace())  # type: ignore[assignment]
    made.venue = SimpleNamespace(clock=clock, feed=feed)  # type: ignore[assignment]
    assert made.metrics is not None
    made.metrics.set_risk_limits(made.settings.risk)  # as start_telemetry does
    made.metrics.use_clock(clock)
    return made, feed, ExchangeConnection(made, get_logger("test"))


def age(made: Parts) -> float | None:
    return sample(made, "trader_quote_age_seconds", symbol=SYMBOL)


async def test_the_quote_age_grows_while_the_exchange_is_away():
    clock = SimulatedClock(T0)
    made, feed, exchange = running(clock)
    jobs = ScheduledJobs(made, exchange, asyncio.Lock(), get_logger("test"))
    await jobs.poll_quotes()
    assert (age(made), sample(made, "trader_exchange_reachable")) == (0.0, 1.0)
    feed.up = False
    for seconds in (10, 20, 70):
        clock.advance_to(T0 + timedelta(seconds=seconds))
        await jobs.poll_quotes()
    assert age(made) == 70
    assert sample(made, "trader_exchange_reachable") == 0.0
    assert made.quotes == {SYMBOL: SkipReason.EXCHANGE_UNAVAILABLE}
    feed.up = True
    await jobs.poll_quotes()
    assert (age(made), sample(made, "trader_exchange_reachable")) == (0.0, 1.0)


async def test_a_quote_too_old_to_trade_on_sets_the_age_it_has():
    clock = SimulatedClock(T0)
    made, feed, exchange = running(clock)
    feed.lag = timedelta(seconds=45)  # the venue answers with a book that stopped moving
    await ScheduledJobs(made, exchange, asyncio.Lock(), get_logger("test")).poll_quotes()
    assert made.quotes == {SYMBOL: SkipReason.STALE_QUOTE}
    assert age(made) == 45
    assert sample(made, "trader_quote_source", symbol=SYMBOL, source="real") == 0.0


def test_a_tick_that_could_not_reach_the_exchange_marks_it_unreachable():
    made, _, exchange = running(SimulatedClock(T0))
    ticking = Ticking(made, exchange, get_logger("test"))
    ticking.after_report(TickReport(T0, ready=[SYMBOL]))
    assert sample(made, "trader_exchange_reachable") == 1.0
    # Any symbol's calls failing, none ready: unreachable (the others may skip for other reasons).
    ticking.after_report(TickReport(T0, skipped={SYMBOL: "exchange_unavailable", "X": "gap"}))
    assert sample(made, "trader_exchange_reachable") == 0.0
    assert exchange.check() == (False, "ccxt:binance unreachable")


def test_a_reload_moves_the_risk_limits():
    made, _, _ = running(SimulatedClock(T0))
    assert sample(made, "trader_risk_limit_ratio", limit="max_drawdown") == 0.10
    assert sample(made, "trader_risk_limit_ratio", limit="daily_loss") == 0.05
    risk = RiskSettings(max_drawdown=0.2, max_daily_loss=0.03)
    made.engine.risk.settings = risk  # type: ignore[union-attr]
    ControlSurface(made, StopRequest(), get_logger("test")).on_reloaded(["risk"], [])
    assert sample(made, "trader_risk_limit_ratio", limit="max_drawdown") == 0.2
    assert sample(made, "trader_risk_limit_ratio", limit="daily_loss") == 0.03


async def test_telemetry_starts_with_the_risk_limits_and_says_the_clock_is_real():
    made = parts(metrics={"enabled": False}, risk={"max_drawdown": 0.08})

    async def on_command(payload: bytes) -> None:
        return None

    async with AsyncExitStack() as stack:
        await start_telemetry(made, stack, on_command, get_logger("test"))
        await stop_background(made, "test")
    assert sample(made, "trader_risk_limit_ratio", limit="max_drawdown") == 0.08
    assert sample(made, "trader_clock_simulated") == 0.0
