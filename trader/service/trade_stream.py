"""Alpaca's trade-updates stream in the daemon: fills and order ends heard at once, polling as
the fallback.

The stream (`market.alpaca.stream.TradeUpdates`) runs in its own thread and hands each update
to the daemon's loop; here, under the tick lock, the engine settles that order through the
live broker's own path and books what it finds (`engine.streamed`). Each tick still polls:
while the stream is down (a log line, `trader_trade_stream_connected` 0, a drop counted in
`trader_trade_stream_drops_total`) polling alone books fills, and the stream reconnects with
back-off. Whichever path sees a fill first books it; the other finds nothing new."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from typing import Any

from structlog.typing import FilteringBoundLogger as Logger

from trader.engine.streamed import SettlesNow, settle_between_ticks
from trader.service.parts import Parts
from trader.telemetry.metrics import count_fills


def wanted(parts: Parts) -> bool:
    """Alpaca, the stream on, a live broker that can settle one order, not a replay."""
    settings, engine = parts.settings, parts.engine
    return (
        parts.replay is None
        and settings.exchange.venue == "alpaca"
        and settings.exchange.alpaca.trade_stream
        and engine is not None
        and isinstance(engine.broker, SettlesNow)
    )


async def start_trade_stream(
    parts: Parts, lock: asyncio.Lock, stack: AsyncExitStack, log: Logger
) -> bool:
    """Start hearing the stream when `wanted`; whether it was started."""
    if not wanted(parts):
        return False
    from trader.market.alpaca.stream import TradeUpdates, stream_url  # noqa: PLC0415 - the SDK

    exchange = parts.settings.exchange
    key, secret = exchange.alpaca.credentials()
    if key is None or secret is None:
        return False  # the market data step has refused to start already
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def put(item: object) -> None:  # from the stream's thread
        loop.call_soon_threadsafe(inbox.put_nowait, item)

    stream = TradeUpdates(
        key.get_secret_value(), secret.get_secret_value(), paper=exchange.alpaca.paper,
        url=stream_url(exchange.api_base_url), deliver=put,
        on_state=lambda up, why: put((up, why)),
    )  # fmt: skip
    stream.start()
    stack.push_async_callback(stream.aclose)
    parts.background(follow(parts, inbox, lock, log), "trade stream")
    log.info("trade stream started", url=stream_url(exchange.api_base_url) or "alpaca")
    return True


async def follow(parts: Parts, inbox: asyncio.Queue[Any], lock: asyncio.Lock, log: Logger) -> None:
    """Book each update's order as it comes; note the stream's state changes."""
    from trader.market.alpaca.stream import STOPPED, TradeUpdate  # noqa: PLC0415 - the SDK

    engine, venue, metrics = parts.engine, parts.venue, parts.metrics
    assert engine is not None
    assert venue is not None
    up = False
    while True:
        item = await inbox.get()
        if not isinstance(item, TradeUpdate):
            was, up = up, bool(item[0])
            if metrics is not None:
                metrics.trade_stream_connected.set(up)
                if was and not up and item[1] != STOPPED:
                    metrics.trade_stream_drops.inc()
            continue
        if not item.settles:
            continue
        async with lock:
            try:
                execution = await settle_between_ticks(
                    engine, item.client_order_id, venue.clock.now()
                )
            except Exception:
                log.exception(
                    "a streamed trade update could not be booked: the next poll books it",
                    order=item.client_order_id, trade_event=item.event,
                )  # fmt: skip
                continue
        if execution is None:
            continue  # booked already (by a poll), or nothing new
        if metrics is not None:
            count_fills(metrics, execution.fills)
        log.info(
            "order settled from the trade stream", order=item.client_order_id,
            trade_event=item.event, status=str(execution.order.status),
            fills=len(execution.fills), booked_after_s=round(time.perf_counter() - item.heard, 4),
        )  # fmt: skip
