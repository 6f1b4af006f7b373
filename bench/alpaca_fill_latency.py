"""Fill latency on Alpaca: the time from the emulator's fill to the fill being booked in the
ledger, heard on the trade-updates stream against found by polling, side by side in one run.
Prints JSON.

One Alpaca emulator (in this process, on loopback) with two accounts, each traded by its own
live engine and ledger: the "stream" account's fills are heard through alpaca-py's
`TradingStream` and settled at once (`trader.engine.streamed`, the daemon's path); the "poll"
account's are found by polling every `--poll-s` seconds (the daemon polls once a tick, so in a
daemon this wait is up to a whole bar). Each round rests the same limit buy on both accounts,
moves the clock past a bar that trades through it, and lets the venue match both accounts at
once; the fill's moment is when the venue made the trade. The emulator's work is inside the
figures: they bound what the daemon adds, they are not Alpaca's latency.

    .venv/bin/python bench/alpaca_fill_latency.py [--data FILE] [--orders N] [--poll-s S] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from decimal import ROUND_UP, Decimal
from functools import partial
from pathlib import Path
from typing import Any

from harness import SHARED_DATA

from trader.clock import SimulatedClock
from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.domain import Bar, Order, OrderStatus, OrderType, Quote, QuoteSource, Side
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.emulator.alpaca import AlpacaApi
from trader.emulator.sandbox_replay import recorded_bars
from trader.emulator.venue import Account, Fees, Venue, VenueOrder, VenueTrade
from trader.engine.pipeline import Engine
from trader.engine.streamed import settle_between_ticks
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.ledger.between_ticks import book_executions
from trader.logging import configure_logging
from trader.market.alpaca.feed import AlpacaMarketData, alpaca_exchange
from trader.market.alpaca.stream import TradeUpdate, TradeUpdates, stream_url
from trader.market.replay import read_recording
from trader.runner import build_engine

DEFAULT_DATA = SHARED_DATA / "SOLUSDT_1h.csv"
SYMBOL, VENUE_ID = "SOL/USDT", "SOLUSDT"
KEYS = {"stream": ("stream-key", "stream-secret"), "poll": ("poll-key", "poll-secret")}
START = 600  # the bar the clock starts at (a context of bars before it)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": round(statistics.median(ordered), 2),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        "max": round(ordered[-1], 2),
    }


class Trader:
    """One account: its engine, and when each order filled at the venue and was booked."""

    def __init__(self, name: str, engine: Engine, database: Database, close: Any) -> None:
        self.name, self.engine, self.database, self.close = name, engine, database, close
        self.filled_at: dict[str, float] = {}  # client order id -> the venue's trade
        self.booked_at: dict[str, float] = {}
        self.lock = asyncio.Lock()

    def latencies_ms(self) -> list[float]:
        return [(self.booked_at[c] - t) * 1000 for c, t in self.filled_at.items()]


async def open_trader(
    name: str, server: EmulatorServer, clock: SimulatedClock, folder: Path
) -> Trader:
    key, secret = KEYS[name]
    settings = Settings(
        exchange={"venue": "alpaca", "api_base_url": server.base_url, "timeout_s": 5,
                  "alpaca": {"key_id": key, "secret_key": secret}},
        market={"symbols": [SYMBOL], "context_bars": 32},
        forecast={"model": "baseline", "baseline_lookback": 32},
        broker={"mode": "live", "live_confirmation": True, "lock_dir": folder / name / "locks",
                "recv_window_ms": 1000},
        ledger={"path": folder / name / "ledger.sqlite3"},
    )  # fmt: skip
    feed = AlpacaMarketData(alpaca_exchange(settings.exchange, clock), clock, {})
    database = await Database.open(settings.ledger.path)
    engine = await build_engine(
        settings, feed, database, clock.now(), forecasters=[BaselineForecaster(32)]
    )
    report = await engine.reconcile(clock.now())
    if not report.ok:
        raise SystemExit(f"{name}: the account does not reconcile: {report.text}")
    return Trader(name, engine, database, feed.close)


async def book(trader: Trader, executions: list[Any], at: Any) -> None:
    """A poll's executions booked as a tick's ledger stage books them."""
    portfolio = trader.engine.portfolio
    for execution in executions:
        for fill in execution.fills:
            portfolio = portfolio.apply(fill)
    await book_executions(trader.database, executions, portfolio, at, "poll")
    trader.engine.portfolio = portfolio
    now = time.perf_counter()
    for execution in executions:
        if execution.fills:
            trader.booked_at.setdefault(execution.order.client_order_id, now)


async def poll_forever(trader: Trader, clock: SimulatedClock, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        async with trader.lock:
            executions = await trader.engine.broker.on_market([], {}, clock.now())
            if executions:
                await book(trader, executions, clock.now())


async def follow_stream(trader: Trader, inbox: asyncio.Queue[Any], clock: SimulatedClock) -> None:
    """The daemon's follower (`trader.service.trade_stream.follow`), timed."""
    while True:
        update = await inbox.get()
        if not isinstance(update, TradeUpdate) or not update.settles:
            continue
        async with trader.lock:
            execution = await settle_between_ticks(trader.engine, update.client_order_id,
                                                   clock.now())  # fmt: skip
        if execution is not None and execution.fills:
            trader.booked_at.setdefault(update.client_order_id, time.perf_counter())


