"""The engine's perp stage on a cross account, worked by hand.

Cross margin (Binance USDⓈ-M, FAQ "How to Calculate Liquidation Price of USDⓈ-M Futures
Contracts", https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93): the
whole wallet backs the position; liquidation when margin balance = wallet + size x (mark -
entry) reaches maintenance margin = |size| x mark x MMR - cum (first bracket of the default
table: MMR 0.4 %, cum 0). The bankruptcy price is where the margin balance is 0.

The account: 1,000 USDT, long 30 SOL bought at 100 (3,000 notional, 3x). Liquidation price:
1,000 + 30 (P - 100) = 30 x P x 0.004  =>  P = 2,000 / 29.88 = 66.9344...; bankruptcy price:
1,000 + 30 (P - 100) = 0  =>  P = 66.666...
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from trader.broker import PaperBroker
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Fill,
    Instrument,
    Liquidity,
    Order,
    OrderType,
    Portfolio,
    Quote,
    QuoteSource,
    Side,
)
from trader.domain.perp import MarginMode
from trader.domain.perp.default_brackets import default_brackets
from trader.engine.account import Account
from trader.engine.perps import PerpBook, PerpTerms
from trader.engine.report import TickReport
from trader.ledger.trading import LedgerState
from trader.logging import get_logger
from trader.market.files.funding import FundingRate, MarkCandle, MarkPrices
from trader.market.replay_perp import PerpTape

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
SOL, ETH = "SOL/USDT", "ETH/USDT"


def account(broker: PaperBroker) -> Account:
    fill = Fill("f-1", "o-1", SOL, Side.BUY, Decimal(100), Decimal(30), Decimal(0), "USDT",
                Liquidity.TAKER, T0)  # fmt: skip
    portfolio = Portfolio("USDT", Decimal(1000)).apply(fill)
    state = LedgerState(portfolio, Decimal(1000), [], {}, {}, None, None, T0 + HOUR, {})
    return Account(state, broker, get_logger("test"))


def tape(mark_low: str, rates: tuple[FundingRate, ...] = ()) -> PerpTape:
    candle = MarkCandle(int((T0 + HOUR).timestamp() * 1000), Decimal(100), Decimal(101),
                        Decimal(mark_low), Decimal(99))  # fmt: skip
    return PerpTape(SOL, rates, MarkPrices((candle,), 3_600_000))


def book(mark_low: str, broker: PaperBroker, rates: tuple[FundingRate, ...] = ()) -> PerpBook:
    terms = PerpTerms(3, MarginMode.CROSS, {s: default_brackets(s) for s in (SOL, ETH)},
                      Decimal(50))  # fmt: skip
    return PerpBook({SOL: tape(mark_low, rates)}, terms, broker, get_logger("test"))


def paper() -> PaperBroker:
    rules = {s: Instrument(s, Decimal("0.01"), Decimal("0.001")) for s in (SOL, ETH)}
    return PaperBroker(BrokerSettings(), rules)


async def test_a_mark_above_the_cross_liquidation_price_leaves_the_position():
    broker = paper()
    books = account(broker)
    at = T0 + 2 * HOUR
    await book("67", broker).run(at, books, TickReport(at), {SOL: Decimal(99), ETH: Decimal(10)})
    assert books.portfolio.amount(SOL) == 30
    assert books.perp.liquidations == []
    assert books.perp_marks == {SOL: Decimal(99)}  # the mark candle's close, not the bar's


async def test_a_mark_through_the_bankruptcy_price_closes_there_and_cancels_every_order():
    """The mark's low of 66 gapped through the bankruptcy price 66.666...: closed there (our
    model, `trader.domain.perp.liquidation_fill`; Binance "Liquidation Protocol": "closed at the
    bankruptcy price", the insurance fund takes the loss beyond), rounded to 1e-8 in the
    account's favour; the fee only out of what the margin has left, the 1e-7 the rounding left."""
    broker = paper()
    books = account(broker)
    quote = Quote(ETH, Decimal(10), Decimal("10.01"), T0 + HOUR, QuoteSource.MODELLED)
    resting = Order.create(
        strategy="s", symbol=ETH, side=Side.BUY, type=OrderType.LIMIT, amount=Decimal(1),
        limit_price=Decimal(9), tick_time=T0 + HOUR, leg="a",
    )  # fmt: skip
    await broker.submit(resting, quote, T0 + HOUR)
    at = T0 + 2 * HOUR
    report = TickReport(at)
    await book("66", broker).run(at, books, report, {SOL: Decimal(99), ETH: Decimal(10)})
    assert books.portfolio.amount(SOL) == 0
    (row,) = books.perp.liquidations
    price = Decimal("66.66666667")  # 66.666... rounded up: a sell, in the account's favour
    fee = Decimal("0.0000001")  # 30 x 66.66666667 - 2,000: all the margin left; not 10.00
    assert row.close_price == price  # the fill's price, not the unrounded 66.666...
    assert (row.position, row.trigger_mark, row.fee) == (Decimal(30), Decimal(66), fee)
    assert row.liquidation_price.quantize(Decimal("1e-10")) == (
        Decimal(2000) / Decimal("29.88")
    ).quantize(Decimal("1e-10"))
    closed = report.fills[-1]
    assert (closed.side, closed.amount, closed.price, closed.fee) == (Side.SELL, 30, price, fee)
    # Cash: 1,000 - 3,000 + 30 x 66.66666667 - 0.0000001 = 0: the margin is gone, never below.
    assert books.portfolio.cash == 0
    assert broker.open_orders() == []  # cross: every symbol's orders cancelled


