"""alpaca-py as the adapter drives it, against a stand-in Alpaca that answers its rate limit
as Alpaca does: HTTP 429 with `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
`X-RateLimit-Reset` (the epoch second the window resets) and no Retry-After (Alpaca's forum,
"Executing Orders", forum.alpaca.markets/t/executing-orders/12029: "X-Ratelimit-Limit: 200,
X-Ratelimit-Remaining: 195, X-Ratelimit-Reset: 1679411617 ... If one gets a 429 rate limit
exceeded error, simply look at the header X-Ratelimit-Reset time. Pause until that time";
200 requests a minute: alpaca.markets/support/usage-limit-api-calls).

- The SDK sends each call once: its own retries (a fixed 3 s sleep, three times, on 429) are
  off, so our retrier hears of the 429 at once and waits what Alpaca asked.
- Every request has our timeout (the SDK sets none)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import ccxt.async_support as ccxt
import pytest
from aiohttp import web

from tests.integration.alpaca_setup import alpaca_settings
from trader.clock import WallClock
from trader.market.alpaca.exchange import AlpacaExchange
from trader.market.alpaca.feed import alpaca_exchange
from trader.market.ccxt_feed import retry_after
from trader.market.retry import Retrier, RetryPolicy

pytestmark = pytest.mark.integration
RESET_IN_S = 3
CLOCK = {"timestamp": "2025-03-03T10:05:00-05:00", "is_open": True,
         "next_open": "2025-03-04T09:30:00-05:00",
         "next_close": "2025-03-03T16:00:00-05:00"}  # fmt: skip


class StandIn:
    """`/v2/clock` refused with a 429 `limited` times, then answered; `/v2/account` slow."""

    def __init__(self, limited: int) -> None:
        self.limited = limited
        self.seen: list[str] = []
        self.reset = 0

    async def clock(self, request: web.Request) -> web.Response:
        self.seen.append(request.path)
        if len(self.seen) <= self.limited:
            self.reset = int(time.time()) + RESET_IN_S
            headers = {"X-RateLimit-Limit": "200", "X-RateLimit-Remaining": "0",
                       "X-RateLimit-Reset": str(self.reset)}  # fmt: skip
            return web.json_response({"code": 42910000, "message": "rate limit exceeded"},
                                     status=429, headers=headers)  # fmt: skip
        return web.json_response(CLOCK)

    async def account(self, request: web.Request) -> web.Response:
        self.seen.append(request.path)
        await asyncio.sleep(2)
        return web.json_response({})


@asynccontextmanager
async def stand_in(limited: int) -> AsyncIterator[tuple[StandIn, AlpacaExchange]]:
    alpaca = StandIn(limited)
    app = web.Application()
    app.router.add_get("/v2/clock", alpaca.clock)
    app.router.add_get("/v2/account", alpaca.account)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    exchange = alpaca_exchange(alpaca_settings(f"http://127.0.0.1:{port}", 0.3), WallClock())
    try:
        yield alpaca, exchange
    finally:
        await exchange.close()
        await runner.cleanup()


async def test_a_429_is_heard_at_once_with_the_wait_alpaca_asked_for():
    async with stand_in(limited=1) as (alpaca, exchange):
        with pytest.raises(ccxt.RateLimitExceeded):
            await exchange.clock()
        assert alpaca.seen == ["/v2/clock"]  # the SDK did not retry by itself
        assert exchange.last_response_headers["X-RateLimit-Reset"] == str(alpaca.reset)
        wait = retry_after(exchange)
        assert wait is not None
        assert RESET_IN_S - 1 < wait <= RESET_IN_S


async def test_the_retrier_waits_until_the_rate_limit_resets_then_asks_again():
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with stand_in(limited=1) as (alpaca, exchange):
        retrier = Retrier(
            RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=10), WallClock(),
            retry_after=lambda: retry_after(exchange), sleep=sleep,
        )  # fmt: skip
        answer = await retrier.call("clock", exchange.clock)
    assert answer["is_open"] is True
    assert alpaca.seen == ["/v2/clock", "/v2/clock"]
    [wait] = waits  # no back-off besides: the wait asked for, then the call
    assert RESET_IN_S - 1 < wait <= RESET_IN_S


async def test_every_request_has_our_timeout():
    async with stand_in(limited=0) as (alpaca, exchange):
        with pytest.raises(ccxt.RequestTimeout):
            await exchange.account()
        assert alpaca.seen == ["/v2/account"]
