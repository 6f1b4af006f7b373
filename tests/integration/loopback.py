"""Loopback helpers for tests that run servers: a free port, and a plain HTTP GET."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def free_port() -> int:
    """A port nothing listens on now (tests run side by side: never a fixed one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
