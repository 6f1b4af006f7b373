"""The live broker's cost per order operation through the real ccxt client against the local
emulator (`trader sandbox`'s venue, on loopback), beside the paper broker's. Prints JSON.

Measured side by side in one run: a market order (sent, filled, its fills read); a resting
limit placed and cancelled; an order whose answer is lost after the venue took it (client
timeout 0.2 s), settled by looking it up; and a reconciliation with 0 and with N resting
orders. The emulator runs in the same process, so its own work is inside the figures: they
bound the broker's overhead from above, they are not a venue's latency.

    .venv/bin/python bench/broker.py [--data FILE] [--orders N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from harness import SHARED_DATA

from trader.broker.live.broker import LiveBroker
from trader.broker.paper import PaperBroker
from trader.config.daemon_settings import LogSettings
from trader.config.market_settings import ExchangeSettings
from trader.config.trading_settings import BrokerSettings
from trader.domain import Order, OrderType, Portfolio, Quote, QuoteSource, Side
from trader.domain.reconciliation import LedgerBook
from trader.emulator import Fault
from trader.emulator.sandbox import SandboxSettings, open_sandbox
from trader.logging import configure_logging
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.replay import read_recording
from trader.market.retry import RetryPolicy

DEFAULT_DATA = SHARED_DATA / "SOLUSDT_1h.csv"
KEY, SECRET = "bench-key", "bench-secret-0123456789"
SYMBOL = "SOL/USDT"


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": round(statistics.median(ordered), 3),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
    }


async def timed(work: Callable[[], Awaitable[object]]) -> float:
    began = time.perf_counter()
    await work()
    return (time.perf_counter() - began) * 1000


class Orders:
    def __init__(self) -> None:
        self.n = 0

    def make(self, side: Side, amount: str, limit: Decimal | None = None) -> Order:
        self.n += 1
        return Order.create(
            strategy="bench", symbol=SYMBOL, side=side,
            type=OrderType.LIMIT if limit is not None else OrderType.MARKET,
            amount=Decimal(amount), limit_price=limit, tick_time=datetime.now(UTC),
            leg=f"o{self.n}",
        )  # fmt: skip


async def run(data: Path, count: int) -> dict[str, object]:
    sandbox = await open_sandbox(
        SandboxSettings([read_recording(data)], port=0, api_key=KEY, api_secret=SECRET,
                        cash=Decimal(10**9))
    )  # fmt: skip
    market = sandbox.server.api.market
    exchange = create_exchange(
        ExchangeSettings(api_key=KEY, api_secret=SECRET, timeout_s=0.2,
                         api_base_url=sandbox.server.base_url)
    )  # fmt: skip
    exchange.enableRateLimit = False  # the venue's pacing is not what is measured here
    feed = CcxtMarketData(exchange, sandbox.clock)
    orders = Orders()
    try:
        await feed.start([SYMBOL])
        instruments = {SYMBOL: feed.instrument(SYMBOL)}
        live = LiveBroker(
            exchange, BrokerSettings(recv_window_ms=1000), instruments,
            retry=RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.05),
        )  # fmt: skip
        paper = PaperBroker(BrokerSettings(), instruments)

        def quote() -> Quote:
            book = market.top_of_book("SOLUSDT")
            assert book is not None
            return Quote(SYMBOL, book[0], book[1], datetime.now(UTC), QuoteSource.REAL)

        async def market_order(broker: LiveBroker | PaperBroker, n: int) -> None:
            # Buys of 2 and sells of 1.9: a buy's fee is taken in what it bought.
            side, amount = (Side.BUY, "2") if n % 2 == 0 else (Side.SELL, "1.9")
            done = await broker.submit(orders.make(side, amount), quote(), datetime.now(UTC))
            assert done.fills, done

        live_market = [await timed(lambda n=n: market_order(live, n)) for n in range(count)]
        paper_market = [await timed(lambda n=n: market_order(paper, n)) for n in range(count)]

        async def place_and_cancel() -> None:
            low = (quote().bid / 2).quantize(Decimal("0.01"))
            placed = await live.submit(orders.make(Side.BUY, "5", low), quote(), datetime.now(UTC))
            assert await live.cancel(placed.order, datetime.now(UTC)) is not None

        cycles = [await timed(place_and_cancel) for _ in range(count)]

        async def lost_answer() -> None:
            sandbox.server.faults.add(
                Fault("delay", "/api/v3/order", method="POST", delay_s=0.3, after=True)
            )
            done = await live.submit(orders.make(Side.BUY, "2"), quote(), datetime.now(UTC))
            assert done.fills, done  # found by its client id at once

        lost = [await timed(lost_answer) for _ in range(max(5, count // 10))]

        book = LedgerBook(
            portfolio=Portfolio("USDT", Decimal(0)), starting_cash=Decimal(0), open_orders=[],
            known_orders=frozenset(), booked_fills=frozenset(),
        )  # fmt: skip

        async def reconcile() -> None:
            await live.reconcile(book, datetime.now(UTC))

        reconcile_empty = [await timed(reconcile) for _ in range(5)]
        resting = []
        for _ in range(count):
            low = (quote().bid / 2).quantize(Decimal("0.01"))
            resting.append(
                (
                    await live.submit(orders.make(Side.BUY, "5", low), quote(), datetime.now(UTC))
                ).order
            )
        book = LedgerBook(
            portfolio=book.portfolio, starting_cash=Decimal(0), open_orders=resting,
            known_orders=frozenset(o.client_order_id for o in resting), booked_fills=frozenset(),
        )  # fmt: skip
        reconcile_full = [await timed(reconcile) for _ in range(3)]
    finally:
        await feed.close()
        await sandbox.server.stop()
    live_median = statistics.median(live_market)
    return {
        "orders": count,
        "live_market_order_ms": summary(live_market),
        "paper_market_order_ms": summary(paper_market),
        "live_over_paper_market_order": round(live_median / statistics.median(paper_market), 1),
        "live_place_and_cancel_ms": summary(cycles),
        "live_lost_answer_settled_ms": summary(lost),
        "reconcile_ms_no_open_orders": summary(reconcile_empty),
        f"reconcile_ms_{count}_open_orders": summary(reconcile_full),
        "requests_served": len(sandbox.server.requests),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 orders: checks it runs")
    args = parser.parse_args()
    configure_logging(LogSettings(level="ERROR", format="json"), stream=sys.stderr)
    report = asyncio.run(run(args.data, 20 if args.quick else args.orders))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
