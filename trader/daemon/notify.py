"""systemd's notify protocol, spoken directly: one datagram per message to $NOTIFY_SOCKET.

`Type=notify` units learn from it when the daemon is ready (READY=1), what it is doing
(STATUS=...), that it is stopping (STOPPING=1), and that its event loop still turns
(WATCHDOG=1 at half of WatchdogSec=, which systemd passes as $WATCHDOG_USEC). A path starting
with '@' is in the abstract namespace. Without $NOTIFY_SOCKET every call does nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping

from trader.logging import get_logger


class SystemdNotifier:
    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self._address: str | bytes | None = None
        if address:
            # Abstract namespace: a leading NUL instead of '@'.
            self._address = "\0" + address[1:] if address.startswith("@") else address
        self.watchdog_interval_s = watchdog_usec / 2e6 if watchdog_usec else None
        self._socket: socket.socket | None = None
        self._log = get_logger("trader.systemd")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SystemdNotifier:
        env = os.environ if environ is None else environ
        usec: int | None = None
        raw = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        # The watchdog is ours only if systemd meant this process (not a parent shell's).
        if raw.isdigit() and int(raw) > 0 and (not pid or pid == str(os.getpid())):
            usec = int(raw)
        return cls(env.get("NOTIFY_SOCKET") or None, usec)

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *lines: str) -> bool:
        """Send `KEY=value` lines as one datagram; False (logged once) if it could not go."""
        if self._address is None:
            return False
        message = "\n".join(lines).encode()
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._socket.setblocking(False)
            self._socket.sendto(message, self._address)
        except OSError as error:
            self._log.warning("systemd notify failed", error=str(error))
            return False
        return True

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={_line(status)}", f"MAINPID={os.getpid()}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={_line(status)}")

    def stopping(self, status: str = "stopping") -> None:
        self.send("STOPPING=1", f"STATUS={_line(status)}")

    def extend_start(self, seconds: float) -> None:
        """Ask for more start-up time (a long model load or download)."""
        self.send(f"EXTEND_TIMEOUT_USEC={int(seconds * 1e6)}")

    async def watchdog(self) -> None:
        """WATCHDOG=1 at half the interval, from the event loop itself: if the loop stalls,
        the pings stop and systemd restarts the service. Runs until cancelled."""
        if self.watchdog_interval_s is None:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_interval_s)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _line(text: str) -> str:
    return " ".join(text.split())[:200]
