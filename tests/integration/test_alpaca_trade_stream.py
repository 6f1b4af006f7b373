"""Alpaca's trade-updates stream: the emulator serves it as Alpaca's documentation shows it
(tests/data/alpaca/recorded/trade_updates_stream.json, from docs.alpaca.markets/docs/
websocket-streaming), alpaca-py's `TradingStream` hears it in the daemon, and a fill is booked
through the live broker's own path as soon as it is heard; polling stays, books alone while the
stream is down, and nothing is booked twice.

The market: the recorded SOL/USDT hours (tests/data/SOLUSDT_1h.csv.gz) listed as an Alpaca
crypto pair (tests/integration/alpaca_setup.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from alpaca.trading.models import TradeUpdate as SdkTradeUpdate
from prometheus_client import CollectorRegistry

from tests.integration.alpaca_setup import KEY, SECRET, alpaca_live
from tests.integration.live_setup import Live
from tests.recorded import ALPACA_TRADE_UPDATES
from trader.config import LoadedSettings
from trader.config.schema import Settings
from trader.daemon.notify import SystemdNotifier
from trader.domain import Order, OrderStatus, OrderType, Side
from trader.engine.pipeline import Engine
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.ledger.between_ticks import book_executions
from trader.logging import get_logger
from trader.market.alpaca.stream import TradeUpdates, stream_url
from trader.market.retry import RetryPolicy
from trader.runner import build_engine
from trader.service.parts import Parts
from trader.service.trade_stream import start_trade_stream
from trader.telemetry.metrics import Metrics

pytestmark = pytest.mark.integration
STREAM_DOCS = json.loads(ALPACA_TRADE_UPDATES.read_text())
SYMBOL = "SOL/USDT"


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.02)


# --- the emulator's messages, field by field against Alpaca's ----------------------------


async def _messages(live: Live, ws: aiohttp.ClientWebSocketResponse, count: int) -> list[Any]:
    out = []
    for _ in range(count):
        message = await ws.receive(timeout=5)
        assert message.type is aiohttp.WSMsgType.BINARY  # the paper stream's frames (the docs)
        out.append(json.loads(message.data))
    return out


def _same_shape(ours: Any, theirs: Any, where: str) -> None:
    """Every field Alpaca's example has, with the same JSON type (null where it is null, or a
    string where the example's null stands for an optional text)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        missing = set(theirs) - set(ours)
        assert not missing, f"{where}: missing {sorted(missing)}"
        for key, value in theirs.items():
            _same_shape(ours[key], value, f"{where}.{key}")
    elif theirs is None:
        assert ours is None or isinstance(ours, str), f"{where}: {ours!r}"
    else:
        assert type(ours) is type(theirs), f"{where}: {ours!r} is not like {theirs!r}"


async def test_the_emulators_stream_speaks_as_alpacas_documentation_shows():
    async with alpaca_live() as live, aiohttp.ClientSession() as http:
        url = live.server.base_url + "/stream"
        async with http.ws_connect(url) as ws:
            await ws.send_json({"action": "listen", "data": {"streams": ["trade_updates"]}})
            await ws.send_json(
                {"action": "authenticate", "data": {"key_id": KEY, "secret_key": "wrong"}}
            )
            before, refused = await _messages(live, ws, 2)
            assert before == STREAM_DOCS["listen_unauthorized"]
            assert refused == STREAM_DOCS["unauthorized"]
            await ws.send_json(
                {"action": "authenticate", "data": {"key_id": KEY, "secret_key": SECRET}}
            )
            await ws.send_json({"action": "listen", "data": {"streams": ["trade_updates"]}})
            authorized, listening = await _messages(live, ws, 2)
            assert authorized == STREAM_DOCS["authorized"]
            assert listening == STREAM_DOCS["listening"]
            account = live.venue.accounts[KEY]
            live.venue.place(
                account, symbol="SOLUSDT", side="BUY", type_="MARKET",
                quantity=Decimal(10), price=None, time_in_force="GTC", client_order_id="c1",
            )  # fmt: skip
            new, fill = await _messages(live, ws, 2)
    assert [new["data"]["event"], fill["data"]["event"]] == ["new", "fill"]
    documented = STREAM_DOCS["fill"]
    _same_shape(fill, documented, "fill")
    assert set(fill["data"]) == set(documented["data"])  # no field Alpaca does not send
    order = fill["data"]["order"]
    assert order["client_order_id"] == "c1"
    assert order["status"] == "filled"
    assert Decimal(fill["data"]["qty"]) == Decimal(order["filled_qty"]) == 10
    held = account.balances["SOL"].total  # after the fee, taken in the coin
    assert Decimal(fill["data"]["position_qty"]) == held
    # alpaca-py reads both in its parsed mode (raw_data=False) too.
    assert SdkTradeUpdate(**fill["data"]).execution_id is not None
    assert SdkTradeUpdate(**new["data"]).event == "new"


