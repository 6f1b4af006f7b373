"""A real mosquitto broker on a loopback port of the test's own, which a test may kill and start
again on the same port; optionally with a password file and TLS (a CA made for the test). And a
subscriber that records what it receives, reconnecting as a dashboard would."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho

from tests.conftest import missing_binary
from tests.integration.loopback import free_port


@dataclass
class Credentials:
    username: str
    password: str


@dataclass
class Tls:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> Tls:
    """A CA, and a certificate for 127.0.0.1 signed by it (openssl)."""
    if shutil.which("openssl") is None:
        missing_binary("openssl")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (
        directory / name for name in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out",
            str(ca), "-days", "2", "-subj", "/CN=trader test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return Tls(ca, cert, key)


@dataclass
class Mosquitto:
    directory: Path
    credentials: Credentials | None = None
    tls: Tls | None = None
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        if shutil.which("mosquitto") is None:
            missing_binary("mosquitto")
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = [f"listener {self.port} 127.0.0.1", "persistence false", "log_dest stderr"]
        # Started as root, mosquitto would drop to its own user, who cannot read the test's
        # private tmp directory: stay the user who runs the tests.
        lines.append(f"user {pwd.getpwuid(os.getuid()).pw_name}")
        if self.credentials is not None:
            if shutil.which("mosquitto_passwd") is None:
                missing_binary("mosquitto_passwd")
            passwords = self.directory / "passwords"
            passwords.touch()
            subprocess.run(
                ["mosquitto_passwd", "-b", str(passwords), self.credentials.username,
                 self.credentials.password],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        if self.tls is not None:
            lines += [
                f"cafile {self.tls.ca}", f"certfile {self.tls.cert}", f"keyfile {self.tls.key}"
            ]  # fmt: skip
        self.config = self.directory / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")
        self.log = self.directory / "mosquitto.log"

    def start(self) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                ["mosquitto", "-c", str(self.config)], stdout=sink, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"mosquitto exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"mosquitto did not listen on {self.port}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def env(self) -> dict[str, str]:
        """The daemon's settings for this broker."""
        env = {
            "TRADER_MQTT__ENABLED": "true",
            "TRADER_MQTT__HOST": "127.0.0.1",
            "TRADER_MQTT__PORT": str(self.port),
        }
        if self.credentials is not None:
            env |= {
                "TRADER_MQTT__USERNAME": self.credentials.username,
                "TRADER_MQTT__PASSWORD": self.credentials.password,
            }
        if self.tls is not None:
            env |= {"TRADER_MQTT__TLS": "true", "TRADER_MQTT__CA_FILE": str(self.tls.ca)}
        return env


@dataclass
class Received:
    topic: str
    body: dict[str, Any]
    retained: bool


class Subscriber:
    """Records every message under `topic` (a wildcard), reconnecting when the broker returns."""

    def __init__(self, broker: Mosquitto, topic: str) -> None:
        self.messages: list[Received] = []
        self._lock = threading.Lock()
        self._topic = topic
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        if broker.credentials is not None:
            self.client.username_pw_set(broker.credentials.username, broker.credentials.password)
        if broker.tls is not None:
            self.client.tls_set(ca_certs=str(broker.tls.ca))
        self.client.reconnect_delay_set(0.1, 0.5)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", broker.port, keepalive=10)
        self.client.loop_start()

    def _on_connect(self, client: paho.Client, *args: Any) -> None:
        client.subscribe(self._topic, qos=1)

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        try:
            body = json.loads(message.payload)
        except ValueError:
            body = {"raw": message.payload.decode(errors="replace")}
        with self._lock:
            self.messages.append(Received(message.topic, body, bool(message.retain)))

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.messages)

    def wait_for(self, predicate: Any, what: str, timeout: float = 30.0) -> Received:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.snapshot():
                if predicate(message):
                    return message
            time.sleep(0.05)
        seen = [(m.topic, m.body.get("state")) for m in self.snapshot()[-20:]]
        raise AssertionError(f"no message: {what}; last seen {seen}")

    def publish(self, topic: str, payload: bytes) -> None:
        self.client.publish(topic, payload, qos=1).wait_for_publish(timeout=5)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
