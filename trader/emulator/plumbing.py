"""What every emulated venue's HTTP side shares: faults applied to a request (before or after
it took effect), and the control endpoints under `/__emulator__/` (faults, the request log,
pausing the market's clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from aiohttp import web

from trader.emulator.faults import Fault, FaultPlan
from trader.emulator.wire import ms


async def apply_fault(
    fault: Fault, request: web.Request, error_body: str
) -> web.StreamResponse | None:
    """The faulty answer, or None when the request should then be answered normally.
    `error_body`: what a "status" fault answers without a body of its own (the venue's
    internal-error JSON)."""
    if fault.kind == "delay":
        await asyncio.sleep(fault.delay_s)
        return None
    if fault.kind == "status":
        headers = {"Retry-After": str(fault.retry_after_s)} if fault.retry_after_s else None
        return web.Response(
            text=fault.body or error_body,
            status=fault.status,
            headers=headers,
            content_type="application/json",
        )
    if fault.kind == "malformed":
        body = fault.body if fault.body is not None else "<html><body>502 Bad Gateway</body>"
        return web.Response(text=body, status=200, content_type="application/json")
    # "drop": close the connection without an answer.
    if request.transport is not None:
        request.transport.close()
    raise asyncio.CancelledError


@dataclass
class Control:
    """The emulator's control side: faults to inject, every request seen, the clock."""

    faults: FaultPlan
    clock: Callable[[], datetime]
    requests: list[str] = field(default_factory=list)  # path?query of every request, in order
    on_clock: Callable[[bool], None] | None = None  # pauses the market's clock (the sandbox)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/__emulator__/faults", self.add_faults)
        app.router.add_delete("/__emulator__/faults", self.clear_faults)
        app.router.add_get("/__emulator__/requests", self.request_log)
        app.router.add_post("/__emulator__/clock", self.set_clock)

    async def add_faults(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.faults.add(*(Fault.from_json(item) for item in body))
        return web.json_response({"faults": len(self.faults.faults)})

    async def clear_faults(self, request: web.Request) -> web.Response:
        self.faults.clear()
        return web.json_response({"faults": 0})

    async def request_log(self, request: web.Request) -> web.Response:
        return web.json_response(self.requests)

    async def set_clock(self, request: web.Request) -> web.Response:
        if self.on_clock is None:
            return web.json_response({"error": "this market's clock cannot pause"}, status=400)
        paused = bool((await request.json()).get("paused"))
        self.on_clock(paused)
        return web.json_response({"paused": paused, "now": ms(self.clock())})