# --- the daemon: the stream books at once, polling stays -----------------------------------


def _settings(tmp_path, base_url: str) -> Settings:
    return Settings(
        exchange={"venue": "alpaca", "api_base_url": base_url, "timeout_s": 2,
                  "alpaca": {"key_id": KEY, "secret_key": SECRET}},
        market={"symbols": [SYMBOL], "context_bars": 32},
        forecast={"model": "baseline", "baseline_lookback": 32},
        risk={"min_edge_bps": 0, "max_orders_per_minute": 1000},
        broker={"mode": "live", "live_confirmation": True, "lock_dir": tmp_path / "locks",
                "recv_window_ms": 1000},
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )  # fmt: skip


class Daemon:
    """The engine on the emulator, with the daemon's trade-stream wiring around it."""

    def __init__(self, live: Live, engine: Engine, database: Database, settings: Settings):
        self.live, self.engine, self.database = live, engine, database
        self.lock = asyncio.Lock()
        self.metrics = Metrics(CollectorRegistry(), [SYMBOL])
        self.parts = Parts(
            LoadedSettings(settings, {}, None, None, None), settings, None,
            SystemdNotifier(None, None),
        )  # fmt: skip
        self.parts.engine = engine
        self.parts.venue = SimpleNamespace(clock=live.prices.market.clock)  # type: ignore[assignment]
        self.parts.metrics = self.metrics

    async def rest_a_buy(self) -> Order:
        """A limit buy the path trades through within a few hours, sent and recorded as the
        engine's order routing does (recorded PENDING first)."""
        prices, broker = self.live.prices, self.engine.broker
        step = self.live.instruments[SYMBOL].price_step
        price = prices.crossing_price(Side.BUY, step)
        order = Order.create(
            strategy="t", symbol=SYMBOL, side=Side.BUY, type=OrderType.LIMIT,
            amount=Decimal(2), limit_price=price, tick_time=prices.now, leg="stream",
        )  # fmt: skip
        async with self.lock:
            await self.engine.ledger.record_orders([order], prices.now, "test: routed")
            execution = await broker.submit(order, prices.quote(), prices.now)
            await self.engine.ledger.record_orders([execution.order], prices.now, "test: sent")
        assert execution.order.status is OrderStatus.OPEN
        return execution.order

    def fills(self) -> list[tuple[str, str]]:
        with sqlite3.connect(self.engine.settings.ledger.path) as c:
            return c.execute("SELECT fill_id, client_order_id FROM fills").fetchall()

    def detail(self, client_order_id: str) -> list[str]:
        with sqlite3.connect(self.engine.settings.ledger.path) as c:
            rows = c.execute(
                "SELECT detail FROM order_events WHERE client_order_id = ? ORDER BY rowid",
                (client_order_id,),
            )
            return [r[0] for r in rows]

    async def poll(self) -> list:
        async with self.lock:
            return await self.engine.broker.on_market([], {}, self.live.prices.now)

    def sample(self, name: str) -> float:
        value = self.metrics.registry.get_sample_value(name)
        return 0.0 if value is None else value


async def _daemon(live: Live, tmp_path) -> Daemon:
    settings = _settings(tmp_path, live.server.base_url)
    database = await Database.open(settings.ledger.path)
    engine = await build_engine(
        settings, live.feed, database, live.prices.now, forecasters=[BaselineForecaster(32)]
    )
    report = await engine.reconcile(live.prices.now)
    assert report.ok, report.text
    return Daemon(live, engine, database, settings)


async def test_a_fill_is_booked_from_the_stream_before_the_next_poll(tmp_path):
    async with alpaca_live() as live, AsyncExitStack() as stack:
        daemon = await _daemon(live, tmp_path)
        stack.push_async_callback(daemon.database.close)
        stack.callback(daemon.engine.close)
        log = get_logger("test")
        assert await start_trade_stream(daemon.parts, daemon.lock, stack, log)
        await until(lambda: live.server.api.stream.listening == 1)
        await until(lambda: daemon.sample("trader_trade_stream_connected") == 1)
        order = await daemon.rest_a_buy()
        cash_before = daemon.engine.portfolio.cash
        live.prices.advance(6)  # the path trades through the limit; nobody polls
        await until(lambda: any(cid == order.client_order_id for _, cid in daemon.fills()))
        await until(lambda: daemon.engine.broker.open_orders() == [])
        assert daemon.detail(order.client_order_id)[-1] == "trade stream"
        booked = daemon.fills()
        # The next poll finds nothing new: the fills are booked once.
        assert await daemon.poll() == []
        assert daemon.fills() == booked
        assert daemon.engine.portfolio.cash < cash_before
        # What the engine holds is what the ledger holds, and the venue agrees.
        report = await daemon.engine.reconcile(live.prices.now)
        assert report.ok, report.text
        assert not report.executions  # reconciliation found nothing the stream missed
        assert daemon.metrics.registry.get_sample_value(
            "trader_fills_total", {"symbol": SYMBOL, "side": "buy"}
        ) == len(booked)


