"""Alpaca's trade-updates stream, heard through alpaca-py's `TradingStream`, for the daemon.

`TradingStream.run()` is the SDK's documented way to listen (it blocks: it runs its own event
loop), so the stream runs in a thread of its own and every update is handed to the daemon
through `deliver`, which must be thread-safe (the daemon puts it on its loop: only the engine
books, never this thread).

The SDK reconnects at once, forever, and tells nobody: after a drop it retries every 10 ms,
and keys it refuses it retries the same way. So each connection is a session of ours: a new
`TradingStream` is started, and when its connection is lost, refused or never authorized
within `connect_timeout_s`, it is stopped, the drop is reported (`on_state`), and the next
session starts after a back-off that doubles up to `max_delay_s`. What the session learns it
learns from the websocket itself, through the `create_protocol` parameter of the websockets
connection the SDK opens (its public `websocket_params`): when the connection is lost, and
what the authorization answer was. The SDK's own log lines about reconnecting are replaced by
ours (its logger is quieted), so a refused key is one line per attempt, not a hundred a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.legacy.client import WebSocketClientProtocol

from alpaca.trading.stream import TradingStream
from trader.logging import get_logger
from trader.market.retry import RetryPolicy

# Events after which the order's state at Alpaca has changed in a way the ledger books: fills,
# and ends. `new`, `pending_*`, `accepted` change nothing the daemon keeps.
SETTLING = frozenset(
    {"fill", "partial_fill", "canceled", "expired", "rejected", "done_for_day", "replaced"}
)
SDK_LOGGER = "alpaca.trading.stream"
STOPPED = "stopped"  # on_state's reason when the daemon stopped the stream itself


@dataclass(frozen=True)
class TradeUpdate:
    """One `trade_updates` message: what happened to which order, and when it was heard."""

    event: str
    client_order_id: str
    order_id: str | None
    symbol: str | None
    timestamp: datetime | None  # Alpaca's time of the event
    heard: float  # time.perf_counter() when this process read it

    @property
    def settles(self) -> bool:
        return self.event in SETTLING


def read_update(message: Any, heard: float) -> TradeUpdate | None:
    """The update in one raw stream message (alpaca-py's `raw_data=True` form), None when it
    carries no order we could look up."""
    data = message.get("data") if isinstance(message, dict) else None
    order = data.get("order") if isinstance(data, dict) else None
    if not isinstance(order, dict) or not isinstance(order.get("client_order_id"), str):
        return None
    event = data.get("event") if isinstance(data, dict) else None
    return TradeUpdate(
        event=str(event),
        client_order_id=order["client_order_id"],
        order_id=_text(order.get("id")),
        symbol=_text(order.get("symbol")),
        timestamp=_time(data.get("timestamp") if isinstance(data, dict) else None),
        heard=heard,
    )


def stream_url(api_base_url: str | None) -> str | None:
    """The stream's address for an `exchange.api_base_url` (the emulator's http://host:port):
    the same host, ws(s)://, path /stream, as Alpaca's own (wss://paper-api.alpaca.markets/
    stream). None: the SDK's own address for the environment."""
    if not api_base_url:
        return None
    parts = urlsplit(api_base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/stream", "", ""))


class _Session:
    """One connection's life, as the websocket tells it (events set in the SDK's thread)."""

    def __init__(self) -> None:
        self.authorized = threading.Event()
        self.ended = threading.Event()
        self.refused = False
        self.why = "not connected"
        self.stream: TradingStream | None = None
        self.protocol: WebSocketClientProtocol | None = None
        self._tasks: set[asyncio.Future[None]] = set()  # kept until done
        self._stopping = False  # the SDK stream was told to stop

    def protocol_class(self) -> type[WebSocketClientProtocol]:
        session = self

        class Watched(WebSocketClientProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                session.protocol = self
                super().connection_made(transport)

            async def recv(self) -> Any:
                message = await super().recv()
                session.read(message, self)
                return message

            def connection_lost(self, exc: Exception | None) -> None:
                super().connection_lost(exc)
                session.lost(f"connection lost ({exc!r})" if exc else "connection closed")

        return Watched

    def read(self, message: Any, protocol: WebSocketClientProtocol) -> None:
        try:
            body = json.loads(message)
        except ValueError:
            return
        if not isinstance(body, dict) or body.get("stream") != "authorization":
            return
        status = (body.get("data") or {}).get("status")
        if status == "authorized":
            self.authorized.set()
        else:
            self.refused = True
            self._keep(protocol.close())  # the SDK leaves it open
            self.lost(f"authorization {status!r}: Alpaca refused the keys")

    def lost(self, why: str) -> None:
        """The connection is over. In the SDK's loop, its stream is told to stop before its
        10 ms retry comes round; from elsewhere, `TradeUpdates._end` stops it."""
        if not self.ended.is_set():
            self.why = why
            self.ended.set()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if self.stream is not None and not self._stopping:
            self._stopping = True
            self._keep(self.stream.stop_ws())

    def _keep(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class TradeUpdates:
    """The trade-updates stream in a thread of its own, reconnecting with back-off."""

    def __init__(
        self,
        key_id: str,
        secret_key: str,
        *,
        paper: bool,
        url: str | None,
        deliver: Callable[[TradeUpdate], None],
        on_state: Callable[[bool, str], None] = lambda up, why: None,
        backoff: RetryPolicy | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        """`deliver` and `on_state` are called from the stream's thread."""
        self._keys = (key_id, secret_key)
        self._paper, self._url = paper, url
        self._deliver, self._on_state = deliver, on_state
        self._backoff = backoff or RetryPolicy(attempts=0, base_delay_s=1.0, max_delay_s=60.0)
        self._connect_timeout_s = connect_timeout_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._session: _Session | None = None
        self._draw = random.Random().random  # noqa: S311 - jitter, not a secret
        self.connected = False
        self.drops = 0
        self.log = get_logger("trader.alpaca.stream")

    def start(self) -> None:
        # The SDK logs every retry with a traceback; this class says what matters, once.
        logging.getLogger(SDK_LOGGER).setLevel(logging.CRITICAL)
        self._thread = threading.Thread(target=self._supervise, name="alpaca-trade-updates")
        self._thread.daemon = True  # never holds the process up at exit
        self._thread.start()

    async def aclose(self) -> None:
        """`stop`, off the event loop: stopping waits for the websocket's closing handshake,
        which the loop may be the one to answer (an emulator in the same process)."""
        await asyncio.to_thread(self.stop)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        session = self._session
        if session is not None:
            self._end(session)
        if self._thread is not None:
            self._thread.join(timeout_s)

    # --- the stream's thread --------------------------------------------------------------

    def _supervise(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            session = self._session = _Session()
            runner = self._run(session)
            began = time.monotonic()
            while not (session.authorized.is_set() or session.ended.is_set()):
                if self._stopping.is_set() or time.monotonic() - began > self._connect_timeout_s:
                    session.why = session.why if session.ended.is_set() else "no answer"
                    break
                session.ended.wait(0.05)
            if session.authorized.is_set() and not session.ended.is_set():
                attempt = 0
                self._state(True, "connected")
                while not (session.ended.is_set() or self._stopping.is_set()):
                    session.ended.wait(0.5)
            self._end(session)
            runner.join(15.0)
            if self._stopping.is_set():
                break
            if self.connected:
                self.drops += 1
            delay = self._backoff.backoff(attempt, self._draw) if attempt else 0.5
            attempt += 1
            self._state(False, f"{session.why}; polling carries on, next try in {delay:.1f} s")
            self._stopping.wait(delay)
        self._state(False, STOPPED)

    def _run(self, session: _Session) -> threading.Thread:
        stream = TradingStream(
            *self._keys, paper=self._paper, raw_data=True, url_override=self._url,  # type: ignore[arg-type]
            websocket_params={
                # alpaca-py's own defaults, and the protocol that tells us what happens.
                "ping_interval": 10, "ping_timeout": 180, "max_queue": 1024,
                "create_protocol": session.protocol_class(),
                "open_timeout": self._connect_timeout_s,
            },
        )  # fmt: skip
        stream.subscribe_trade_updates(self._handle)
        session.stream = stream
        runner = threading.Thread(target=stream.run, name="alpaca-trading-stream", daemon=True)
        runner.start()
        return runner

    def _end(self, session: _Session) -> None:
        """Stop the session's SDK stream: closing the websocket makes its loop return; one
        still trying to connect is stopped by `TradingStream.stop`, from a thread of its own,
        because it waits without a limit for a loop that may be ending."""
        protocol, stream = session.protocol, session.stream
        session.lost(session.why if session.ended.is_set() else "stopped")
        if protocol is not None and not protocol.closed:
            with contextlib.suppress(RuntimeError):  # its loop has closed already
                asyncio.run_coroutine_threadsafe(protocol.close(), protocol.loop)
        if stream is not None:
            threading.Thread(target=_stop, args=(stream,), daemon=True).start()

    async def _handle(self, message: Any) -> None:
        update = read_update(message, time.perf_counter())
        if update is None:
            self.log.warning("unreadable trade update", message=str(message)[:300])
            return
        self._deliver(update)

    def _state(self, up: bool, why: str) -> None:
        was, self.connected = self.connected, up
        if up:
            self.log.info("trade stream connected", url=self._url or "alpaca")
        elif why == STOPPED:
            self.log.info("trade stream stopped")
        elif was:
            self.log.warning("trade stream dropped", why=why)
        else:
            self.log.warning("trade stream not connected", why=why)
        self._on_state(up, why)


def _stop(stream: TradingStream) -> None:
    # Its loop may not have started yet, or have ended: then there is nothing to stop.
    with contextlib.suppress(Exception):
        stream.stop()


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