async def test_a_mark_between_the_two_prices_closes_at_the_mark_and_the_fee_takes_what_is_left():
    """A low of 66.8 (liquidation price 66.93, bankruptcy 66.67): closed at that mark, where the
    margin balance is 1,000 + 30 x (66.8 - 100) = 4; the fee, 0.5 % x 30 x 66.8 = 10.02, is
    capped at those 4 (Binance Insurance Fund FAQ, binance.com/en/support/faq/360033525371:
    the fund collects up to 0.5 % from liquidations that do not end in bankruptcy)."""
    broker = paper()
    books = account(broker)
    at = T0 + 2 * HOUR
    report = TickReport(at)
    await book("66.8", broker).run(at, books, report, {SOL: Decimal(99), ETH: Decimal(10)})
    closed = report.fills[-1]
    assert (closed.side, closed.amount, closed.price, closed.fee) == (
        Side.SELL, 30, Decimal("66.8"), Decimal(4),
    )  # fmt: skip
    assert books.portfolio.cash == 0


@pytest.mark.parametrize(("rate", "paid"), [("0.0001", "0.2970"), ("-0.0003", "-0.8910")])
async def test_funding_due_since_the_last_tick_is_paid_on_the_mark(rate, paid):
    broker = paper()
    books = account(broker)
    at = T0 + 2 * HOUR
    # A funding time a few milliseconds past the tick belongs to it; without a recorded mark
    # it is paid on the last mark candle's close (99): 99 x 30 x rate.
    due = FundingRate(int(at.timestamp() * 1000) + 4, Decimal(rate))
    later = FundingRate(int((at + HOUR).timestamp() * 1000), Decimal("0.01"))
    await book("90", broker, (due, later)).run(at, books, TickReport(at), {SOL: Decimal(98)})
    (row,) = books.perp.funding
    assert (row.rate, row.mark, row.position, row.paid) == (
        Decimal(rate),
        Decimal(99),
        Decimal(30),
        Decimal(paid),
    )
    assert books.portfolio.cash == Decimal(-2000) - Decimal(paid)


async def test_an_isolated_position_pays_funding_out_of_its_own_margin():
    """Isolated, 10x: long 30 at 100 holds 300 of margin. A funding of 1 % at the mark of 100
    takes 30 of it (Binance takes an isolated position's funding from its margin), so a mark
    of 91 finds 270 + 30 x (91 - 100) = 0, below the maintenance margin of 30 x 91 x 0.4 %:
    liquidated at that mark, which is the bankruptcy price 100 - 270 / 30 = 91: nothing is left
    for the fee, and the rest of the account keeps its 700. Without the funding counted the
    margin would be 30 and the position would live."""
    broker = paper()
    books = account(broker)
    first, second = T0 + 2 * HOUR, T0 + 3 * HOUR
    candles = (
        MarkCandle(int((T0 + HOUR).timestamp() * 1000), Decimal(100), Decimal(100), Decimal(95),
                   Decimal(100)),
        MarkCandle(int(first.timestamp() * 1000), Decimal(100), Decimal(100), Decimal(91),
                   Decimal(92)),
    )  # fmt: skip
    rate = FundingRate(int(first.timestamp() * 1000), Decimal("0.01"))
    terms = PerpTerms(10, MarginMode.ISOLATED, {SOL: default_brackets(SOL)}, Decimal(50))
    tape = PerpTape(SOL, (rate,), MarkPrices(candles, 3_600_000))
    perps = PerpBook({SOL: tape}, terms, broker, get_logger("test"))
    await perps.run(first, books, TickReport(first), {SOL: Decimal(100)})
    (paid,) = books.perp.funding
    assert paid.paid == Decimal(30)
    assert books.perp.liquidations == []
    books.last_tick = first  # the tick was booked
    books.begin_tick()
    report = TickReport(second)
    await perps.run(second, books, report, {SOL: Decimal(92)})
    (row,) = books.perp.liquidations
    assert row.close_price == Decimal(91)
    assert (report.fills[-1].price, report.fills[-1].fee) == (Decimal(91), Decimal(0))
    assert books.portfolio.amount(SOL) == 0
    assert books.portfolio.cash == Decimal(1000) - 300  # the isolated margin, funding included
