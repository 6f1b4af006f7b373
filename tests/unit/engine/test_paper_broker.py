"""The paper fill model: a sceptic's rules, one test each."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.engine.builders import T0, TF, quote
from trader.broker import PaperBroker
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Bar,
    Instrument,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Portfolio,
    QuoteSource,
    Side,
)

SOL = Instrument("SOL/USDT", Decimal("0.01"), Decimal("0.001"))
SETTINGS = BrokerSettings(
    maker_fee_bps=Decimal(2),
    taker_fee_bps=Decimal(10),
    slippage_bps=Decimal(5),
    max_volume_share=0.5,
)
AT = T0 + timedelta(seconds=5)


def broker(**overrides) -> PaperBroker:
    return PaperBroker(SETTINGS.model_copy(update=overrides), {"SOL/USDT": SOL})


def order(
    side: Side, amount: str, limit: str | None = None, *, at=AT, leg="x", expires=None
) -> Order:
    return Order.create(
        strategy="t", symbol="SOL/USDT", side=side,
        type=OrderType.LIMIT if limit else OrderType.MARKET, amount=Decimal(amount),
        limit_price=Decimal(limit) if limit else None, tick_time=at, leg=leg, expires_at=expires,
    )  # fmt: skip


def bar(o: float, h: float, lo: float, c: float, *, start=AT, volume: float = 1000.0) -> Bar:
    return Bar("SOL/USDT", TF, start, o, h, lo, c, volume)


async def test_market_orders_fill_at_the_real_touch_plus_slippage_and_pay_the_taker_fee():
    paper = broker()
    buy = await paper.submit(order(Side.BUY, "2"), quote("99.90", "100.10"), AT)
    (fill,) = buy.fills
    assert buy.order.status is OrderStatus.FILLED
    assert fill.price == Decimal("100.10") * Decimal("1.0005")  # ask + 5 bps
    assert fill.liquidity is Liquidity.TAKER
    assert fill.fee == Decimal("0.20030010")  # 10 bps of 200.3001, rounded up to 1e-8
    sell = await paper.submit(order(Side.SELL, "2", leg="y"), quote("99.90", "100.10"), AT)
    assert sell.fills[0].price == Decimal("99.90") * Decimal("0.9995")
    # A round trip at an unchanged quote loses the spread, the slippage and both fees.
    book = Portfolio.from_fills("USDT", Decimal(1000), [fill, sell.fills[0]])
    lost = Decimal(1000) - book.cash
    assert lost == (fill.price - sell.fills[0].price) * 2 + fill.fee + sell.fills[0].fee
    assert lost > Decimal("0.2") * 2 * 2  # more than the spread alone


async def test_a_synthetic_quote_is_no_price_to_trade_at():
    result = await broker().submit(
        order(Side.BUY, "1"), quote("100", source=QuoteSource.SYNTHETIC), AT
    )
    assert result.order.status is OrderStatus.REJECTED
    assert result.fills == ()


async def test_a_resting_buy_fills_only_when_a_bar_trades_through_it():
    paper = broker()
    resting = await paper.submit(order(Side.BUY, "1", "99.00"), quote(), AT)
    assert resting.order.status is OrderStatus.OPEN
    touched = await paper.on_market([bar(100, 101, 99.0, 100.5)], {}, AT)  # low == limit
    assert touched == []
    (filled,) = await paper.on_market([bar(100, 101, 98.5, 100.5, start=AT + TF.duration)], {}, AT)
    assert filled.order.status is OrderStatus.FILLED
    assert filled.fills[0].price == Decimal("99.00")
    assert filled.fills[0].liquidity is Liquidity.MAKER
    assert filled.fills[0].fee == Decimal("0.01980000")
    assert paper.open_orders() == []


async def test_a_bar_that_opens_through_the_limit_fills_at_the_open():
    paper = broker()
    await paper.submit(order(Side.SELL, "1", "101.00"), quote(), AT)
    (filled,) = await paper.on_market([bar(102.5, 103, 101.5, 102)], {}, AT)
    assert filled.fills[0].price == Decimal("102.5")


async def test_bars_that_opened_before_the_order_was_placed_do_not_fill_it():
    paper = broker()
    await paper.submit(order(Side.BUY, "1", "99.00"), quote(), AT)
    earlier = bar(100, 101, 90, 95, start=AT - TF.duration)
    assert await paper.on_market([earlier], {}, AT) == []


async def test_a_fill_takes_at_most_its_share_of_the_bars_volume():
    paper = broker()
    await paper.submit(order(Side.BUY, "8", "99.00"), quote(), AT)
    (first,) = await paper.on_market([bar(100, 101, 98, 99.5, volume=10)], {}, AT)
    assert first.fills[0].amount == Decimal(5)  # half of 10
    assert first.order.status is OrderStatus.PARTIALLY_FILLED
    (second,) = await paper.on_market(
        [bar(100, 101, 98, 99.5, start=AT + TF.duration, volume=10)], {}, AT
    )
    assert second.fills[0].amount == Decimal(3)
    assert second.order.status is OrderStatus.FILLED
    assert [f.fill_id for f in first.fills + second.fills] == [
        f"{first.order.client_order_id}-1",
        f"{first.order.client_order_id}-2",
    ]


async def test_one_bar_never_fills_both_sides_the_one_nearer_the_open_fills():
    paper = broker()
    await paper.submit(order(Side.BUY, "1", "98.00", leg="b"), quote(), AT)
    await paper.submit(order(Side.SELL, "1", "103.00", leg="s"), quote(), AT)
    wide = bar(102.5, 104, 97, 100)  # reaches both; the sell limit is nearer the open
    (only,) = await paper.on_market([wide], {}, AT)
    assert only.order.side is Side.SELL
    (later,) = await paper.on_market([bar(100, 101, 97, 100, start=AT + TF.duration)], {}, AT)
    assert later.order.side is Side.BUY


async def test_real_quotes_fill_resting_orders_that_the_market_trades_through():
    paper = broker()
    await paper.submit(order(Side.BUY, "1", "99.00"), quote(), AT)
    modelled = quote("98.50", "98.60", source=QuoteSource.MODELLED)
    assert await paper.on_market([], {"SOL/USDT": modelled}, AT) == []  # not a real price
    later = replace(quote("98.50", "98.60"), at=AT + timedelta(seconds=1))
    (filled,) = await paper.on_market([], {"SOL/USDT": later}, AT)
    assert filled.fills[0].price == Decimal("99.00")


async def test_a_marketable_limit_fills_at_the_touch_never_past_its_limit():
    paper = broker()
    result = await paper.submit(order(Side.BUY, "1", "100.02"), quote("99.99", "100.01"), AT)
    assert result.fills[0].price == Decimal("100.02")  # ask + slippage would be 100.060005
    assert result.fills[0].liquidity is Liquidity.TAKER


async def test_orders_expire_and_can_be_cancelled():
    paper = broker()
    expiring = await paper.submit(order(Side.BUY, "1", "90", expires=AT + TF.duration), quote(), AT)
    other = await paper.submit(order(Side.BUY, "1", "91", leg="y"), quote(), AT)
    assert await paper.on_market([], {}, AT) == []
    (expired,) = await paper.on_market([], {}, AT + TF.duration)
    assert expired.order.client_order_id == expiring.order.client_order_id
    assert expired.order.status is OrderStatus.EXPIRED
    cancelled = await paper.cancel(other.order, AT)
    assert cancelled.order.status is OrderStatus.CANCELED
    assert paper.open_orders() == []


async def test_a_bar_that_opened_after_an_order_expired_never_fills_it():
    # A Friday order valid for one bar; the next bar it sees opens on Monday, far through its
    # limit. Expiry comes first: nothing fills, the order is expired.
    paper = broker()
    expires = AT + TF.duration
    resting = await paper.submit(order(Side.BUY, "1", "90", expires=expires), quote(), AT)
    monday = bar(85.0, 86.0, 80.0, 85.0, start=AT + timedelta(days=3))
    (executed,) = await paper.on_market([monday], {}, monday.end)
    assert executed.fills == ()
    assert executed.order.client_order_id == resting.order.client_order_id
    assert executed.order.status is OrderStatus.EXPIRED
    # A bar that opened before the expiry still fills it, even when booked late.
    again = await paper.submit(order(Side.BUY, "1", "90", leg="y", expires=expires), quote(), AT)
    inside = bar(92.0, 93.0, 89.0, 90.5, start=AT)
    (filled,) = await paper.on_market([inside], {}, AT + timedelta(days=3))
    assert filled.order.client_order_id == again.order.client_order_id
    assert filled.order.status is OrderStatus.FILLED


async def test_restore_replaces_all_state_with_the_ledgers():
    paper = broker()
    resting = await paper.submit(order(Side.BUY, "1", "90"), quote(), AT)
    paper.restore([], {})
    assert paper.open_orders() == []
    paper.restore([resting.order], {resting.order.client_order_id: 3})
    (filled,) = await paper.on_market([bar(95, 96, 89, 95)], {}, AT)
    assert filled.fills[0].fill_id.endswith("-4")


@given(
    st.decimals(Decimal(90), Decimal(110), places=2),
    st.floats(90, 110),
    st.floats(0, 5),
    st.sampled_from(list(Side)),
)
async def test_no_fill_unless_the_market_trades_through_the_limit(limit, low_or_high, reach, side):
    paper = broker()
    await paper.submit(
        order(side, "1", str(limit)),
        quote("120", "120.01") if side is Side.BUY else quote("80", "80.01"),
        AT,
    )
    if side is Side.BUY:
        b = bar(low_or_high + reach, low_or_high + reach + 1, low_or_high, low_or_high + reach)
        through = Decimal(repr(b.low)) < limit
    else:
        b = bar(low_or_high - reach, low_or_high, low_or_high - reach - 1, low_or_high - reach)
        through = Decimal(repr(b.high)) > limit
    executions = await paper.on_market([b], {}, AT)
    assert bool(executions) == through
    for execution in executions:
        price = execution.fills[0].price
        assert price <= limit if side is Side.BUY else price >= limit
