"""The systemd notify protocol against a datagram socket the test opens, as systemd would."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from pathlib import Path

import pytest

from trader.daemon.notify import SystemdNotifier


def listen(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + address[1:] if address.startswith("@") else address)
    sock.settimeout(5)
    return sock


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


@pytest.fixture(params=["path", "abstract"])
def address(request, tmp_path: Path) -> str:
    if request.param == "path":
        return str(tmp_path / "notify.sock")
    return f"@trader-test-{uuid.uuid4().hex}"


def test_ready_status_and_stopping_arrive_as_datagrams(address):
    with listen(address) as sock:
        notifier = SystemdNotifier.from_environment({"NOTIFY_SOCKET": address})
        assert notifier.enabled
        notifier.ready("ready: 2 symbols")
        assert received(sock) == ["READY=1", "STATUS=ready: 2 symbols", f"MAINPID={os.getpid()}"]
        notifier.status("starting:\n loading   the model")
        assert received(sock) == ["STATUS=starting: loading the model"]
        notifier.stopping()
        assert received(sock) == ["STOPPING=1", "STATUS=stopping"]
        notifier.close()


async def test_the_watchdog_pings_at_half_the_interval(address):
    with listen(address) as sock:
        sock.setblocking(False)
        notifier = SystemdNotifier.from_environment(
            {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": str(os.getpid())}
        )
        assert notifier.watchdog_interval_s == pytest.approx(0.1)
        pinging = asyncio.create_task(notifier.watchdog())
        await asyncio.sleep(0.35)
        pinging.cancel()
        pings = []
        while True:
            try:
                pings.append(sock.recv(64).decode())
            except BlockingIOError:
                break
        assert set(pings) == {"WATCHDOG=1"}
        assert 3 <= len(pings) <= 5
        notifier.close()


def test_without_notify_socket_or_for_another_pid_nothing_is_sent():
    quiet = SystemdNotifier.from_environment({})
    assert not quiet.enabled
    assert quiet.send("READY=1") is False
    other = SystemdNotifier.from_environment(
        {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
    )
    assert other.watchdog_interval_s is None


def test_a_socket_that_went_away_is_a_warning_not_a_crash(tmp_path):
    notifier = SystemdNotifier(str(tmp_path / "gone.sock"))
    assert notifier.send("READY=1") is False
