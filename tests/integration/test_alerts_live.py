"""The alerts and the latency panels against running daemons, scraped and evaluated every second
by a real Prometheus loaded with the project's rules (the alerts under test with their `for:`
shortened to seconds):

- the exchange emulator killed under a live (paper) daemon: the outage alert goes pending, then
  firing within its `for:`, and the daemon still stops cleanly;
- a candle the exchange never publishes: the degraded ticks raise the tick alert;
- the forecast-latency p50 panel tells the baseline from a small Toto."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.deploy_queries import dashboard_queries, plain
from tests.integration.conftest import clean_env
from tests.integration.daemon import metrics_port, running, stop
from tests.integration.emulated import SECOND, live_env, walk
from tests.integration.prometheus import (
    RunningPrometheus,
    prometheus,
    rule_for,
    seconds,
    shortened_rules,
    wait_for,
)
from tests.recorded import SOLUSDT_1H
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.forecast.random_weights import write_random_toto

pytestmark = pytest.mark.integration

OUTAGE = "TraderExchangeUnreachable"
DEGRADED = "TraderTicksDegraded"
SHORT_FOR = "4s"
SLACK_S = 20.0  # scrape, evaluation and a tick's delay on a busy machine


def market_with(*symbols: str) -> EmulatedMarket:
    start = SECOND.floor(datetime.now(UTC)) - timedelta(seconds=120)
    market = EmulatedMarket(lambda: datetime.now(UTC))
    for n, symbol in enumerate(symbols):
        market.add_listing(Instrument(symbol), walk(symbol, start, 900, 100.0 * (n + 1), n))
    return market


async def state_of(prom: RunningPrometheus, alert: str) -> str | None:
    return (await asyncio.to_thread(prom.alert_states)).get(alert)


async def until(prom: RunningPrometheus, alert: str, state: str, within_s: float) -> float:
    """Seconds until `alert` is in `state`."""
    began = time.monotonic()
    await asyncio.to_thread(
        wait_for, lambda: prom.alert_states().get(alert) == state, f"{alert} {state}", within_s
    )
    return time.monotonic() - began


def test_the_alerts_under_test_exist_with_a_for_duration():
    for alert in (OUTAGE, DEGRADED):
        assert seconds(rule_for(alert)) > 0, f"{alert} pages on a single evaluation"


async def test_an_exchange_outage_goes_pending_then_fires_within_its_for(cli, tmp_path):
    rules = shortened_rules(tmp_path / "rules", {OUTAGE: SHORT_FOR})
    async with EmulatorServer(market_with("SOL/USDT")) as server:
        env = live_env(
            server.base_url,
            tmp_path / "ledger.sqlite3",
            TRADER_MARKET__SYMBOLS="SOL/USDT",
            TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S="0.5",
            TRADER_EXCHANGE__RETRY_ATTEMPTS="1",
        )
        with running(cli.start("run", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            await asyncio.to_thread(daemon.wait_for, "ready", 60)
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus", rules) as prom:
                await asyncio.to_thread(
                    wait_for, lambda: prom.value('up{job="trader"}') == 1, "a scrape", 60
                )
                await asyncio.sleep(3)  # a few evaluations while the exchange answers
                assert await state_of(prom, OUTAGE) is None
                await server.stop()  # the exchange goes away under the running daemon
                pending = await until(prom, OUTAGE, "pending", SLACK_S)
                firing = await until(prom, OUTAGE, "firing", seconds(SHORT_FOR) + SLACK_S)
                assert firing >= seconds(SHORT_FOR) - 1.5  # it waited for its `for:`
                assert prom.value("trader_exchange_reachable") == 0
            # A stop in the middle of an outage is a clean one.
            assert await asyncio.to_thread(stop, daemon) == 0
    assert pending < SLACK_S
    errors = [line for line in daemon.lines if line.get("level") == "error"]
    assert not [line for line in errors if "Traceback" in str(line)], errors


async def test_degraded_ticks_raise_the_tick_alert(cli, tmp_path):
    rules = shortened_rules(tmp_path / "rules", {DEGRADED: "2s"})
    market = market_with("SOL/USDT", "BTC/USDT")
    async with EmulatorServer(market) as server:
        env = live_env(
            server.base_url,
            tmp_path / "ledger.sqlite3",
            TRADER_MARKET__SYMBOLS="SOL/USDT",
            TRADER_MARKET__GAP_POLICY="skip",
            TRADER_MARKET__MIN_CONTIGUOUS_BARS="6",
        )
        with running(cli.start("run", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus", rules) as prom:
                await asyncio.to_thread(
                    wait_for, lambda: prom.value('up{job="trader"}') == 1, "a scrape", 60
                )
                assert await state_of(prom, DEGRADED) is None  # every tick so far was ok
                # A candle a few ticks ahead that the exchange never publishes: dropped only
                # now, whenever a loaded machine got the daemon and Prometheus this far.
                hole = SECOND.floor(datetime.now(UTC)) + timedelta(seconds=3)
                market.withhold(Instrument("SOL/USDT").venue_id, hole)
                await until(prom, DEGRADED, "firing", 3 + 2 + SLACK_S)
                degraded = prom.value('sum(trader_ticks_total{outcome="degraded"})')
                assert degraded is not None
                assert degraded >= 1
            assert await asyncio.to_thread(stop, daemon) == 0


def p50_panel() -> str:
    [query] = [
        q for q in dashboard_queries() if "'Forecast latency by model and device' A" in q.where
    ]
    return plain(query.expr)


def replay_env(tmp_path: Path, name: str, **extra: str) -> dict[str, str]:
    return clean_env(
        TRADER_LEDGER__PATH=str(tmp_path / f"{name}.sqlite3"),
        TRADER_METRICS__PORT="0",
        TRADER_MQTT__ENABLED="false",
        TRADER_MARKET__CONTEXT_BARS="64",
        **extra,
    )


def test_the_forecast_latency_p50_panel_tells_the_baseline_from_a_small_toto(cli, tmp_path):
    toto = write_random_toto(tmp_path / "toto-small", size="small")
    runs = {
        "baseline": replay_env(tmp_path, "baseline", TRADER_FORECAST__MODEL="baseline"),
        "toto": replay_env(
            tmp_path,
            "toto",
            TRADER_FORECAST__MODEL="toto",
            TRADER_FORECAST__DEVICE="cpu",
            TRADER_FORECAST__TOTO__REPO=str(toto.directory),
            TRADER_FORECAST__TOTO__NUM_SAMPLES="64",
        ),
    }
    # Two bars a second: ticks keep coming while Prometheus scrapes, for minutes of recording.
    replay = ("run", "--replay", str(SOLUSDT_1H), "--symbol", "SOL/USDT", "--speed", "7200")
    daemons = {name: cli.start(*replay, env=env) for name, env in runs.items()}
    with running(daemons["baseline"]), running(daemons["toto"]):
        ports = {name: metrics_port(daemon, timeout=120) for name, daemon in daemons.items()}
        targets = [f"127.0.0.1:{port}" for port in ports.values()]
        with prometheus(targets, tmp_path / "prometheus") as prom:

            def p50s() -> dict[str, float] | None:
                result = prom.query(p50_panel())["result"]
                values = {r["metric"]["model"]: float(r["value"][1]) for r in result}
                done = set(values) == set(runs) and not any(math.isnan(v) for v in values.values())
                return values if done else None

            values = wait_for(p50s, "a p50 for both models", 120)
        for daemon in daemons.values():
            assert stop(daemon) == 0
    # The baseline's sub-millisecond calls land in buckets of their own (the old first bucket
    # was 5 ms wide), and the small Toto's sit well above them.
    assert values["baseline"] < 0.005, values
    assert values["toto"] > 2 * values["baseline"], values
