"""One contract, three brokers: every test runs against the paper broker, the live broker on
the real ccxt client against the emulator's signed Binance endpoints, and the live broker on
Alpaca's official SDK against the Alpaca emulator, on the same recorded price path. Prices
may differ (each venue has its own fill model); what an order goes through, and what the
ledger is told, may not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

import pytest

from tests.integration import alpaca_setup
from tests.integration.emulated import venue
from tests.integration.live_setup import KEY, Prices, live
from trader.broker import PaperBroker
from trader.broker.protocol import Broker
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Fill,
    Instrument,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Portfolio,
    QuoteSource,
    Side,
)
from trader.domain.execution import Execution
from trader.domain.reconciliation import LedgerBook

pytestmark = pytest.mark.integration
SHARE = Decimal("0.0001")  # of a bar's volume per fill: ~3.5 SOL an hour on this path
CASH = Decimal(10_000)


@dataclass
class Harness:
    kind: str  # paper, or the live venue: binance, alpaca
    broker: Broker
    prices: Prices
    instruments: dict[str, Instrument]
    baseline: dict[str, Decimal] | None
    orders: dict[str, Order] = field(default_factory=dict)  # what the ledger would hold
    fills: list[Fill] = field(default_factory=list)
    legs: int = 0

    def order(
        self, side: Side, amount: str, limit: Decimal | None = None, *, expires_in=None
    ) -> Order:
        self.legs += 1
        now = self.prices.now
        return Order.create(
            strategy="contract", symbol="SOL/USDT", side=side,
            type=OrderType.LIMIT if limit is not None else OrderType.MARKET,
            amount=Decimal(amount), limit_price=limit, tick_time=now, leg=f"leg{self.legs}",
            expires_at=now + expires_in if expires_in is not None else None,
        )  # fmt: skip

    def book(self, executions: Sequence[Execution | None]) -> list[Execution]:
        done = [e for e in executions if e is not None]
        for e in done:
            self.orders[e.order.client_order_id] = e.order
            self.fills += e.fills
        return done

    async def submit(self, order: Order) -> Execution:
        self.orders[order.client_order_id] = order
        (done,) = self.book([await self.broker.submit(order, self.prices.quote(), self.prices.now)])
        return done

    async def advance(self, bars: int = 1) -> list[Execution]:
        closed = self.prices.advance(bars)
        return self.book(await self.broker.on_market(closed, {}, self.prices.now))

    def ledger(self) -> LedgerBook:
        portfolio = Portfolio.from_fills("USDT", CASH, self.fills)
        return LedgerBook(
            portfolio=portfolio,
            starting_cash=CASH,
            open_orders=[o for o in self.orders.values() if not o.status.is_terminal],
            known_orders=frozenset(self.orders),
            booked_fills=frozenset(f.fill_id for f in self.fills),
            baseline=self.baseline,
            recent_orders={o.exchange_order_id: o for o in self.orders.values()
                           if o.exchange_order_id},
        )  # fmt: skip


@asynccontextmanager
async def paper() -> AsyncIterator[Harness]:
    market = venue(start_index=600)
    from trader.emulator.market import Instrument as Listing  # noqa: PLC0415

    rules = Listing("SOL/USDT")
    instrument = Instrument(
        "SOL/USDT", rules.tick_size, rules.step_size, rules.min_qty, rules.min_notional
    )
    settings = BrokerSettings(max_volume_share=float(SHARE))
    broker = PaperBroker(settings, {"SOL/USDT": instrument})
    yield Harness("paper", broker, Prices(market), {"SOL/USDT": instrument}, None)


@asynccontextmanager
async def live_harness(kind: str = "binance") -> AsyncIterator[Harness]:
    setup_of, key = (
        (alpaca_setup.alpaca_live, alpaca_setup.KEY) if kind == "alpaca" else (live, KEY)
    )
    async with setup_of(cash=CASH, liquidity_share=SHARE) as setup:
        baseline = {"USDT": CASH, "SOL": Decimal(0), "BTC": Decimal(0)}
        yield Harness(kind, setup.broker, setup.prices, setup.instruments, baseline)
        account = setup.venue.accounts[key]
        per_id: dict[str, int] = {}
        for o in account.orders.values():
            per_id[o.client_order_id] = per_id.get(o.client_order_id, 0) + 1
        assert all(n == 1 for n in per_id.values()), "an order reached the venue twice"


@pytest.fixture(params=["paper", "binance", "alpaca"])
async def harness(request) -> AsyncIterator[Harness]:
    make = paper() if request.param == "paper" else live_harness(request.param)
    async with make as h:
        yield h


def total(fills: Sequence[Fill]) -> Decimal:
    return sum((f.amount for f in fills), Decimal(0))


async def test_a_market_order_fills_at_once_paying_a_fee_under_its_client_id(harness):
    quote = harness.prices.quote()
    order = harness.order(Side.BUY, "2")
    done = await harness.submit(order)
    assert done.order.status is OrderStatus.FILLED
    assert done.order.client_order_id == order.client_order_id
    assert total(done.fills) == Decimal(2) == done.order.filled_amount
    for fill in done.fills:
        assert fill.client_order_id == order.client_order_id
        assert fill.liquidity is Liquidity.TAKER
        assert fill.fee > 0
        assert quote.ask <= fill.price <= quote.ask * Decimal("1.01")
    assert len({f.fill_id for f in done.fills}) == len(done.fills)
    assert harness.broker.open_orders() == []


def just_below(harness: Harness) -> Decimal:
    """A buy limit under the bid that the next few bars of this falling path trade through."""
    return harness.prices.quote().bid - Decimal("0.02")


async def test_a_resting_limit_fills_in_parts_only_when_the_market_trades_through_it(harness):
    price = just_below(harness)
    order = harness.order(Side.BUY, "10", price)
    done = await harness.submit(order)
    assert done.order.status is OrderStatus.OPEN
    assert done.fills == ()
    assert [o.client_order_id for o in harness.broker.open_orders()] == [order.client_order_id]
    states, fills = [], []
    for _ in range(6):
        for execution in await harness.advance():
            states.append(execution.order.status)
            fills += execution.fills
    assert OrderStatus.PARTIALLY_FILLED in states  # ~3.5 an hour of 10
    assert states[-1] is OrderStatus.FILLED
    assert total(fills) == Decimal(10)
    assert all(f.liquidity is Liquidity.MAKER and f.price <= price for f in fills)
    assert all(f.at > order.created_at for f in fills)
    assert harness.broker.open_orders() == []


async def test_cancel_ends_a_resting_order_and_a_second_cancel_changes_nothing(harness):
    low = harness.prices.quote().bid * Decimal("0.5")
    order = harness.order(Side.BUY, "5", low.quantize(Decimal("0.01")))
    opened = await harness.submit(order)
    assert opened.order.status is OrderStatus.OPEN
    (cancelled,) = harness.book([await harness.broker.cancel(opened.order, harness.prices.now)])
    assert cancelled.order.status is OrderStatus.CANCELED
    assert cancelled.fills == ()
    assert harness.broker.open_orders() == []
    assert await harness.broker.cancel(cancelled.order, harness.prices.now) is None
    assert await harness.advance(3) == []


async def test_amend_is_cancel_and_replace_and_never_trades_more_than_meant(harness):
    bid = harness.prices.quote().bid
    old = (await harness.submit(harness.order(Side.BUY, "5", (bid * Decimal("0.5")).quantize(
        Decimal("0.01"))))).order  # fmt: skip
    new = harness.order(Side.BUY, "4", (bid * Decimal("0.6")).quantize(Decimal("0.01")))
    done = harness.book(
        await harness.broker.replace(old, new, harness.prices.quote(), harness.prices.now)
    )
    assert [(e.order.client_order_id, e.order.status) for e in done] == [
        (old.client_order_id, OrderStatus.CANCELED),
        (new.client_order_id, OrderStatus.OPEN),
    ]
    assert done[1].order.amount == Decimal(4)
    assert [o.client_order_id for o in harness.broker.open_orders()] == [new.client_order_id]


async def test_an_order_past_its_expiry_expires(harness):
    low = (harness.prices.quote().bid * Decimal("0.5")).quantize(Decimal("0.01"))
    order = harness.order(Side.BUY, "5", low, expires_in=timedelta(hours=2))
    await harness.submit(order)
    assert await harness.advance(1) == []
    (expired,) = await harness.advance(2)
    assert expired.order.client_order_id == order.client_order_id
    assert expired.order.status is OrderStatus.EXPIRED
    assert harness.broker.open_orders() == []


async def test_a_synthetic_quote_is_no_price_and_the_order_is_rejected(harness):
    order = harness.order(Side.BUY, "2")
    real = harness.prices.quote()
    synthetic = real.synthetic("SOL/USDT", real.bid, real.at)
    assert synthetic.source is QuoteSource.SYNTHETIC
    done = await harness.broker.submit(order, synthetic, harness.prices.now)
    assert done.order.status is OrderStatus.REJECTED
    assert done.fills == ()


async def test_after_a_restore_resting_orders_carry_on_where_they_were(harness):
    price = just_below(harness)
    order = (await harness.submit(harness.order(Side.BUY, "10", price))).order
    first = await harness.advance(2)  # the first bar wholly after the order: a part fills
    assert [e.order.status for e in first] == [OrderStatus.PARTIALLY_FILLED]
    ledger = harness.ledger()
    counts: dict[str, int] = {}
    for fill in harness.fills:
        counts[fill.client_order_id] = counts.get(fill.client_order_id, 0) + 1
    harness.broker.restore(list(ledger.open_orders), counts)
    assert [o.client_order_id for o in harness.broker.open_orders()] == [order.client_order_id]
    for _ in range(6):
        await harness.advance()
    mine = [f for f in harness.fills if f.client_order_id == order.client_order_id]
    assert total(mine) == Decimal(10)
    assert len({f.fill_id for f in mine}) == len(mine)
    assert harness.orders[order.client_order_id].status is OrderStatus.FILLED


async def test_reconciling_a_ledger_that_booked_everything_is_ok_and_changes_nothing(harness):
    await harness.submit(harness.order(Side.BUY, "3"))
    price = just_below(harness)
    await harness.submit(harness.order(Side.BUY, "10", price))
    await harness.advance(1)
    report = await harness.broker.reconcile(harness.ledger(), harness.prices.now)
    assert report.ok, report.text
    assert report.executions == ()
    assert report.broker == harness.kind
    if harness.kind != "paper":
        assert {b.asset for b in report.balances} == {"USDT", "SOL", "BTC"}
        assert all(b.ok for b in report.balances)
