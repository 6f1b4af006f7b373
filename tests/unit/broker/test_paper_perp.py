"""The paper broker's perpetuals: an order needing more initial margin than the available
balance is refused as Binance refuses it, and an order that reduces a position is reduce-only.

Sources: Binance USDⓈ-M error codes (developers.binance.com, derivatives, USDⓈ-M futures,
"Error Codes"): -2019 "Margin is insufficient", -2022 "ReduceOnly Order is rejected". The
initial margin of an order is its notional / leverage and the available balance is wallet +
unrealised P&L - initial margin of the positions - open orders' margin (Binance, "What Is the
Available Balance, Margin Balance, and Total Balance on Binance Futures?", as helper A's
`PerpAccount.available_balance` cites it). The figures below are computed by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from trader.broker import PaperBroker
from trader.broker.paper_perp import PaperPerps
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Bar,
    Fill,
    Instrument,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Portfolio,
    Quote,
    QuoteSource,
    Side,
    Timeframe,
)
from trader.domain.perp import MarginMode
from trader.domain.perp.default_brackets import default_brackets

SYMBOL = "SOL/USDT"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
RULES = Instrument(SYMBOL, Decimal("0.01"), Decimal("0.001"))
# No fees and no slippage: the fill is at the touch, the margin sums stay round.
SETTINGS = BrokerSettings(taker_fee_bps=0, maker_fee_bps=0, slippage_bps=0)


def broker(cash: str, leverage: int, held: str = "0") -> PaperBroker:
    perps = PaperPerps(
        [SYMBOL], {SYMBOL: default_brackets(SYMBOL)}, leverage=leverage,
        margin_mode=MarginMode.CROSS, currency="USDT",
    )  # fmt: skip
    portfolio = Portfolio("USDT", Decimal(cash))
    if Decimal(held):
        side = Side.BUY if Decimal(held) > 0 else Side.SELL
        portfolio = portfolio.apply(
            Fill(
                "f-1",
                "o-1",
                SYMBOL,
                side,
                Decimal(100),
                abs(Decimal(held)),
                Decimal(0),
                "USDT",
                Liquidity.TAKER,
                T0,
            )
        )
    perps.see(portfolio, {SYMBOL: Decimal(100)})
    return PaperBroker(SETTINGS, {SYMBOL: RULES}, perps=perps)


def quote(price: str = "100") -> Quote:
    return Quote(SYMBOL, Decimal(price), Decimal(price), T0, QuoteSource.MODELLED)


def order(side: Side, amount: str, leg: str, limit: str | None = None) -> Order:
    return Order.create(
        strategy="t", symbol=SYMBOL, side=side,
        type=OrderType.LIMIT if limit else OrderType.MARKET, amount=Decimal(amount),
        limit_price=Decimal(limit) if limit else None, tick_time=T0, leg=leg,
    )  # fmt: skip


async def test_an_order_needing_more_margin_than_is_available_is_refused():
    # 1,000 USDT at 2x: 25 SOL at 100 is 2,500 notional, 1,250 initial margin > 1,000.
    paper = broker("1000", leverage=2)
    refused = await paper.submit(order(Side.BUY, "25", "a"), quote(), T0)
    assert refused.order.status is OrderStatus.REJECTED
    assert refused.fills == ()
    assert refused.reason is not None
    assert refused.reason.startswith("-2019 Margin is insufficient")
    assert (
        "1250.00000000 (initial margin and open loss) at 2x, 1000.00000000 available"
        in refused.reason
    )
    # 15 SOL: 750 of margin, within the 1,000: filled.
    taken = await paper.submit(order(Side.BUY, "15", "b"), quote(), T0)
    assert taken.order.status is OrderStatus.FILLED
    # Now 250 is available (1,000 - 750 initial margin, no P&L at the entry): 6 SOL needs 300.
    again = await paper.submit(order(Side.BUY, "6", "c"), quote(), T0)
    assert again.order.status is OrderStatus.REJECTED
    assert "250.00000000 available" in (again.reason or "")


async def test_a_resting_order_holds_its_margin():
    paper = broker("1000", leverage=2)
    resting = await paper.submit(order(Side.BUY, "16", "a", limit="90"), quote(), T0)
    assert resting.order.status is OrderStatus.OPEN  # 16 x 90 / 2 = 720 held
    refused = await paper.submit(order(Side.BUY, "6", "b"), quote(), T0)  # 300 > 280
    assert refused.order.status is OrderStatus.REJECTED


async def test_reducing_needs_no_margin_and_is_reduce_only():
    # Long 30 SOL bought at 100 with 1,000 USDT at 10x: cash is -2,000, 3,000 notional; at
    # the mark of 100 the available balance is 1,000 - 300 = 700.
    paper = broker("1000", leverage=10, held="30")
    assert paper.perps is not None
    reduce = await paper.submit(order(Side.SELL, "30", "a"), quote(), T0)
    assert reduce.order.status is OrderStatus.FILLED  # no margin asked of a reduction
    assert reduce.order.client_order_id in paper.perps.reduce_only
    assert paper.perps.held(SYMBOL) == 0
    # Flat now: a sell opens a short, so it is no longer reduce-only and needs its margin.
    short = await paper.submit(order(Side.SELL, "5", "b"), quote(), T0)
    assert short.order.status is OrderStatus.FILLED
    assert short.order.client_order_id not in paper.perps.reduce_only


async def test_a_reversal_needs_the_margin_of_the_part_past_the_position():
    paper = broker("1000", leverage=10, held="30")
    # The long's close frees its 300 of margin first (Binance one-way mode: a reversal is a
    # close, then an open): 1,000 available at the mark of 100. Selling 131 closes 30 and
    # opens a 101 short: 1,010 > 1,000, refused. Selling 130 opens 100: 1,000, taken.
    refused = await paper.submit(order(Side.SELL, "131", "a"), quote(), T0)
    assert refused.order.status is OrderStatus.REJECTED
    assert "1010.00000000 (initial margin and open loss) at 10x, 1000.00000000 available" in (
        refused.reason or ""
    )
    taken = await paper.submit(order(Side.SELL, "130", "b"), quote(), T0)
    assert taken.order.status is OrderStatus.FILLED
    assert paper.perps is not None
    assert paper.perps.held(SYMBOL) == -100


async def test_a_resting_reduce_only_order_fills_no_more_than_is_held():
    paper = broker("1000", leverage=10, held="30")
    perps = paper.perps
    assert perps is not None
    resting = await paper.submit(order(Side.SELL, "30", "a", limit="110"), quote(), T0)
    assert resting.order.status is OrderStatus.OPEN
    assert resting.order.client_order_id in perps.reduce_only
    cut = await paper.submit(order(Side.SELL, "20", "b"), quote(), T0)  # 10 left
    assert cut.order.status is OrderStatus.FILLED
    start = T0 + timedelta(hours=1)
    bar = Bar(SYMBOL, Timeframe("1h"), start, 100.0, 120.0, 99.0, 115.0, 1e6)
    (filled,) = await paper.on_market([bar], {}, start + timedelta(hours=1))
    assert [f.amount for f in filled.fills] == [Decimal(10)]  # not the 30 it asked for
    assert perps.held(SYMBOL) == 0
    # What is left of it can only open a short: the next bar through it cancels it.
    later = Bar(
        SYMBOL, Timeframe("1h"), start + timedelta(hours=1), 111.0, 121.0, 110.5, 118.0, 1e6
    )
    (ended,) = await paper.on_market([later], {}, start + timedelta(hours=2))
    assert ended.order.status is OrderStatus.CANCELED
    assert ended.reason == "-2022 ReduceOnly Order is rejected"
    assert paper.open_orders() == []


async def test_spot_is_untouched():
    spot = PaperBroker(SETTINGS, {SYMBOL: RULES})
    done = await spot.submit(order(Side.BUY, "1000", "a"), quote(), T0)
    assert done.order.status is OrderStatus.FILLED  # no margin on spot: cash is the ledger's


async def test_an_order_worse_than_the_mark_also_costs_its_open_loss():
    # Binance's FAQ: cost = initial margin + open loss. Buying 10 at 101 with the mark at 100:
    # 1,010 / 2 = 505 of margin and 10 x (101 - 100) = 10 of open loss: 515.
    short_of_it = broker("514", leverage=2)
    refused = await short_of_it.submit(order(Side.BUY, "10", "a"), quote("101"), T0)
    assert refused.order.status is OrderStatus.REJECTED
    assert "515.00000000 (initial margin and open loss)" in (refused.reason or "")
    enough = broker("515", leverage=2)
    taken = await enough.submit(order(Side.BUY, "10", "a"), quote("101"), T0)
    assert taken.order.status is OrderStatus.FILLED


async def test_a_restart_judges_the_resting_orders_reduce_only_again():
    paper = broker("1000", leverage=10, held="30")
    perps = paper.perps
    assert perps is not None
    sell = await paper.submit(order(Side.SELL, "20", "a", limit="110"), quote(), T0)
    buy = await paper.submit(order(Side.BUY, "1", "b", limit="90"), quote(), T0)
    # What a restart has: the ledger's portfolio and open orders, no flags.
    perps.reduce_only = set()
    perps.restored(perps.portfolio, [sell.order, buy.order])
    assert perps.reduce_only == {sell.order.client_order_id}
