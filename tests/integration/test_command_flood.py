"""A flood on the command topic while the daemon trades, through a real mosquitto on loopback:
20,000 garbage payloads from another client drop no trading event (every fill the ledger booked
arrives on the broker, and the trading queue counts no drop), each payload is counted, and the
flood is answered and logged a few times, not 20,000."""

from __future__ import annotations

import sqlite3

import paho.mqtt.client as paho
import pytest

from tests.integration.daemon import (
    daemon_env,
    metrics_port,
    recording,
    running,
    scrape,
    stop,
    wait_until,
)
from tests.integration.mosquitto import Mosquitto, Subscriber

pytestmark = pytest.mark.integration

SPEED = "36000"  # 0.1 s of wall time per simulated hour: 600 bars outlast the flood
BARS = 48 + 600
FLOOD = 20_000
SECRET = "test-command-secret-0123456789"


def commands_counted(port: int) -> float:
    return sum(v for (name, _), v in scrape(port).items() if name == "trader_mqtt_commands_total")


def test_a_flood_of_garbage_drops_no_trading_event(cli, tmp_path):
    broker = Mosquitto(tmp_path / "broker")
    # mosquitto keeps at most 1,000 QoS 1 messages queued per client and drops the rest: without
    # this, most of the flood would never reach the daemon.
    broker.config.write_text(broker.config.read_text() + "max_queued_messages 0\n")
    broker.start()
    ledger = tmp_path / "ledger.sqlite3"
    env = daemon_env(
        tmp_path, TRADER_INSTANCE="fl1", TRADER_MQTT__COMMANDS_ENABLED="true",
        TRADER_MQTT__COMMAND_SECRET=SECRET,
        # One answer per kind of refusal for the whole test, however long the flood takes.
        TRADER_MQTT__COMMAND_REFUSAL_INTERVAL_S="3600", **broker.env(),
    )  # fmt: skip
    daemon = cli.start("run", "--replay", str(recording(tmp_path, BARS)), "--speed", SPEED, env=env)
    flooder = paho.Client(paho.CallbackAPIVersion.VERSION2)
    try:
        with Subscriber(broker, "trader/fl1/#") as watcher, running(daemon):
            port = metrics_port(daemon)
            watcher.wait_for(
                lambda m: m.topic.endswith("/status") and m.body.get("state") == "ready",
                "status ready",
                timeout=60,
            )
            flooder.connect("127.0.0.1", broker.port)
            flooder.loop_start()
            sent = [flooder.publish("trader/fl1/cmd", b"garbage %d" % n, qos=1)
                    for n in range(FLOOD)]  # fmt: skip
            for message in sent:
                message.wait_for_publish(timeout=60)
            wait_until(lambda: commands_counted(port) >= FLOOD, "every payload counted", 120)
            counted = scrape(port)
            assert stop(daemon) == 0
        received = watcher.snapshot()
    finally:
        flooder.loop_stop()
        flooder.disconnect()
        broker.kill()
    with sqlite3.connect(ledger) as c:
        booked = {row[0] for row in c.execute("SELECT fill_id FROM fills")}
    fills = [m.body["fill_id"] for m in received if m.topic == "trader/fl1/fill"]
    assert booked, "the daemon traded nothing during the flood"
    assert sorted(fills) == sorted(booked)  # no fill event lost, none twice
    assert counted.get(("trader_mqtt_dropped_total", (("queue", "trading"),))) == 0
    assert sum(v for (name, _), v in counted.items() if name == "trader_mqtt_commands_total") == (
        FLOOD
    )
    limited = counted[("trader_mqtt_commands_total",
                       (("command", "invalid"), ("result", "rate_limited")))]  # fmt: skip
    assert limited >= FLOOD - 100  # the default rate reads a few of them
    answers = [m.body["result"] for m in received if m.topic == "trader/fl1/cmd/result"]
    assert sorted(answers) == ["malformed", "rate_limited"]
    refused = [line for line in daemon.lines if line["event"] == "command refused"]
    assert len(refused) == 2