def emulator(data: Path) -> tuple[SimulatedClock, list[Bar], EmulatorServer, Venue]:
    """The recording as an Alpaca crypto pair, and one funded account per key."""
    bars = [replace(b, symbol=SYMBOL) for b in recorded_bars(read_recording(data))]
    clock = SimulatedClock(bars[START].start + timedelta(seconds=5))
    market = EmulatedMarket(clock.now)
    market.add_listing(Instrument(SYMBOL), bars)
    venue = Venue(market, Fees(), Decimal(1), unique_client_ids=True)
    for key, _ in KEYS.values():
        venue.open_account(key, {"USD": Decimal(0), "USDT": Decimal(10**7), "SOL": Decimal(0)})
    secrets = dict(KEYS.values())
    return (
        clock,
        bars,
        EmulatorServer(market, venue=venue, secrets=secrets, dialect="alpaca"),
        venue,
    )


async def until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {seconds:.0f} s")
        await asyncio.sleep(0.001)


async def rounds(
    count: int, poll_s: float, clock: SimulatedClock, bars: list[Bar], venue: Venue,
    traders: dict[str, Trader],
) -> None:  # fmt: skip
    """Rest the same limit buy on both accounts, let a bar trade through it, wait for both."""
    step = traders["stream"].engine.instruments[SYMBOL].price_step
    placed, phase = 0, random.Random(0)  # noqa: S311 - a timing offset, not a secret
    while placed < count:
        # The next bar to open: the venue fills a resting order from bars opened after it.
        ahead = bars[bisect.bisect_right(bars, clock.now(), key=lambda bar: bar.start)]
        top = venue.market.top_of_book(VENUE_ID)
        assert top is not None
        price = (Decimal(repr(ahead.low)) / step).to_integral_value(ROUND_UP) * step + step
        if price >= top[0]:  # it would not rest below the bid: try the next hour
            clock.advance_to(ahead.start + timedelta(seconds=5))
            continue
        quote = Quote(SYMBOL, top[0], top[1], clock.now(), QuoteSource.REAL)
        for trader in traders.values():
            order = Order.create(
                strategy="bench", symbol=SYMBOL, side=Side.BUY, type=OrderType.LIMIT,
                amount=Decimal(10), limit_price=price, tick_time=clock.now(), leg=f"o{placed}",
            )  # fmt: skip
            async with trader.lock:
                await trader.engine.ledger.record_orders([order], clock.now(), "bench")
                done = await trader.engine.broker.submit(order, quote, clock.now())
                await trader.engine.ledger.record_orders([done.order], clock.now(), "bench")
            assert done.order.status is OrderStatus.OPEN, done.reason
        placed += 1
        clock.advance_to(ahead.end + timedelta(seconds=5))
        await asyncio.sleep(phase.uniform(0, poll_s))  # a fill falls anywhere between polls
        for key, _ in KEYS.values():  # the venue matches both accounts at the same moment
            venue.sync(venue.accounts[key])
        await until(
            partial(booked, traders, placed), poll_s * 3 + 10, f"round {placed}: a fill booked"
        )


def booked(traders: dict[str, Trader], count: int) -> bool:
    return all(len(t.booked_at) >= count for t in traders.values())


async def run(data: Path, count: int, poll_s: float) -> dict[str, object]:
    clock, bars, server, venue = emulator(data)
    alpaca = server.api
    assert isinstance(alpaca, AlpacaApi)
    await server.start()
    folder = Path(tempfile.mkdtemp(prefix="alpaca-fill-latency-"))
    traders = {name: await open_trader(name, server, clock, folder) for name in KEYS}
    by_account = {id(venue.accounts[KEYS[n][0]]): traders[n] for n in KEYS}

    def heard(account: Account, order: VenueOrder, trade: VenueTrade | None) -> None:
        trader = by_account.get(id(account))
        if trade is not None and trader is not None:
            trader.filled_at.setdefault(order.client_order_id, time.perf_counter())

    venue.on_change.append(heard)
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def deliver(update: TradeUpdate) -> None:  # from the stream's thread
        loop.call_soon_threadsafe(inbox.put_nowait, update)

    stream = TradeUpdates(
        *KEYS["stream"], paper=True, url=stream_url(server.base_url), deliver=deliver
    )
    stream.start()
    tasks = [
        asyncio.ensure_future(follow_stream(traders["stream"], inbox, clock)),
        asyncio.ensure_future(poll_forever(traders["poll"], clock, poll_s)),
    ]
    try:
        await until(lambda: alpaca.stream.listening > 0, 20, "the stream listening")
        await rounds(count, poll_s, clock, bars, venue, traders)
    finally:
        for task in tasks:
            task.cancel()
        await stream.aclose()
        for trader in traders.values():
            trader.engine.close()
            await trader.database.close()
            await trader.close()
        await server.stop()
    stream_ms, poll_ms = traders["stream"].latencies_ms(), traders["poll"].latencies_ms()
    return {
        "orders": count,
        "poll_every_s": poll_s,
        "fill_to_booked_ms_stream": summary(stream_ms),
        "fill_to_booked_ms_poll": summary(poll_ms),
        "poll_over_stream_median": round(
            statistics.median(poll_ms) / statistics.median(stream_ms), 1
        ),
        "stream_drops": stream.drops,
        "updates_sent": alpaca.stream.sent,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--orders", type=int, default=50)
    parser.add_argument("--poll-s", type=float, default=1.0,
                        help="seconds between polls (the daemon: once a tick)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="10 orders, 0.2 s polls")
    args = parser.parse_args()
    configure_logging(LogSettings(level="ERROR", format="json"), stream=sys.stderr)
    count, poll_s = (10, 0.2) if args.quick else (args.orders, args.poll_s)
    report = asyncio.run(run(args.data, count, poll_s))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
