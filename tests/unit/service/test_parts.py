"""The daemon's parts on their own, before any engine exists: what they answer, count and say
while start-up is under way (the whole daemon is tested in tests/integration/test_daemon_*)."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from trader.config import LoadedSettings
from trader.config.schema import Settings
from trader.daemon.notify import SystemdNotifier
from trader.logging import get_logger
from trader.service.control_surface import ControlSurface
from trader.service.exchange import NOT_CONTACTED, ExchangeConnection
from trader.service.parts import Parts, StopRequest
from trader.service.status import model_fields, runtime, status_text
from trader.telemetry.commands import sign
from trader.telemetry.metrics import Metrics

SECRET = "a-command-secret-of-some-length"
TOPIC = "trader/default/cmd"  # the default prefix and instance


def parts(**settings: object) -> Parts:
    loaded = LoadedSettings(Settings(**settings), {}, None, None, None)
    made = Parts(loaded, loaded.settings, None, SystemdNotifier(None))
    made.metrics = Metrics(CollectorRegistry(), loaded.settings.market.symbols)
    return made


def sample(made: Parts, name: str, **labels: str) -> float | None:
    assert made.metrics is not None
    return made.metrics.registry.get_sample_value(name, labels)


async def test_the_first_stop_reason_wins():
    stop = StopRequest()
    assert not stop.is_set()
    stop("SIGTERM")
    stop("end of replay")
    await stop.wait()
    assert (stop.is_set(), stop.reason) == (True, "SIGTERM")


def test_the_exchange_is_said_unreachable_once_and_reachable_again_once():
    made = parts()
    exchange = ExchangeConnection(made, get_logger("test"))
    assert exchange.check() == (False, NOT_CONTACTED)
    with capture_logs() as logs:
        exchange.set(True, "reachable")  # first contact: nothing to announce
        exchange.set(False, "binance unreachable: timeout")
        exchange.set(False, "binance unreachable: timeout")
        exchange.set(True, "reachable")
    assert [entry["event"] for entry in logs] == [
        "exchange unreachable",
        "exchange reachable again",
    ]
    assert exchange.check() == (True, "reachable")
    assert sample(made, "trader_exchange_reachable") == 1.0
    exchange.on_error("timeout")
    exchange.on_error("something new")
    assert sample(made, "trader_exchange_errors_total", kind="timeout") == 1.0
    assert sample(made, "trader_exchange_errors_total", kind="exchange_error") == 1.0
    assert not exchange.market_started()


async def test_commands_before_start_up_ends_are_answered_not_ready():
    made = parts(mqtt={"enabled": True, "command_secret": SECRET})
    control = ControlSurface(made, StopRequest(), get_logger("test"))
    assert await control.run("pause", "test") == "not ready: start-up is not finished"
    await control.on_command(sign(SECRET, "pause", topic=TOPIC, timestamp=int(time.time())))
    assert sample(made, "trader_mqtt_commands_total", command="pause", result="failed") == 1.0


@pytest.mark.parametrize(
    ("payload", "result"),
    [
        (sign("another secret", "pause", topic=TOPIC, timestamp=int(time.time())), "bad_signature"),
        (sign(SECRET, "pause", topic=TOPIC, timestamp=int(time.time()) - 3600), "stale"),
        (b"not json", "malformed"),
    ],
)
async def test_a_command_that_fails_verification_is_counted_by_why(payload, result):
    made = parts(mqtt={"enabled": True, "command_secret": SECRET})
    control = ControlSurface(made, StopRequest(), get_logger("test"))
    with capture_logs() as logs:
        await control.on_command(payload)
    assert [entry["event"] for entry in logs] == ["command refused"]
    assert SECRET not in repr(logs)
    counted = made.metrics.registry.get_sample_value  # type: ignore[union-attr]
    assert (
        sum(
            counted("trader_mqtt_commands_total", {"command": c, "result": result}) or 0
            for c in ("pause", "invalid")
        )
        == 1.0
    )


def test_the_status_before_start_up_says_what_is_not_known_yet():
    made = parts(market={"symbols": ["BTC/USDT"], "timeframe": "4h"})
    assert model_fields(made) == {"model": "toto", "model_mode": None}
    assert status_text(made) == ("starting: 1 symbols 4h, toto None on None, paper, trading ?")
    assert runtime(made.settings, "baseline") == "eager"
    assert runtime(made.settings, "toto") == str(made.settings.forecast.toto.runtime)
