"""The exchange coming back after an outage: a reconciliation at once, under the tick lock,
never two at a time and one per return; and keys the venue refuses, counted each time and
said with the settings to check (the whole daemon: tests/integration/test_daemon_recovery.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import ccxt.async_support as ccxt
from structlog.testing import capture_logs

from tests.unit.engine.builders import T0
from tests.unit.service.test_parts import parts, sample
from trader.clock import SimulatedClock
from trader.logging import get_logger
from trader.service.exchange import ExchangeConnection
from trader.service.jobs import ReconcileOnRecovery
from trader.service.parts import Parts


class Engine:
    """An engine whose reconciliations wait until the test lets each one finish."""

    def __init__(self, lock: asyncio.Lock, external: bool = True) -> None:
        self.broker = SimpleNamespace(external=external, name="binance")
        self.reconciled = False
        self.lock = lock
        self.runs = 0
        self.overlapping = 0
        self.finish = asyncio.Event()

    async def reconcile(self, at: object) -> SimpleNamespace:
        assert self.lock.locked()  # under the tick lock
        self.runs += 1
        self.overlapping = max(self.overlapping, self.runs - self.done)
        await self.finish.wait()
        self.finish.clear()
        self.done += 1
        self.reconciled = True
        return SimpleNamespace(summary="ok")

    done = 0


def daemon(external: bool = True) -> tuple[Parts, Engine, ExchangeConnection, asyncio.Lock]:
    made = parts()
    lock = asyncio.Lock()
    engine = Engine(lock, external)
    made.engine = engine  # type: ignore[assignment]
    feed = SimpleNamespace(name="ccxt:binance")
    made.venue = SimpleNamespace(clock=SimulatedClock(T0), feed=feed)  # type: ignore[assignment]
    return made, engine, ExchangeConnection(made, get_logger("test")), lock


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_return_reconciles_at_once_once_and_never_two_at_a_time():
    made, engine, exchange, lock = daemon()
    made.readiness.mark("reconciled", False, "incomplete: the exchange was away")
    exchange.when_back(ReconcileOnRecovery(made, lock, get_logger("test")))
    with capture_logs() as logs:
        exchange.set(True, "reachable")  # the first contact: start-up has just reconciled
        await settle()
        assert engine.runs == 0
        exchange.set(False, "binance unreachable: timeout")
        exchange.set(True, "reachable")
        exchange.set(True, "reachable")  # still up: the same return
        await settle()
        assert engine.runs == 1
        exchange.set(False, "binance unreachable: timeout")  # gone and back while it runs
        exchange.set(True, "reachable")
        await settle()
        assert engine.runs == 1  # one more waits for this one to end
        engine.finish.set()
        await settle()
        assert engine.runs == 2
        engine.finish.set()
        await settle()
    assert (engine.runs, engine.done, engine.overlapping) == (2, 2, 1)
    assert [x["event"] for x in logs].count("exchange back: reconciling now") == 2
    assert made.readiness.evaluate().ready  # /readyz's "reconciled" is marked again


async def test_a_tick_holding_the_lock_goes_first_and_the_next_one_waits():
    made, engine, exchange, lock = daemon()
    exchange.when_back(ReconcileOnRecovery(made, lock, get_logger("test")))
    exchange.set(False, "binance unreachable: timeout")
    async with lock:  # a tick under way sees the exchange back (its report's hook)
        exchange.set(True, "reachable")
        await settle()
        assert engine.runs == 0
    await settle()
    assert engine.runs == 1
    next_tick = asyncio.ensure_future(lock.acquire())
    await settle()
    assert not next_tick.done()  # the next tick trades once the reconciliation has finished
    engine.finish.set()
    await settle()
    assert next_tick.done()
    assert engine.reconciled
    lock.release()


async def test_a_return_before_the_jobs_started_is_heard_when_they_do():
    made, engine, exchange, lock = daemon()
    exchange.set(False, "binance unreachable: network")
    exchange.set(True, "reachable")  # during the model load, say
    exchange.when_back(ReconcileOnRecovery(made, lock, get_logger("test")))
    await settle()
    assert engine.runs == 1
    engine.finish.set()
    await settle()


async def test_a_paper_daemon_and_a_stopping_one_do_not_reconcile():
    made, engine, exchange, lock = daemon(external=False)
    exchange.when_back(ReconcileOnRecovery(made, lock, get_logger("test")))
    exchange.set(False, "binance unreachable: network")
    exchange.set(True, "reachable")
    made, live, exchange, lock = daemon()
    exchange.when_back(ReconcileOnRecovery(made, lock, get_logger("test")))
    made.phase = "stopping"
    exchange.set(False, "binance unreachable: network")
    exchange.set(True, "reachable")
    await settle()
    assert (engine.runs, live.runs) == (0, 0)


async def test_refused_keys_are_counted_each_time_and_said_with_the_settings_once_a_minute():
    made, _, exchange, _ = daemon()
    client = ccxt.binance({"apiKey": "the-key", "secret": "the-secret"})
    made.venue = SimpleNamespace(feed=SimpleNamespace(exchange=client, name="ccxt:binance"))  # type: ignore[assignment]
    try:
        with capture_logs() as logs:
            for _ in range(3):
                exchange.on_error("authentication")
            exchange.on_error("timeout")
    finally:
        await client.close()
    assert sample(made, "trader_exchange_errors_total", kind="authentication") == 3
    said = [x for x in logs if x["event"].startswith("exchange refused our credentials")]
    assert len(said) == 1
    assert said[0]["check"].startswith("exchange.api_key, exchange.api_secret")
    assert "the-key" not in repr(logs)
    assert "the-secret" not in repr(logs)
