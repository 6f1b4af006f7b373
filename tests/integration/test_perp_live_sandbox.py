"""`trader sandbox --venue binanceusdm|aster`: the futures emulator on helper C's recorded
SOLUSDT perp bars, mark candles and funding rows (tests/data/perp/, its README says what is
real), laid on a compressed clock, as the daemon's own ccxt client and market data read it.

Sources: ccxt 4.5.90 binance.py (`fetch_bids_asks` -> GET /fapi/v1/ticker/bookTicker,
`fetch_funding_rate_history` -> GET /fapi/v1/fundingRate, `fetch_ohlcv` with price="mark" ->
/fapi/v1/markPriceKlines); Binance USDⓈ-M "Symbol Order Book Ticker".
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Literal

import pytest
from pydantic import SecretStr

from trader.broker.live.perp import PerpLiveBroker
from trader.broker.live.perp_funding import MemoryFunding
from trader.clock import WallClock
from trader.config.market_settings import ExchangeSettings
from trader.config.trading_settings import BrokerSettings
from trader.domain import Order, OrderStatus, OrderType, Quote, QuoteSource, Side
from trader.emulator.perp_sandbox import open_perp_sandbox
from trader.emulator.sandbox_replay import SandboxSettings
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.files.funding import read_funding
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration
DATA = Path(__file__).parents[1] / "data" / "perp"
SOL = "SOL/USDT:USDT"


@pytest.mark.parametrize("venue", ["binanceusdm", "aster"])
async def test_the_daemons_client_trades_a_perp_sandbox_on_recorded_mark_and_funding(
    venue: Literal["binanceusdm", "aster"],
) -> None:
    recording = read_recording(DATA / "SOLUSDT_1h.csv.gz", "SOL/USDT")
    settings = SandboxSettings([recording], bar_seconds=1, warmup=100, venue=venue)
    sandbox = await open_perp_sandbox(settings)
    env = sandbox.daemon_settings()
    exchange = create_exchange(ExchangeSettings(
        id=env["TRADER_EXCHANGE__ID"], api_key=SecretStr(env["TRADER_EXCHANGE__API_KEY"]),
        api_secret=SecretStr(env["TRADER_EXCHANGE__API_SECRET"]),
        api_base_url=env["TRADER_EXCHANGE__API_BASE_URL"],
    ))  # fmt: skip
    feed = CcxtMarketData(exchange, WallClock())
    try:
        assert env["TRADER_MARKET__KIND"] == "perp"
        assert env["TRADER_MARKET__SYMBOLS"] == SOL
        await feed.start([SOL])
        instrument = feed.instrument(SOL)
        assert instrument.is_perp
        assert instrument.contract_size == 1
        if venue == "binanceusdm":
            (quote,) = (await feed.top_of_book([SOL])).values()
            assert quote.bid is not None
            assert quote.ask is not None
            assert 0 < Decimal(str(quote.bid)) < Decimal(str(quote.ask))
            # The funding rows recorded, in order, with their rates, at compressed times.
            recorded = read_funding(DATA / "funding" / "SOLUSDT_1h.csv")
            served = await exchange.fetch_funding_rate_history(SOL, None, 1000)
            rates = [Decimal(str(r["info"]["fundingRate"])) for r in served]
            assert rates == [r.rate for r in recorded][: len(rates)]
            assert len(rates) >= 10  # those laid before now (100 bars of 8h settlements)
            times = [r["timestamp"] for r in served]
            assert times == sorted(times)
            assert times[1] - times[0] == 8 * 1000  # 8h apart = 8 one-second bars
            marks = await exchange.fetch_ohlcv(SOL, "1s", None, 5, {"price": "mark"})
            assert marks
        broker = PerpLiveBroker(
            exchange, BrokerSettings(margin_mode="cross"), {SOL: instrument},
            max_leverage=2, funding=MemoryFunding(sandbox.clock.now()),
        )  # fmt: skip
        await broker.prepare()
        venue_id = exchange.market(SOL)["id"]
        book = sandbox.server.api.perps.market.top_of_book(venue_id)
        assert book is not None
        bid, ask = book
        now = sandbox.clock.now()
        order = Order.create(
            strategy="sandbox", symbol=SOL, side=Side.SELL, type=OrderType.MARKET,
            amount=Decimal(5), limit_price=None, tick_time=now, leg="a",
        )  # fmt: skip
        done = await broker.submit(order, Quote(SOL, bid, ask, now, QuoteSource.REAL), now)
        assert done.order.status is OrderStatus.FILLED
        (account,) = sandbox.server.api.venue.accounts.values()
        assert account.positions[venue_id].size == Decimal(-5)  # a short
    finally:
        await feed.close()
        await sandbox.server.stop()
