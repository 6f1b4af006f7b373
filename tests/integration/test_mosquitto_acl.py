"""The compose stack's Mosquitto as committed (deploy/mosquitto/mosquitto.conf and acl; only the
port, the file paths and the user it runs as moved into the test's directory), on the real
broker, with users made by mosquitto_passwd as deploy/secrets/README.md says: anonymous and
wrong passwords refused; the daemon's user publishes its events and reads its command topic but
can neither command itself nor read another instance's topics; the operator reads events and
sends commands; the compose healthcheck's own command passes; and a real daemon logs in with
those credentials, its events arrive and it answers a signed command.

MQTT v5 clients: on v5 the broker answers a refused publish with the reason code "not
authorized" in its PUBACK instead of dropping it unsaid. A message that must not arrive is
checked by order: a message sent after it (once the broker has acknowledged both) arrives, so
the refused one would have arrived first."""

from __future__ import annotations

import json
import os
import pwd
import queue
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
import yaml
from paho.mqtt.reasoncodes import ReasonCode

from tests.conftest import missing_binary
from tests.deploy_queries import DEPLOY
from tests.integration.daemon import daemon_env, recording, running, stop, wait_until
from tests.integration.mosquitto import Credentials, Mosquitto, Subscriber
from trader.telemetry.commands import sign

pytestmark = pytest.mark.integration

CONF = DEPLOY / "mosquitto" / "mosquitto.conf"
ACL = DEPLOY / "mosquitto" / "acl"
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
PASSWORDS = {
    "trader": "daemon-password-0001",
    "operator": "operator-password-0002",
    "healthcheck": "healthcheck-password-0003",
    # A second daemon, instance "other", given its block as the acl file's comment says.
    "trader-other": "other-password-0004",
}
SECRET = "acl-test-command-secret-0123456789"
NOT_AUTHORIZED = 135  # MQTT v5 reason code 0x87


