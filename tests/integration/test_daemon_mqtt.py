"""The daemon against a real mosquitto on loopback: events in order with their schema, the
retained status and the last will, a broker that dies and comes back mid-run (trading carries
on, drops are counted, the link reconnects), signed commands (unsigned or replayed ones are
refused and counted), and TLS with credentials."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.integration.daemon import (
    daemon_env,
    metric,
    metrics_port,
    recording,
    running,
    stop,
    ticks,
    wait_until,
)
from tests.integration.mosquitto import Credentials, Mosquitto, Subscriber, make_tls
from trader.telemetry.commands import sign

pytestmark = pytest.mark.integration

# 0.1 s of wall time per simulated hour: a run of 600 bars outlasts every test here.
SPEED = "36000"
BARS = 48 + 600
SECRET = "test-command-secret-0123456789"
ORDER = {"forecast": 0, "decision": 1, "order": 2, "fill": 3, "pnl": 4}


def start(cli, tmp_path, broker: Mosquitto, instance: str, **extra: str):
    data = recording(tmp_path, BARS)
    env = daemon_env(tmp_path, TRADER_INSTANCE=instance, **(broker.env() | extra))
    return cli.start("run", "--replay", str(data), "--speed", SPEED, env=env)


def is_status(state: str, reason: str | None = None):  # type: ignore[no-untyped-def]
    def match(m) -> bool:  # type: ignore[no-untyped-def]
        return (
            m.topic.endswith("/status")
            and m.body.get("state") == state
            and (reason is None or m.body.get("reason") == reason)
        )

    return match


@pytest.fixture
def broker(tmp_path):
    server = Mosquitto(tmp_path / "broker")
    server.start()
    yield server
    server.kill()


def test_events_arrive_in_order_with_their_schema_and_the_status_is_retained(cli, tmp_path, broker):
    with Subscriber(broker, "trader/mq1/#") as watcher:
        with running(start(cli, tmp_path, broker, "mq1")) as daemon:
            watcher.wait_for(is_status("ready"), "status ready", timeout=60)
            wait_until(
                lambda: len([m for m in watcher.snapshot() if m.topic.endswith("/fill")]) >= 2,
                "two fills",
            )
            with Subscriber(broker, "trader/mq1/status") as late:
                retained = late.wait_for(is_status("ready"), "the retained status")
            assert retained.retained
            assert retained.body["trading_state"] == "active"
            assert retained.body["model"] == "baseline"
            assert retained.body["quote_source"] == "modelled"  # a replay's quotes are not real
            assert stop(daemon) == 0
        watcher.wait_for(is_status("offline", "stopped"), "the goodbye status")
        received = watcher.snapshot()
    events = [m for m in received if m.topic.rsplit("/", 1)[-1] in ORDER or "/forecast/" in m.topic]
    kinds = [m.body["schema"].split("/")[0].removeprefix("trader.") for m in events]
    assert {"forecast", "decision", "order", "fill", "pnl"} <= set(kinds)
    for m, kind in zip(events, kinds, strict=True):
        assert m.body["schema"] == f"trader.{kind}/1"
        assert m.body["instance"] == "mq1"
    assert all(m.topic == "trader/mq1/forecast/SOL-USDT" for m in events if "/forecast/" in m.topic)
    [started] = [line for line in daemon.lines if line["event"] == "starting"]
    assert started["quote_source"] == "modelled"
    # In order: tick by tick, and inside a tick forecast, decision, orders, fills, then P&L.
    ticked = [(m.body["at"], ORDER[k]) for m, k in zip(events, kinds, strict=True)
              if k != "pnl" or m.body["source"] == "tick"]  # fmt: skip
    assert ticked == sorted(ticked)
    # Each forecast scored once its horizon closed, on a topic of its own.
    scores = [m for m in received if "/forecast_score/" in m.topic]
    assert scores
    assert all(m.topic == "trader/mq1/forecast_score/SOL-USDT" for m in scores)
    assert {m.body["schema"] for m in scores} == {"trader.forecast_score/1"}
    assert all(m.body["model"] == "baseline" and m.body["crps"] >= 0 for m in scores)
    fill = next(m.body for m in events if m.topic.endswith("/fill"))
    assert {"fill_id", "client_order_id", "price", "amount", "fee", "side"} <= set(fill)
    assert isinstance(fill["price"], str)  # exact decimals travel as strings
    with Subscriber(broker, "trader/mq1/status") as after:
        gone = after.wait_for(is_status("offline"), "the retained goodbye")
    assert gone.retained
    assert gone.body["reason"] == "stopped"


def test_the_last_will_marks_a_killed_daemon_offline(cli, tmp_path, broker):
    with Subscriber(broker, "trader/mq2/status") as watcher:
        with running(start(cli, tmp_path, broker, "mq2")) as daemon:
            watcher.wait_for(is_status("ready"), "status ready", timeout=60)
            daemon.process.send_signal(signal.SIGKILL)
            daemon.process.wait(timeout=10)
        will = watcher.wait_for(is_status("offline", "connection lost"), "the last will")
    assert will.body["schema"] == "trader.status/1"
    with Subscriber(broker, "trader/mq2/status") as late:
        assert late.wait_for(is_status("offline", "connection lost"), "the retained will").retained


def test_a_broker_outage_never_stops_trading_drops_are_counted_and_the_link_comes_back(
    cli, tmp_path, broker
):
    ledger = tmp_path / "ledger.sqlite3"
    daemon = start(cli, tmp_path, broker, "mq3", TRADER_MQTT__QUEUE_SIZE="5",
                   TRADER_MQTT__RECONNECT_MAX_DELAY_S="1")  # fmt: skip
    with Subscriber(broker, "trader/mq3/#") as watcher, running(daemon):
        port = metrics_port(daemon)
        watcher.wait_for(is_status("ready"), "status ready", timeout=60)
        assert metric(port, "trader_mqtt_connected") == 1
        broker.kill()
        wait_until(lambda: metric(port, "trader_mqtt_connected") == 0, "the link to notice")
        booked = len(ticks(ledger))
        time.sleep(3)
        assert len(ticks(ledger)) > booked + 5, "trading stopped while the broker was away"
        assert metric(port, "trader_mqtt_dropped_total", queue="trading") > 0
        seen = len(watcher.snapshot())
        broker.start()
        wait_until(lambda: metric(port, "trader_mqtt_connected") == 1, "the link to reconnect")
        resumed = wait_until(
            lambda: [m for m in watcher.snapshot()[seen:] if m.topic.endswith("/pnl")],
            "events after the reconnect",
        )
        assert resumed[0].body["at"] > ticks(ledger)[booked - 1]
        # The status is published again on every connection (the restarted broker kept none).
        wait_until(
            lambda: any(is_status("ready")(m) for m in watcher.snapshot()[seen:]),
            "the status after the reconnect",
        )
        assert stop(daemon) == 0
    warnings = [line for line in daemon.lines if line["event"] == "mqtt unavailable"]
    assert warnings, "the outage was not logged"


def send(watcher: Subscriber, topic: str, payload: bytes) -> dict:
    """Publish a command; its answer on cmd/result."""
    before = len([m for m in watcher.snapshot() if m.topic.endswith("cmd/result")])
    watcher.publish(topic, payload)
    answers = wait_until(
        lambda: [m.body for m in watcher.snapshot() if m.topic.endswith("cmd/result")][before:],
        "the command's result",
    )
    return answers[0]


def test_only_signed_fresh_commands_are_obeyed_the_rest_are_refused_and_counted(
    cli, tmp_path, broker
):
    ledger = tmp_path / "ledger.sqlite3"
    # A window long enough to outlast a restart: the replay after it must meet the nonce.
    commands = {"TRADER_MQTT__COMMANDS_ENABLED": "true", "TRADER_MQTT__COMMAND_SECRET": SECRET,
                "TRADER_MQTT__COMMAND_WINDOW_S": "600"}  # fmt: skip
    daemon = start(cli, tmp_path, broker, "mq4", **commands)
    cmd = "trader/mq4/cmd"
    with Subscriber(broker, "trader/mq4/#") as watcher, running(daemon):
        port = metrics_port(daemon)
        watcher.wait_for(is_status("ready"), "status ready", timeout=60)

        unsigned = json.dumps({"command": "pause", "timestamp": int(time.time()),
                               "nonce": "0123456789ab"}).encode()  # fmt: skip
        assert send(watcher, cmd, unsigned)["result"] == "malformed"
        forged = sign("not-the-secret-at-all-0000", "pause", topic=cmd, timestamp=int(time.time()))
        assert send(watcher, cmd, forged)["result"] == "bad_signature"
        assert metric(port, "trader_trading_state", state="active") == 1

        pause = sign(SECRET, "pause", topic=cmd, timestamp=int(time.time()))
        assert send(watcher, cmd, pause)["result"] == "accepted"
        assert metric(port, "trader_trading_state", state="halted") == 1
        watcher.wait_for(
            lambda m: is_status("ready")(m) and m.body.get("trading_state") == "halted",
            "the status saying halted",
        )
        booked = len(ticks(ledger))
        assert send(watcher, cmd, pause)["result"] == "replayed"  # captured and sent again
        resume = sign(SECRET, "resume", topic=cmd, timestamp=int(time.time()))
        assert send(watcher, cmd, resume)["result"] == "accepted"
        assert metric(port, "trader_trading_state", state="active") == 1
        assert len(ticks(ledger)) > booked  # ticking all along

        for result in ("malformed", "bad_signature", "replayed", "accepted"):
            counted = metric(port, "trader_mqtt_commands_total", command="pause", result=result)
            assert counted == 1, result
        assert stop(daemon) == 0
    assert SECRET not in json.dumps(daemon.lines)

    # Restarted on the same ledger: the captured pause is still refused, its nonce kept there.
    again = start(cli, tmp_path, broker, "mq4", **commands)
    with Subscriber(broker, "trader/mq4/#") as watcher, running(again):
        watcher.wait_for(is_status("ready"), "status ready after the restart", timeout=60)
        assert send(watcher, cmd, pause)["result"] == "replayed"
        assert stop(again) == 0


def test_tls_and_credentials_are_used_and_a_wrong_password_never_stops_trading(cli, tmp_path):
    user = Credentials("trader", "broker-password-4242")
    server = Mosquitto(tmp_path / "tls-broker", credentials=user, tls=make_tls(tmp_path / "pki"))
    server.start()
    try:
        wrong_password = "not-the-password"
        with running(start(cli, tmp_path / "wrong", server, "mq5",
                           TRADER_MQTT__PASSWORD=wrong_password)) as wrong:  # fmt: skip
            port = metrics_port(wrong)
            wait_until(lambda: len(ticks(tmp_path / "wrong" / "ledger.sqlite3")) > 5, "ticks")
            assert metric(port, "trader_mqtt_connected") == 0
            assert stop(wrong) == 0
        assert wrong_password not in json.dumps(wrong.lines)
        assert any(line["event"] == "mqtt unavailable" for line in wrong.lines)

        with (
            Subscriber(server, "trader/mq6/status") as watcher,
            running(start(cli, tmp_path / "right", server, "mq6")) as right,
        ):
            port = metrics_port(right)
            watcher.wait_for(is_status("ready"), "status ready over TLS", timeout=60)
            assert metric(port, "trader_mqtt_connected") == 1
            assert stop(right) == 0
        assert user.password not in json.dumps(right.lines)
    finally:
        server.kill()


@pytest.fixture(autouse=True)
def _dirs(tmp_path):
    for name in ("wrong", "right"):
        (tmp_path / name).mkdir()
