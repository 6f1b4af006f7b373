"""Alpaca's trade-updates websocket (`/stream`), as the emulator serves it to alpaca-py's
`TradingStream`, held to Alpaca's streaming documentation
(https://docs.alpaca.markets/docs/websocket-streaming; the example messages are kept in
tests/data/alpaca/recorded/):

- The client authenticates with `{"action": "authenticate", "data": {"key_id", "secret_key"}}`
  and is answered on the `authorization` stream, `authorized` or `unauthorized`; a `listen`
  before that is answered `unauthorized` with `"action": "listen"`. `listen` is acknowledged on
  the `listening` stream with the streams granted (only `trade_updates` exists).
- Every change of an order of the authenticated account becomes a `trade_updates` message:
  `new`, `fill`, `partial_fill`, `canceled`, `expired`, with the REST order object.
- Frames are binary, as the docs say the paper environment's are (alpaca-py reads either);
  JSON only: alpaca-py never asks for MessagePack.
- While a client listens, the account's resting orders meet the bars that closed every
  `sync_every_s`: elsewhere the emulator matches lazily, when the account is looked at, and a
  stream must hear a fill without anybody asking.
- `drop()` closes every connection and `refusing` turns new ones away (HTTP 503): a stream
  that goes down, for tests of the fallback to polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from trader.emulator.alpaca_wire import ORDER_NAMESPACE, rfc3339, text
from trader.emulator.venue import Account, Venue, VenueOrder, VenueTrade

PATH = "/stream"
_EVENTS = {"NEW": "new", "CANCELED": "canceled", "EXPIRED": "expired"}


def authorization(status: str, action: str) -> dict[str, Any]:
    return {"stream": "authorization", "data": {"status": status, "action": action}}


def trade_update(
    order: VenueOrder,
    order_json: dict[str, Any],
    trade: VenueTrade | None,
    position: Any,
    now: Any,
) -> dict[str, Any] | None:
    """The `trade_updates` message for a change of `order` (None for a change Alpaca does not
    send, e.g. the FILLED end that its fill event already told).

    `timestamp` is on every event: the docs list it only for the events where it means
    something, but alpaca-py's `TradeUpdate` requires it, so a message without one would
    break the SDK's parsed mode. `price` and `qty` are the execution's: the docs' example
    (one execution) cannot tell them from the order's average, and alpaca-py names them with
    `execution_id`, per execution."""
    # The stream's order is the REST one plus `cancel_requested_at` (the docs' stream example
    # has it; their REST order sample does not).
    order_json = {"cancel_requested_at": None, **order_json}
    if trade is None:
        event = _EVENTS.get(order.status)
        if event is None:
            return None
        data: dict[str, Any] = {"event": event, "order": order_json, "timestamp": rfc3339(now)}
    else:
        data = {
            "event": "fill" if order.status == "FILLED" else "partial_fill",
            "execution_id": str(uuid.uuid5(ORDER_NAMESPACE, f"{trade.symbol}:{trade.trade_id}")),
            "order": order_json,
            "position_qty": text(position),
            "price": text(trade.price),
            "qty": text(trade.qty),
            "timestamp": rfc3339(trade.time),
        }
    return {"stream": "trade_updates", "data": data}


@dataclass(eq=False)
class _Client:
    ws: web.WebSocketResponse
    outbox: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    account: Account | None = None
    listening: bool = False


@dataclass
class TradeStream:
    venue: Venue
    secrets: dict[str, str]  # key id -> secret key
    order_json: Callable[[VenueOrder], dict[str, Any]]
    sync_every_s: float = 0.05
    refusing: bool = False  # turn new connections away (a stream that is down)
    sent: int = 0  # trade updates sent, for tests
    connections: int = 0  # websockets opened, for tests
    _clients: set[_Client] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.venue.on_change.append(self._heard)

    def routes(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.handle)
        # aiohttp waits for open handlers when it stops: websockets are closed first.
        app.on_shutdown.append(self._shutdown)

    async def _shutdown(self, app: web.Application) -> None:
        await self.drop()

    @property
    def listening(self) -> int:
        return sum(1 for c in self._clients if c.listening)

    async def drop(self) -> int:
        """Close every connection (as a restart at Alpaca would); how many there were."""
        clients = list(self._clients)
        for client in clients:
            await client.ws.close(code=1012, message=b"service restart")
        return len(clients)

    def _heard(self, account: Account, order: VenueOrder, trade: VenueTrade | None) -> None:
        listeners = [c for c in self._clients if c.listening and c.account is account]
        if not listeners:
            return
        instrument = self.venue.instrument(order.symbol)
        held = account.balances.get(instrument.base)
        position = held.total if held is not None else 0
        message = trade_update(order, self.order_json(order), trade, position, self.venue.clock())
        if message is None:
            return
        for client in listeners:
            client.outbox.put_nowait(message)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.refusing:
            return web.Response(status=503, text="stream unavailable")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        client = _Client(ws)
        self._clients.add(client)
        writer = asyncio.ensure_future(self._write(client))
        syncing: asyncio.Future[None] | None = None
        try:
            async for message in ws:
                if message.type not in {WSMsgType.TEXT, WSMsgType.BINARY}:
                    continue
                try:
                    body = json.loads(message.data)
                except ValueError:
                    continue  # Alpaca ignores what it cannot read
                action = body.get("action") if isinstance(body, dict) else None
                data = body.get("data") if isinstance(body, dict) else None
                data = data if isinstance(data, dict) else {}
                if action == "authenticate":
                    client.account = self._authenticate(data)
                    status = "authorized" if client.account is not None else "unauthorized"
                    client.outbox.put_nowait(authorization(status, "authenticate"))
                    if client.account is not None and syncing is None:
                        syncing = asyncio.ensure_future(self._sync(client.account))
                elif action == "listen":
                    self._listen(client, data)
        finally:
            self._clients.discard(client)
            for task in (writer, syncing):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        return ws

    def _authenticate(self, data: dict[str, Any]) -> Account | None:
        key, secret = data.get("key_id"), data.get("secret_key")
        if not isinstance(key, str) or self.secrets.get(key) != secret:
            return None
        return self.venue.accounts.get(key)

    def _listen(self, client: _Client, data: dict[str, Any]) -> None:
        if client.account is None:
            client.outbox.put_nowait(authorization("unauthorized", "listen"))
            return
        asked = data.get("streams")
        granted = [s for s in asked if s == "trade_updates"] if isinstance(asked, list) else []
        client.listening = bool(granted)
        client.outbox.put_nowait({"stream": "listening", "data": {"streams": granted}})

    async def _write(self, client: _Client) -> None:
        while True:
            message = await client.outbox.get()
            if client.ws.closed:
                return
            await client.ws.send_bytes(json.dumps(message).encode())
            if message["stream"] == "trade_updates":
                self.sent += 1

    async def _sync(self, account: Account) -> None:
        while True:
            await asyncio.sleep(self.sync_every_s)
            self.venue.sync(account)
