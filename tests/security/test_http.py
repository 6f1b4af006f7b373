"""The HTTP endpoint against slow clients: a connection that sends nothing, or half a request
and then nothing, is closed after the idle timeout (it held its socket for ever before), and
the endpoint answers everyone else meanwhile."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from trader.telemetry.http import HttpEndpoint
from trader.telemetry.readiness import Readiness

IDLE_S = 0.5


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """How long the server took to close this connection; fails past `seconds`."""
    started = time.monotonic()
    async with asyncio.timeout(seconds):
        while await reader.read(1024):
            pass
    return time.monotonic() - started


async def test_idle_and_half_open_connections_are_closed_and_others_are_answered():
    endpoint = HttpEndpoint(
        CollectorRegistry(), Readiness(), host="127.0.0.1", port=0, idle_timeout_s=IDLE_S
    )
    await endpoint.start()
    try:
        silent = await asyncio.open_connection("127.0.0.1", endpoint.port)
        slow = await asyncio.open_connection("127.0.0.1", endpoint.port)
        slow[1].write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never ends
        await slow[1].drain()
        reader, writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.startswith(b"HTTP/1.1 200")
        assert answer.endswith(b"ok\n")
        for stream, _ in (silent, slow):
            assert await closed_within(stream, 10 * IDLE_S) < 10 * IDLE_S
        for _, stream_writer in (silent, slow, (reader, writer)):
            stream_writer.close()
    finally:
        await endpoint.stop()