async def test_with_the_stream_down_polling_books_the_fill_once_and_the_stream_returns(tmp_path):
    async with alpaca_live() as live, AsyncExitStack() as stack:
        daemon = await _daemon(live, tmp_path)
        stack.push_async_callback(daemon.database.close)
        stack.callback(daemon.engine.close)
        assert await start_trade_stream(daemon.parts, daemon.lock, stack, get_logger("test"))
        stream = live.server.api.stream
        await until(lambda: stream.listening == 1)
        await until(lambda: daemon.sample("trader_trade_stream_connected") == 1)
        order = await daemon.rest_a_buy()
        stream.refusing = True  # the stream goes down, and stays down
        assert await stream.drop() == 1
        await until(lambda: daemon.sample("trader_trade_stream_connected") == 0)
        assert daemon.sample("trader_trade_stream_drops_total") == 1
        live.prices.advance(6)
        live.balances()  # the venue matches the bars that closed (no stream to hear it)
        await asyncio.sleep(0.5)
        assert daemon.fills() == []  # nothing heard: the stream is down
        executions = await daemon.poll()
        filled = [f for e in executions for f in e.fills]
        assert filled, "polling books the fill"
        async with daemon.lock:  # the daemon books a tick's executions in its ledger stage
            portfolio = daemon.engine.portfolio
            for fill in filled:
                portfolio = portfolio.apply(fill)
            await book_executions(daemon.database, executions, portfolio, live.prices.now, "tick")
            daemon.engine.portfolio = portfolio
        booked = daemon.fills()
        assert len(booked) == len(filled)
        # The stream comes back (with back-off) and hears nothing new to book.
        stream.refusing = False
        await until(lambda: daemon.sample("trader_trade_stream_connected") == 1, seconds=20)
        assert await daemon.poll() == []
        assert daemon.fills() == booked
        assert daemon.detail(order.client_order_id)[-1] == "tick"


async def test_a_fill_heard_by_both_paths_is_booked_once(tmp_path):
    async with alpaca_live() as live, AsyncExitStack() as stack:
        daemon = await _daemon(live, tmp_path)
        stack.push_async_callback(daemon.database.close)
        stack.callback(daemon.engine.close)
        order = await daemon.rest_a_buy()
        live.prices.advance(6)
        # The tick polls first, holding the lock; the stream's update waits for it.
        async with daemon.lock:
            assert await start_trade_stream(daemon.parts, daemon.lock, stack, get_logger("t"))
            await until(lambda: live.server.api.stream.listening == 1)
            await until(lambda: live.server.api.stream.sent >= 1)  # the fill, told
            executions = await daemon.engine.broker.on_market([], {}, live.prices.now)
            filled = [f for e in executions for f in e.fills]
            assert filled
            portfolio = daemon.engine.portfolio
            for fill in filled:
                portfolio = portfolio.apply(fill)
            await book_executions(daemon.database, executions, portfolio, live.prices.now, "tick")
            daemon.engine.portfolio = portfolio
        await asyncio.sleep(1.0)  # the streamed update is settled now: nothing new
        assert len(daemon.fills()) == len(filled)
        assert daemon.detail(order.client_order_id)[-1] == "tick"
        report = await daemon.engine.reconcile(live.prices.now)
        assert report.ok, report.text


async def test_keys_alpaca_refuses_are_said_at_each_try_and_tried_again_after_a_back_off():
    async with alpaca_live() as live:
        states: list[tuple[bool, str]] = []
        stream = TradeUpdates(
            KEY, "not-the-secret", paper=True, url=stream_url(live.server.base_url),
            deliver=lambda update: None, on_state=lambda up, why: states.append((up, why)),
            backoff=RetryPolicy(base_delay_s=0.2, max_delay_s=0.4),
        )  # fmt: skip
        stream.start()
        await until(lambda: len(states) >= 3)
        await stream.aclose()
        tries = live.server.api.stream.connections
    refusals = [why for up, why in states if not up and why != "stopped"]
    assert not any(up for up, _ in states)
    assert len(refusals) >= 3
    assert all("refused the keys" in why for why in refusals)
    # One connection a try: alpaca-py's own loop would have retried every 10 ms.
    assert tries <= len(refusals) + 1