def passwd_file(path: Path) -> None:
    """The users, made as deploy/secrets/README.md makes them."""
    if shutil.which("mosquitto_passwd") is None:
        missing_binary("mosquitto_passwd")
    path.touch()
    for user, password in PASSWORDS.items():
        subprocess.run(
            ["mosquitto_passwd", "-b", str(path), user, password],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip


def acl_with_a_second_instance(path: Path) -> None:
    """The committed ACL, plus the daemon's block copied for instance "other"."""
    text = ACL.read_text()
    block = re.search(r"^user trader\n(?:topic .*\n)+", text, flags=re.MULTILINE)
    assert block is not None, "the acl file has no block for user trader"
    other = block.group(0).replace("user trader", "user trader-other")
    path.write_text(text + "\n" + other.replace("/default/", "/other/"))


def committed_broker(directory: Path) -> Mosquitto:
    """A Mosquitto on a free loopback port running the committed configuration."""
    broker = Mosquitto(directory)  # its port, start and kill; its own config is replaced
    passwd_file(directory / "passwords")
    acl_with_a_second_instance(directory / "acl")
    (directory / "data").mkdir()
    moved = {
        "listener": f"{broker.port} 127.0.0.1",
        "password_file": str(directory / "passwords"),
        "acl_file": str(directory / "acl"),
        "persistence_location": f"{directory / 'data'}/",
    }
    lines = []
    for line in CONF.read_text().splitlines():
        key = line.split(" ", 1)[0]
        lines.append(f"{key} {moved.pop(key)}" if key in moved else line)
    assert not moved, f"mosquitto.conf no longer sets {sorted(moved)}"
    # Started as root, mosquitto would drop to its own user, who cannot read the test's files.
    lines.append(f"user {pwd.getpwuid(os.getuid()).pw_name}")
    broker.config.write_text("\n".join(lines) + "\n")
    return broker


class Client:
    """One user's MQTT v5 connection, recording what it receives."""

    def __init__(self, broker: Mosquitto, user: str | None, password: str | None = None) -> None:
        self.connack: queue.Queue[ReasonCode] = queue.Queue()
        self.received: list[tuple[str, bytes]] = []
        self._acks: dict[int, ReasonCode] = {}
        self._granted: dict[int, list[ReasonCode]] = {}
        self._changed = threading.Condition()
        self.paho = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
        if user is not None:
            self.paho.username_pw_set(user, password)
        self.paho.on_connect = lambda c, u, flags, code, props: self.connack.put(code)
        self.paho.on_message = self._on_message
        self.paho.on_publish = self._on_publish
        self.paho.on_subscribe = self._on_subscribe
        self.paho.connect("127.0.0.1", broker.port, keepalive=10)
        self.paho.loop_start()

    def _on_message(self, client: Any, userdata: Any, message: paho.MQTTMessage) -> None:
        with self._changed:
            self.received.append((message.topic, message.payload))
            self._changed.notify_all()

    def _on_publish(self, client: Any, userdata: Any, mid: int, code: Any, props: Any) -> None:
        with self._changed:
            self._acks[mid] = code
            self._changed.notify_all()

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        with self._changed:
            self._granted[mid] = list(codes)
            self._changed.notify_all()

    def _await(self, found: Any, what: str) -> Any:
        with self._changed:
            if not self._changed.wait_for(found, timeout=10):
                raise AssertionError(f"no {what}")
            return found()

    def login(self) -> ReasonCode:
        return self.connack.get(timeout=10)

    def publish(self, topic: str, payload: bytes = b"{}") -> ReasonCode:
        """Publish at QoS 1; the broker's answer in its PUBACK."""
        mid = self.paho.publish(topic, payload, qos=1).mid
        return self._await(lambda: self._acks.get(mid), f"PUBACK for {topic}")  # type: ignore[no-any-return]

    def subscribe(self, topic: str) -> ReasonCode:
        _, mid = self.paho.subscribe(topic, qos=1)
        [granted] = self._await(lambda: self._granted.get(mid), f"SUBACK for {topic}")
        return granted  # type: ignore[no-any-return]

    def wait_for(self, topic: str) -> list[str]:
        """Every topic received up to and including the first message on `topic`."""
        self._await(lambda: any(t == topic for t, _ in self.received), f"message on {topic}")
        with self._changed:
            topics = [t for t, _ in self.received]
        return topics[: topics.index(topic) + 1]

    def close(self) -> None:
        self.paho.loop_stop()
        self.paho.disconnect()


@pytest.fixture
def broker(tmp_path):
    server = committed_broker(tmp_path / "broker")
    server.start()
    yield server
    server.kill()


@pytest.fixture
def clients(broker):
    opened: list[Client] = []

    def login(user: str) -> Client:
        client = Client(broker, user, PASSWORDS[user])
        assert not client.login().is_failure, user
        opened.append(client)
        return client

    yield login
    for client in opened:
        client.close()


@pytest.mark.parametrize(
    ("user", "password"),
    [(None, None), ("trader", "not-its-password"), ("nobody", "daemon-password-0001")],
)
def test_anonymous_clients_and_wrong_passwords_are_refused(broker, user, password):
    client = Client(broker, user, password)
    try:
        code = client.login()
    finally:
        client.close()
    assert code.is_failure
    assert code.getName() in {"Not authorized", "Bad user name or password"}


def test_the_daemon_publishes_its_events_and_the_operator_reads_them(clients):
    daemon, operator = clients("trader"), clients("operator")
    assert not operator.subscribe("trader/#").is_failure
    events = ["status", "heartbeat", "forecast/SOL-USDT", "forecast_score/SOL-USDT",
              "decision", "order", "fill", "pnl", "cmd/result"]  # fmt: skip
    for event in events:
        assert daemon.publish(f"trader/default/{event}").value == 0, event
    seen = operator.wait_for("trader/default/cmd/result")
    assert seen == [f"trader/default/{event}" for event in events]


def test_the_daemon_reads_its_commands_and_cannot_send_one(clients):
    daemon, operator = clients("trader"), clients("operator")
    assert not daemon.subscribe("trader/default/cmd").is_failure
    assert not operator.subscribe("trader/+/cmd").is_failure
    # The daemon's own credentials cannot command it (nor another instance).
    assert daemon.publish("trader/default/cmd", b"from-the-daemon").value == NOT_AUTHORIZED
    assert daemon.publish("trader/other/cmd", b"from-the-daemon").value == NOT_AUTHORIZED
    assert operator.publish("trader/default/cmd", b"from-the-operator").value == 0
    assert daemon.wait_for("trader/default/cmd") == ["trader/default/cmd"]
    assert [p for _, p in daemon.received] == [b"from-the-operator"]
    assert [p for _, p in operator.received] == [b"from-the-operator"]


def test_the_daemon_cannot_read_or_write_another_instances_topics(clients):
    daemon, other, operator = clients("trader"), clients("trader-other"), clients("operator")
    daemon.subscribe("trader/#")  # whatever the SUBACK says, no message of another may arrive
    daemon.subscribe("trader/other/#")
    assert not operator.subscribe("trader/#").is_failure
    assert daemon.publish("trader/other/status").value == NOT_AUTHORIZED
    # The other instance's events and a command to it: the operator sees them, the daemon not.
    assert other.publish("trader/other/status").value == 0
    assert other.publish("trader/other/fill").value == 0
    assert operator.publish("trader/other/cmd").value == 0
    assert operator.publish("trader/default/cmd", b"marker").value == 0
    assert daemon.wait_for("trader/default/cmd") == ["trader/default/cmd"]
    assert operator.wait_for("trader/default/cmd") == [
        "trader/other/status", "trader/other/fill", "trader/other/cmd", "trader/default/cmd"
    ]  # fmt: skip


def test_the_operator_cannot_publish_events_and_the_healthcheck_reads_only_sys(clients):
    operator, health = clients("operator"), clients("healthcheck")
    assert operator.publish("trader/default/fill").value == NOT_AUTHORIZED
    assert operator.publish("trader/default/status").value == NOT_AUTHORIZED
    assert health.publish("trader/default/cmd").value == NOT_AUTHORIZED
    health.subscribe("trader/#")
    assert not health.subscribe("$SYS/broker/uptime").is_failure
    assert operator.publish("trader/default/cmd", b"unseen").value == 0
    # $SYS/broker/uptime is retained: it arrives on subscribing, or at the next $SYS update.
    assert health.wait_for("$SYS/broker/uptime") == ["$SYS/broker/uptime"]


def healthcheck_command(broker: Mosquitto, password_file: Path) -> str:
    """compose.yaml's mosquitto healthcheck, as the container's shell runs it, on this port."""
    [kind, command] = COMPOSE["services"]["mosquitto"]["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    command = command.replace("$$", "$")  # compose's escape, undone as compose does
    secret = "/run/secrets/mosquitto_healthcheck_password"
    assert secret in command
    assert "-p 1883 " in command
    return command.replace(secret, str(password_file)).replace("-p 1883 ", f"-p {broker.port} ")


@pytest.mark.parametrize(("password", "healthy"), [(PASSWORDS["healthcheck"], True), ("x", False)])
def test_the_compose_healthcheck_passes_with_its_password_only(broker, tmp_path, password, healthy):
    if shutil.which("mosquitto_sub") is None:
        missing_binary("mosquitto_sub")
    secret = tmp_path / "mosquitto_healthcheck_password"
    secret.write_text(password)
    result = subprocess.run(
        ["sh", "-c", healthcheck_command(broker, secret)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (result.returncode == 0) == healthy, result.stdout + result.stderr


def test_a_daemon_with_the_documented_credentials_publishes_and_obeys(cli, tmp_path, broker):
    """The compose stack's daemon settings (compose.yaml) on this broker."""
    compose_env = COMPOSE["services"]["trader"]["environment"]
    instance, prefix = compose_env["TRADER_INSTANCE"], compose_env["TRADER_MQTT__TOPIC_PREFIX"]
    env = daemon_env(
        tmp_path,
        **broker.env(),
        TRADER_INSTANCE=instance,
        TRADER_MQTT__TOPIC_PREFIX=prefix,
        TRADER_MQTT__USERNAME=compose_env["TRADER_MQTT__USERNAME"],
        TRADER_MQTT__PASSWORD=PASSWORDS[compose_env["TRADER_MQTT__USERNAME"]],
        TRADER_MQTT__COMMANDS_ENABLED="true",
        TRADER_MQTT__COMMAND_SECRET=SECRET,
    )
    base = f"{prefix}/{instance}"
    broker.credentials = Credentials("operator", PASSWORDS["operator"])  # the watcher's login
    daemon = cli.start("run", "--replay", str(recording(tmp_path, 48 + 600)), "--speed", "36000",
                       env=env)  # fmt: skip
    with Subscriber(broker, f"{base}/#") as watcher, running(daemon):

        def events(kind: str) -> list[Any]:
            return [m for m in watcher.snapshot() if m.topic == f"{base}/{kind}"]

        watcher.wait_for(lambda m: m.topic == f"{base}/status" and m.body["state"] == "ready",
                         "status ready", timeout=60)  # fmt: skip
        wait_until(lambda: events("fill"), "a fill")
        pause = sign(SECRET, "pause", topic=f"{base}/cmd", timestamp=int(time.time()))
        watcher.publish(f"{base}/cmd", pause)
        [answer] = wait_until(lambda: events("cmd/result"), "the command's result")
        assert answer.body["result"] == "accepted"
        assert stop(daemon) == 0
        watcher.wait_for(lambda m: m.topic == f"{base}/status" and m.body["state"] == "offline",
                         "the goodbye status")  # fmt: skip
    refused = [line for line in daemon.lines if "not authori" in json.dumps(line).lower()]
    assert not refused, refused
