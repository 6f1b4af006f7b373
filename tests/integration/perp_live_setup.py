"""The perp live broker (`trader.broker.live.perp`) on the real ccxt client (`binanceusdm`, or
`aster` through its /fapi/v3 routes), made by the daemon's own `create_exchange`, against
helper B's futures emulator (`tests/integration/futures_setup.perps`), with a ledger kept
the way the engine keeps it (the fills as a `Portfolio`, the venue's wallet as baseline)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from pydantic import SecretStr

from tests.integration.emulated import FAST_RETRY
from tests.integration.futures_setup import ETH, KEY, SECRET, START, Perps, PerpSpec, perps
from trader.broker.live.perp import PerpLiveBroker
from trader.broker.live.perp_funding import MemoryFunding
from trader.config.market_settings import ExchangeSettings
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Fill,
    Instrument,
    Order,
    OrderType,
    Portfolio,
    Quote,
    QuoteSource,
    Side,
)
from trader.domain.execution import Execution
from trader.domain.reconciliation import LedgerBook
from trader.emulator.faults import FaultPlan
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.retry import RetryPolicy

ASTER_KEY = "0x" + "33" * 32  # an Ethereum private key for the test account (Aster signs EIP-712)


@dataclass
class PerpLive:
    p: Perps
    broker: PerpLiveBroker
    feed: CcxtMarketData
    instruments: dict[str, Instrument]
    funding: MemoryFunding
    wallet: Decimal  # the baseline: the venue's wallet when the ledger opened
    orders: dict[str, Order] = field(default_factory=dict)  # what the ledger would hold
    fills: list[Fill] = field(default_factory=list)
    legs: int = 0

    @property
    def now(self) -> datetime:
        return self.p.clock.now()

    def quote(self, symbol: str = ETH) -> Quote:
        venue_id = self.p.exchange.market(symbol)["id"]
        book = self.p.venue.perps.market.top_of_book(venue_id)
        assert book is not None
        return Quote(symbol, book[0], book[1], self.now, QuoteSource.REAL)

    def order(
        self, side: Side, amount: str, limit: Decimal | None = None, symbol: str = ETH
    ) -> Order:
        self.legs += 1
        return Order.create(
            strategy="perp", symbol=symbol, side=side,
            type=OrderType.LIMIT if limit is not None else OrderType.MARKET,
            amount=Decimal(amount), limit_price=limit, tick_time=self.now, leg=f"leg{self.legs}",
        )  # fmt: skip

    def book(self, executions: Sequence[Execution | None]) -> list[Execution]:
        done = [e for e in executions if e is not None]
        for e in done:
            self.orders[e.order.client_order_id] = e.order
            self.fills += e.fills
        return done

    async def submit(self, order: Order) -> Execution:
        self.orders[order.client_order_id] = order
        (done,) = self.book([await self.broker.submit(order, self.quote(order.symbol), self.now)])
        return done

    async def advance(self, hours: float) -> list[Execution]:
        """The clock `hours` on from now, then a poll."""
        self.p.clock.advance_to(self.now + timedelta(hours=hours))
        return self.book(await self.broker.on_market([], {}, self.now))

    def position(self, symbol: str = ETH) -> Decimal:
        """The venue's own signed size (the emulator's account, not read through ccxt)."""
        venue_id = self.p.exchange.market(symbol)["id"]
        held = self.p.account.positions.get(venue_id)
        return held.size if held is not None else Decimal(0)

    def ledger(self) -> LedgerBook:
        return LedgerBook(
            portfolio=Portfolio.from_fills("USDT", self.wallet, self.fills),
            starting_cash=self.wallet,
            open_orders=[o for o in self.orders.values() if not o.status.is_terminal],
            known_orders=frozenset(self.orders),
            booked_fills=frozenset(f.fill_id for f in self.fills),
            baseline={"USDT": self.wallet},
            recent_orders={o.exchange_order_id: o for o in self.orders.values()
                           if o.exchange_order_id},
        )  # fmt: skip

    def sent_once(self) -> bool:
        """No client id reached the venue twice."""
        ids = [o.client_order_id for o in self.p.account.orders.values()]
        return len(ids) == len(set(ids))


async def fresh_broker(live: PerpLive, venue: str = "binanceusdm") -> PerpLiveBroker:
    """A new broker on a new ccxt client, as a restarted daemon makes it (not prepared)."""
    old = live.broker.exchange
    settings = ExchangeSettings(
        id=venue, api_key=SecretStr(KEY), api_secret=SecretStr(SECRET),
        timeout_s=old.timeout / 1000, api_base_url=live.p.base_url,
    )  # fmt: skip
    exchange = create_exchange(settings)
    exchange.enableRateLimit = False
    await exchange.load_markets()
    broker = PerpLiveBroker(
        exchange, live.broker.settings, live.instruments, max_leverage=live.broker.max_leverage,
        funding=live.funding, retry=live.broker.retry,
    )  # fmt: skip
    await old.close()
    live.broker = broker
    return broker


@asynccontextmanager
async def perp_live(
    *specs: PerpSpec,
    wallet: Decimal = Decimal(1000),
    venue: str = "binanceusdm",
    margin_mode: str = "isolated",
    max_leverage: float = 5,
    faults: FaultPlan | None = None,
    prepare: bool = True,
    timeout_s: float = 1.0,
    start_hour: float = 10,
    pause_s: float = 0.5,
) -> AsyncIterator[PerpLive]:
    """`pause_s`: the longest back-off, and how long new orders wait after the venue was down."""
    async with perps(*specs, wallet=wallet, faults=faults, start_hour=start_hour) as p:
        secret = SECRET
        if venue == "aster":
            secret = ASTER_KEY
        settings = ExchangeSettings(
            id=venue, api_key=SecretStr(KEY), api_secret=SecretStr(secret),
            timeout_s=timeout_s, api_base_url=p.base_url,
        )  # fmt: skip
        exchange = create_exchange(settings)
        exchange.enableRateLimit = False  # the emulator needs no pacing; tests need speed
        if venue == "aster":
            user = exchange.eth_get_address_from_private_key(ASTER_KEY).lower()
            p.api.private.aster_users[user] = KEY
        feed = CcxtMarketData(exchange, p.clock, retry=FAST_RETRY)
        made: PerpLive | None = None
        try:
            symbols = sorted(s.instrument.symbol + ":USDT" for s in specs) or [ETH]
            await feed.start(symbols)
            instruments = {s: feed.instrument(s) for s in symbols}
            broker_settings = BrokerSettings(recv_window_ms=1000, margin_mode=margin_mode)
            funding = MemoryFunding(START)
            retry = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=pause_s)
            broker = PerpLiveBroker(
                exchange, broker_settings, instruments, max_leverage=max_leverage,
                funding=funding, retry=retry,
            )  # fmt: skip
            made = PerpLive(p, broker, feed, instruments, funding, wallet)
            if prepare:
                await broker.prepare()
            yield made
        finally:
            await feed.close()  # the first client (the broker shares it) ...
            if made is not None and made.broker.exchange is not exchange:
                await made.broker.exchange.close()  # ... and a restarted broker's own
