"""The broker contract (`test_broker_contract.py`) for the perp live broker on the futures
emulator: the same behaviours, on ETH/USDT:USDT at 100 with a dip the resting orders trade
through. The spot suite is written on SOL/USDT's recorded path and the spot emulator's
accounts, so this is a variant of it rather than another parameter.

Sources: as `test_broker_contract.py`; the futures routes ccxt's binanceusdm calls (ccxt
4.5.90 binance.py: create_order -> POST /fapi/v1/order, cancel_order -> DELETE, fetch_order ->
GET /fapi/v1/order with origClientOrderId, fetch_open_orders -> /fapi/v1/openOrders,
fetch_my_trades -> /fapi/v1/userTrades).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from tests.integration.futures_setup import PerpSpec, spec, with_bar
from tests.integration.perp_live_setup import perp_live
from trader.domain import Fill, Liquidity, OrderStatus, Side

pytestmark = pytest.mark.integration


def dipping() -> PerpSpec:
    """ETH flat at 100, dipping to 98 in the bars from 12:00 to 15:00 (last price only)."""
    eth = spec("ETH")
    for hour in (12, 13, 14):
        eth.last = with_bar(eth.last, hour, 98.0, 100.5, 100.0)
    return eth


async def test_a_market_order_fills_at_once_paying_a_fee_under_its_client_id() -> None:
    async with perp_live(dipping()) as live:
        quote = live.quote()
        order = live.order(Side.BUY, "2")
        done = await live.submit(order)
        assert done.order.status is OrderStatus.FILLED
        assert done.order.client_order_id == order.client_order_id
        assert sum(f.amount for f in done.fills) == Decimal(2) == done.order.filled_amount
        for fill in done.fills:
            assert fill.client_order_id == order.client_order_id
            assert fill.liquidity is Liquidity.TAKER
            assert fill.fee > 0
            assert fill.fee_currency == "USDT"
            assert quote.ask <= fill.price <= quote.ask * Decimal("1.01")
        assert live.broker.open_orders() == []
        assert live.sent_once()


async def test_a_resting_limit_fills_in_parts_only_when_the_market_trades_through_it() -> None:
    async with perp_live(dipping()) as live:
        live.p.venue.liquidity_share = Decimal("0.004")  # 4 ETH of a bar's 1,000
        order = live.order(Side.BUY, "10", Decimal(99))
        done = await live.submit(order)
        assert done.order.status is OrderStatus.OPEN
        assert done.fills == ()
        assert await live.advance(1) == []  # 11:00-12:00 does not reach 99
        states: list[OrderStatus] = []
        fills: list[Fill] = []
        for _ in range(4):
            for execution in await live.advance(1):
                states.append(execution.order.status)
                fills += execution.fills
        assert OrderStatus.PARTIALLY_FILLED in states
        assert states[-1] is OrderStatus.FILLED
        assert sum(f.amount for f in fills) == Decimal(10)
        assert all(f.liquidity is Liquidity.MAKER and f.price <= 99 for f in fills)
        assert live.broker.open_orders() == []
        assert live.position() == Decimal(10)


async def test_cancel_ends_a_resting_order_and_a_second_cancel_changes_nothing() -> None:
    async with perp_live(dipping()) as live:
        opened = await live.submit(live.order(Side.BUY, "1", Decimal(50)))
        assert opened.order.status is OrderStatus.OPEN
        (cancelled,) = live.book([await live.broker.cancel(opened.order, live.now)])
        assert cancelled.order.status is OrderStatus.CANCELED
        assert cancelled.fills == ()
        assert live.broker.open_orders() == []
        assert await live.broker.cancel(cancelled.order, live.now) is None
        assert await live.advance(4) == []


async def test_amend_is_cancel_and_replace_and_never_trades_more_than_meant() -> None:
    async with perp_live(dipping()) as live:
        old = (await live.submit(live.order(Side.BUY, "1", Decimal(50)))).order
        new = live.order(Side.BUY, "0.5", Decimal(60))
        done = live.book(await live.broker.replace(old, new, live.quote(), live.now))
        assert [(e.order.client_order_id, e.order.status) for e in done] == [
            (old.client_order_id, OrderStatus.CANCELED),
            (new.client_order_id, OrderStatus.OPEN),
        ]
        assert [o.client_order_id for o in live.broker.open_orders()] == [new.client_order_id]


async def test_a_synthetic_quote_is_no_price_and_the_order_is_rejected() -> None:
    async with perp_live() as live:
        real = live.quote()
        synthetic = real.synthetic(real.symbol, real.bid, real.at)
        done = await live.broker.submit(live.order(Side.BUY, "1"), synthetic, live.now)
        assert done.order.status is OrderStatus.REJECTED
        assert done.fills == ()
        assert not live.p.account.orders


async def test_after_a_restore_resting_orders_carry_on_and_exits_stay_reduce_only() -> None:
    async with perp_live(dipping()) as live:
        live.p.venue.liquidity_share = Decimal("0.004")
        order = (await live.submit(live.order(Side.BUY, "10", Decimal(99)))).order
        await live.advance(3)  # the 12:00 bar filled a part
        assert live.orders[order.client_order_id].status is OrderStatus.PARTIALLY_FILLED
        ledger = live.ledger()
        live.broker.restore(list(ledger.open_orders), {})
        assert [o.client_order_id for o in live.broker.open_orders()] == [order.client_order_id]
        for _ in range(3):
            await live.advance(1)
        mine = [f for f in live.fills if f.client_order_id == order.client_order_id]
        assert sum(f.amount for f in mine) == Decimal(10)
        assert len({f.fill_id for f in mine}) == len(mine)
        assert live.orders[order.client_order_id].status is OrderStatus.FILLED
        exit_ = await live.submit(live.order(Side.SELL, "10"))
        assert exit_.order.status is OrderStatus.FILLED
        (sent,) = [o for o in live.p.account.orders.values()
                   if o.client_order_id == exit_.order.client_order_id]  # fmt: skip
        assert sent.reduce_only


async def test_reconciling_a_ledger_that_booked_everything_is_ok_and_changes_nothing() -> None:
    async with perp_live(dipping()) as live:
        await live.submit(live.order(Side.BUY, "3"))
        await live.submit(live.order(Side.BUY, "1", Decimal(99)))
        await live.advance(1)
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert report.ok, report.text
        assert report.executions == ()
        assert report.broker == "binanceusdm"
        assert [b.asset for b in report.balances] == ["USDT"]
        assert live.sent_once()


async def test_reconciliation_books_a_fill_the_ledger_missed() -> None:
    async with perp_live(dipping()) as live:
        await live.submit(live.order(Side.BUY, "2", Decimal(99)))
        # The daemon was away while the dip filled it: no poll.
        live.p.clock.advance_to(live.now + timedelta(hours=5))
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert report.ok, report.text
        (execution,) = report.executions
        assert execution.order.status is OrderStatus.FILLED
        assert sum(f.amount for f in execution.fills) == Decimal(2)
