"""The daemon's HTTP endpoint (loopback by default): /metrics, /healthz, /readyz.

A connection that has not sent a whole request within `idle_timeout_s` is closed, from the
moment it opens (aiohttp >= 3.14.4 starts its keep-alive timer there; before, a client that
connected and sent nothing, or half a request, held its connection for ever)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from trader.telemetry.readiness import Readiness, Verdict


class HttpEndpoint:
    def __init__(
        self,
        registry: CollectorRegistry,
        readiness: Readiness,
        *,
        host: str,
        port: int,
        idle_timeout_s: float = 30.0,
        on_verdict: Callable[[Verdict], None] = lambda verdict: None,
    ) -> None:
        self.registry = registry
        self.readiness = readiness
        self.host = host
        self.port = port  # the bound port once started (the setting may be 0: any free one)
        self.idle_timeout_s = idle_timeout_s
        self._runner: web.AppRunner | None = None
        self._on_verdict = on_verdict

    def _judge(self) -> Verdict:
        verdict = self.readiness.evaluate()
        self._on_verdict(verdict)
        return verdict

    async def _metrics(self, request: web.Request) -> web.Response:
        self._judge()  # trader_ready is current in every scrape
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        verdict = self._judge()
        return web.Response(
            text=json.dumps(verdict.as_json(), indent=1) + "\n",
            status=200 if verdict.ready else 503,
            content_type="application/json",
        )

    async def start(self) -> None:
        """Bind, or raise OSError (the port is taken, the address is not ours)."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=self.idle_timeout_s
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await self.stop()
            raise
        server = site._server  # aiohttp exposes the bound sockets only here
        if isinstance(server, asyncio.Server) and server.sockets:
            self.port = int(server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
