"""What every emulated venue's HTTP side shares: a request admitted (logged and read whole),
the fault planned for it applied before or after it took effect, the venue's refusals
answered; the control endpoints under `/__emulator__/` (faults, the request log, pausing the
market's clock); and the account dump the control side shows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from aiohttp import web

from trader.emulator.faults import Fault, FaultPlan
from trader.emulator.venue import Account, Venue, VenueOrder, VenueTrade
from trader.emulator.wire import ms

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def accounts_state(
    venue: Venue,
    number: Callable[[Decimal], object],
    order: Callable[[Account, VenueOrder], dict[str, Any]],
    trade: Callable[[Account, VenueTrade], dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Every account's balances, orders and trades, as the venue writes them (the control
    side's `/__emulator__/account`), brought up to now first."""
    state = {}
    for key, account in venue.accounts.items():
        venue.sync(account)
        state[key] = {
            "balances": {
                asset: {
                    "free": number(b.free),
                    "locked": number(b.locked),
                    "total": number(b.total),
                }
                for asset, b in sorted(account.balances.items())
            },
            "orders": [order(account, o) for o in account.orders.values()],
            "trades": [trade(account, t) for t in account.trades],
        }
    return state


async def apply_fault(
    fault: Fault, request: web.Request, error_body: str
) -> web.StreamResponse | None:
    """The faulty answer, or None when the request should then be answered normally.
    `error_body`: what a "status" fault answers without a body of its own (the venue's
    internal-error JSON)."""
    if fault.kind == "delay":
        await asyncio.sleep(fault.delay_s)
        return None
    if fault.kind == "hold":
        with contextlib.suppress(TimeoutError):  # held its longest: answered as usual then
            await asyncio.wait_for(fault.released.wait(), fault.delay_s or None)
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

    async def admit(self, request: web.Request) -> bool:
        """Whether `request` is one for the venue rather than a control one; it is then logged
        and read whole first: a venue receives the whole request before anything else happens
        to it (a client that gives up while it waits changes nothing)."""
        if request.path.startswith("/__emulator__/"):
            return False
        self.requests.append(request.path_qs)
        if request.can_read_body:
            await request.read()
        return True

    async def answer(
        self,
        request: web.Request,
        handler: Handler,
        error_body: str,
        refused: Callable[[Exception], web.Response | None],
    ) -> web.StreamResponse:
        """The handler's answer, with the fault planned for this request applied before it
        took effect or after (`error_body`: see `apply_fault`). `refused` answers an exception
        the handler raised as the venue's error, or returns None for one it does not know."""
        fault = self.faults.take(request.path, request.method)
        if fault is not None and not fault.after:
            early = await apply_fault(fault, request, error_body)
            if early is not None:
                return early
        try:
            response = await handler(request)
        except Exception as error:
            answered = refused(error)
            if answered is None:
                raise
            return answered
        if fault is not None and fault.after:
            late = await apply_fault(fault, request, error_body)
            if late is not None:
                return late
        return response

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
