"""A paper perpetual daemon on a LIVE feed (the runner's `build_engine` on the real ccxt
`binanceusdm` client against the futures emulator's live routes, not a replay) reads its
funding and marks from the venue (`trader.market.live_perp_tape`).

What each test expects is computed from the emulator's own records, never from our code:
- funding = rate x mark x signed position, positive paid by a long at a positive rate
  (Binance, USDⓈ-M "Introduction to Binance Futures Funding Rates": funding amount = position
  value x funding rate, position value = mark price x size), the mark the venue paid it on
  (GET /fapi/v1/fundingRate's `markPrice`: "mark price associated with a particular funding
  fee charge", Binance USDⓈ-M "Get Funding Rate History");
- liquidation on the mark price, never the last price (Binance "Liquidation Protocol",
  docs.traderwagon.com/faq/futures-trading-introduction/liquidation-protocol; the issue's
  acceptance: "a wick in the last price alone never liquidates; the mark price does");
- an isolated position's funding comes out of its own margin (Binance "Isolated margin"), so
  its liquidation price moves with it, and a restart must not forget it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog
from pydantic import SecretStr

from tests.integration.emulated import FAST_RETRY
from tests.integration.futures_setup import (
    ETH,
    KEY,
    SECRET,
    Perps,
    PerpSpec,
    at,
    perps,
    spec,
    with_bar,
)
from tests.integration.test_perp_engine import LongOnce
from trader.config.market_settings import ExchangeSettings
from trader.config.schema import Settings
from trader.config.trading_settings import BrokerSettings
from trader.domain import Bar, Direction, Fill, Signal
from trader.emulator.faults import Fault, FaultPlan
from trader.emulator.futures_market import FundingEvent, brackets_from
from trader.emulator.perp_sandbox import QuotedFuturesApi
from trader.engine.pipeline import Engine
from trader.engine.report import TickReport
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.ledger.funding import read_funding, read_liquidations
from trader.ledger.trading import TradingLedger
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.live_perp_tape import LivePerpTapes
from trader.runner import build_engine
from trader.strategy.base import AtMarket, Decision
from trader.telemetry.labels import tick_outcome

pytestmark = pytest.mark.integration

VENUE_ID = "ETHUSDT"
FUNDING_HOUR = 37  # the settlement between the ticks at 37h and 38h (at 37h + 3 ms)
RATE = Decimal("0.0004")


def settings(path: Path, margin_mode: str = "cross", leverage: int = 5) -> Settings:
    return Settings(
        exchange={"id": "binanceusdm"},
        market={"kind": "perp", "symbols": [ETH], "context_bars": 24},
        forecast={"model": "baseline", "baseline_lookback": 16},
        strategy={"position_fraction": 0.5},
        risk={"max_leverage": leverage, "min_edge_bps": 0, "max_order_notional": 5000,
              "max_drawdown": 1.0, "max_daily_loss": 1.0},
        broker={"mode": "paper", "margin_mode": margin_mode, "liquidation_fee_bps": 50},
        ledger={"path": path},
    )  # fmt: skip


def with_marks(marks: list[Bar], hour: int, low: float, close: float) -> list[Bar]:
    return with_bar(marks, hour, low, max(close, marks[hour].open) + 0.1, close)


@dataclass
class Daemon:
    p: Perps
    feed: CcxtMarketData
    database: Database
    engine: Engine

    @property
    def tapes(self) -> LivePerpTapes:
        perps = self.engine.perps
        assert perps is not None
        assert isinstance(perps.tapes, LivePerpTapes)
        return perps.tapes

    async def tick(self, hour: float) -> TickReport:
        self.p.advance(hour)
        return await self.engine.tick(self.p.clock.now())


@asynccontextmanager
async def daemon(p: Perps, config: Settings, venue: str = "binanceusdm") -> AsyncIterator[Daemon]:
    exchange = p.exchange
    if venue == "aster":  # ccxt's `aster` on the emulator's /fapi/v3 alias (public routes)
        exchange = create_exchange(ExchangeSettings(id="aster", api_base_url=p.base_url))
        await exchange.load_markets()
    exchange.enableRateLimit = False
    feed = CcxtMarketData(exchange, p.clock, retry=FAST_RETRY)
    database = await Database.open(config.ledger.path)
    engine = await build_engine(
        config, feed, database, p.clock.now(), forecasters=[BaselineForecaster(16)]
    )
    engine.strategies = {ETH: LongOnce()}
    try:
        yield Daemon(p, feed, database, engine)
    finally:
        engine.close()
        await database.close()
        if exchange is not p.exchange:
            await exchange.close()


def funding_spec(mark_at_funding: float = 101.3) -> PerpSpec:
    eth = spec("ETH", funding=[FundingEvent(at(FUNDING_HOUR, 0.003), RATE)])
    # The mark series differs from the last price, so the test tells which was used.
    eth.mark = with_marks(eth.mark, FUNDING_HOUR - 1, 99.9, mark_at_funding)
    return eth


def held(fills: Sequence[Fill], until: datetime) -> Decimal:
    return sum(
        (f.amount if f.side.value == "buy" else -f.amount for f in fills if f.at <= until),
        Decimal(0),
    )


@pytest.mark.parametrize(
    ("venue", "fault"),
    [("binanceusdm", False), ("binanceusdm", True), ("aster", True)],
    ids=["refreshed", "refresh_failed_once", "aster_refresh_failed_once"],
)
async def test_a_paper_daemon_on_the_live_feed_books_the_venues_funding_once(
    tmp_path: Path, venue: str, fault: bool
) -> None:
    eth = funding_spec()
    faults = FaultPlan()
    async with (
        perps(eth, start_hour=35, faults=faults, api_class=QuotedFuturesApi) as p,
        daemon(p, settings(tmp_path / "ledger.sqlite3"), venue) as d,
    ):
        with structlog.testing.capture_logs() as logs:
            await d.tick(35)  # opens the long
            last_good = await d.tick(36)
            if fault:  # the venue refuses the funding history at the tick it falls due
                faults.add(Fault("status", path="/fapi/v[13]/fundingRate", status=503))
            failed_at = await d.tick(FUNDING_HOUR)
            booked_then = await d.database.run(read_funding)
            next_one = await d.tick(FUNDING_HOUR + 1)
            await d.tick(FUNDING_HOUR + 2)
        fills = await TradingLedger(d.database).fills()
        rows = await d.database.run(read_funding)
        failures = d.tapes.failures
    # The emulator's own record of the settlement: its time, rate and mark.
    (settled,) = eth.funding
    venue_mark = Decimal("101.3")  # the close of the mark bar that closed at the funding time
    assert fills, "the long was opened"
    size = held(fills, settled.time)
    assert size > 0
    expected = venue_mark * size * RATE
    (row,) = rows  # once, whether or not a refresh failed
    assert row.at == settled.time.replace(tzinfo=UTC)
    assert (row.rate, row.mark, row.position, row.source) == (RATE, venue_mark, size, "modelled")
    assert row.paid == expected
    refused = [e for e in logs if e["event"] == "perp tape refresh failed"]
    if fault:
        assert booked_then == []  # not booked at the tick whose refresh failed ...
        assert failures == 1
        assert len(refused) == 1
        assert "the mark read at" in refused[0]["valued_on"]
        # ... and the tick says so: valued on the mark read at the tick before, degraded.
        assert failed_at.stale_marks == {ETH: last_good.at}
        assert (failed_at.outcome, tick_outcome(failed_at)) == ("degraded", "degraded")
    else:
        assert booked_then == [row]  # ... booked at the tick it fell due when refreshed
        assert failures == 0
        assert refused == []
        assert (failed_at.stale_marks, failed_at.outcome) == ({}, "ok")
    assert (next_one.stale_marks, next_one.outcome) == ({}, "ok")


class LongThenFlat:
    """Long at the first tick; flat from the tick at FUNDING_HOUR on."""

    name = "long_then_flat"

    def decide(self, ctx: Any) -> Decision:
        direction = Direction.LONG if ctx.at < at(FUNDING_HOUR) else Direction.FLAT
        signal = Signal(self.name, ctx.symbol, ctx.at, direction, "test")
        return Decision(
            signal, AtMarket(direction), 1000.0 if direction is Direction.LONG else None
        )


async def test_a_funding_time_booked_late_is_paid_on_the_position_held_at_it(
    tmp_path: Path,
) -> None:
    """The refresh fails at the tick the funding falls due, and that tick's orders close the
    long: the next tick books the funding on the long held at the funding time, not on the
    flat position held when it is booked."""
    eth = funding_spec()
    faults = FaultPlan()
    async with (
        perps(eth, start_hour=35, faults=faults, api_class=QuotedFuturesApi) as p,
        daemon(p, settings(tmp_path / "ledger.sqlite3")) as d,
    ):
        d.engine.strategies = {ETH: LongThenFlat()}
        await d.tick(35)
        await d.tick(36)
        faults.add(Fault("status", path="/fapi/v1/fundingRate", status=503))
        await d.tick(FUNDING_HOUR)  # the refresh fails; the long is closed
        flat_then = d.engine.portfolio.amount(ETH)
        await d.tick(FUNDING_HOUR + 1)
        fills = await TradingLedger(d.database).fills()
        rows = await d.database.run(read_funding)
    (settled,) = eth.funding
    size = held(fills, settled.time)
    assert size > 0
    assert flat_then == 0
    (row,) = rows
    assert (row.position, row.mark) == (size, Decimal("101.3"))
    assert row.paid == Decimal("101.3") * size * RATE


async def test_a_wick_in_the_last_price_alone_does_not_liquidate_the_mark_does(
    tmp_path: Path,
) -> None:
    eth = spec("ETH")
    # 10x isolated long at ~100: liquidation near 90.4 (one bracket, MMR 0.4%). The last
    # price wicks to 50 in the bar of hour 37 with the mark at 99.8; the mark falls to 80 in
    # the bar of hour 39.
    eth.last = with_bar(eth.last, 37, 50.0, 100.5, 100.0)
    eth.mark = with_marks(eth.mark, 39, 80.0, 99.0)
    async with (
        perps(eth, start_hour=35, api_class=QuotedFuturesApi) as p,
        daemon(p, settings(tmp_path / "ledger.sqlite3", "isolated", 10)) as d,
    ):
        await d.tick(35)
        await d.tick(36)
        await d.tick(37)
        await d.tick(38)  # the wick's bar closed: nothing
        after_wick = await d.database.run(read_liquidations)
        await d.tick(39)
        await d.tick(40)  # the mark's bar closed: liquidated
        liquidations = await d.database.run(read_liquidations)
    assert after_wick == []
    (row,) = liquidations
    assert row.trigger_mark == Decimal(80)
    assert row.at == at(40)


async def test_a_restart_keeps_an_isolated_position_s_funding_in_its_liquidation_price(
    tmp_path: Path,
) -> None:
    eth = funding_spec()
    config = settings(tmp_path / "ledger.sqlite3", "isolated", 5)
    async with perps(eth, start_hour=35, api_class=QuotedFuturesApi) as p:
        async with daemon(p, config) as d:
            await d.tick(35)
            await d.tick(36)
            await d.tick(FUNDING_HOUR)
            perps_before = d.engine.perps
            assert perps_before is not None
            paid_before = dict(perps_before.isolated_paid)
            account = perps_before._account(d.engine.portfolio)
            before = account.liquidation_price(ETH, {ETH: Decimal(100)})
            rows = await d.database.run(read_funding)
        async with daemon(p, config) as again:  # a restart on the same ledger
            perps_after = again.engine.perps
            assert perps_after is not None
            after = perps_after._account(again.engine.portfolio).liquidation_price(
                ETH, {ETH: Decimal(100)}
            )
            paid_after = dict(perps_after.isolated_paid)
            guard = again.engine._orders.guard  # the buffer rule judges on the same margin
            assert guard is not None
            guard_funding = dict(guard.isolated_funding())
    (row,) = rows
    assert row.paid > 0  # a long at a positive rate paid
    assert paid_before == {ETH: (1, row.paid)}
    assert paid_after == paid_before
    assert before is not None
    assert after == before
    assert guard_funding == {ETH: row.paid}


async def test_a_live_perp_daemon_uses_the_venue_s_brackets_and_mark_and_books_no_funding(
    tmp_path: Path,
) -> None:
    """The live engine's perp stage and buffer rule judge on the brackets the venue lists
    (GET /fapi/v1/leverageBracket, read by the live broker at its preparation), not the
    default table, and value on the venue's mark (GET /fapi/v1/premiumIndex), not the mid; the
    venue's funding rows come at reconcile, so the engine books none itself."""
    eth = funding_spec()
    async with perps(eth, start_hour=35, api_class=QuotedFuturesApi) as p:
        (listing,) = p.api.perps.listings
        # An altcoin's table: 1% from the first notional (Binance's BTCUSDT starts at 0.4%).
        listing.brackets = brackets_from(
            [(Decimal(5_000), Decimal("0.01"), 50), (Decimal(25_000), Decimal("0.025"), 20),
             (Decimal(10_000_000), Decimal("0.05"), 10)]
        )  # fmt: skip
        config = settings(tmp_path / "ledger.sqlite3", "cross", 5).model_copy(
            update={
                "exchange": ExchangeSettings(
                    id="binanceusdm", api_key=SecretStr(KEY), api_secret=SecretStr(SECRET),
                    api_base_url=p.base_url, timeout_s=2,
                ),
                "broker": BrokerSettings(
                    mode="live", live_confirmation=True, lock_dir=tmp_path / "locks",
                    recv_window_ms=1000, margin_mode="cross",
                ),
            }
        )  # fmt: skip
        async with daemon(p, config) as d:
            perps_stage = d.engine.perps
            assert perps_stage is not None
            brackets = perps_stage.terms.brackets[ETH].brackets
            guard = d.engine._orders.guard
            assert guard is not None
            assert (await d.engine.reconcile(p.clock.now())).ok
            await d.tick(36)  # opens the long at the venue
            await d.tick(FUNDING_HOUR)
            marks = dict(d.engine.account.perp_marks)
            rows = await d.database.run(read_funding)
            size = d.engine.portfolio.amount(ETH)
            report = await d.engine.reconcile(p.clock.now())
            venue_rows = await d.database.run(read_funding)
    assert [(b.notional_cap, b.maint_margin_ratio) for b in brackets][:2] == [
        (Decimal(5_000), Decimal("0.01")), (Decimal(25_000), Decimal("0.025")),
    ]  # fmt: skip
    assert guard.brackets[ETH].brackets == brackets
    # The mark now: the close of the mark bar that closed at 37h (101.3); the mid is ~100.
    assert marks == {ETH: Decimal("101.3")}
    assert rows == []  # the engine books none itself ...
    assert size > 0
    assert report.ok, report.text
    (row,) = venue_rows  # ... the venue's comes at reconcile, paid on the venue's mark
    assert row.source == "venue"
    assert row.paid == Decimal("101.3") * size * RATE
