"""Retrying exchange calls: exponential backoff with full jitter, the exchange's Retry-After
honoured, and a cool-down that sends nothing while the exchange has asked us to stay away."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from trader.clock import Clock
from trader.market.feed import ExchangeCallFailed

T = TypeVar("T")


def error_kind(error: BaseException) -> str | None:
    """A bounded label for a retryable exchange error, or None for one retrying cannot fix.

    In current ccxt RateLimitExceeded and DDoSProtection are siblings under NetworkError, so
    each is named before the catch-all."""
    import ccxt.async_support as ccxt  # noqa: PLC0415 - ccxt loads where exchanges are called

    for kind, cls in (
        ("rate_limited", ccxt.RateLimitExceeded),
        ("ddos_protection", ccxt.DDoSProtection),
        ("timeout", ccxt.RequestTimeout),
        ("unavailable", ccxt.ExchangeNotAvailable),
        ("network", ccxt.NetworkError),
        ("bad_response", ccxt.BadResponse),
        # ccxt's base of errors that "may succeed if retried" (Binance -1001, HTTP 503).
        ("operation_failed", ccxt.OperationFailed),
    ):
        if isinstance(error, cls):
            return kind
    return None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0

    def backoff(self, attempt: int, draw: Callable[[], float]) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**attempt)]."""
        return draw() * min(self.max_delay_s, self.base_delay_s * 2.0**attempt)


@dataclass
class Retrier:
    policy: RetryPolicy
    clock: Clock
    on_error: Callable[[str], None] = lambda kind: None
    retry_after: Callable[[], float | None] = lambda: None  # the last response's Retry-After
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # Jitter only spreads retries out; it needs no cryptographic randomness.
    draw: Callable[[], float] = field(default_factory=lambda: random.Random().random)  # noqa: S311 - jitter, not a secret
    _quiet_until: float = 0.0  # loop time before which nothing is sent

    async def call(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        # Loaded here, not with the module: a backtest builds a RetryPolicy, never calls out.
        import ccxt.async_support as ccxt  # noqa: PLC0415

        loop = asyncio.get_running_loop()
        for n in range(self.policy.attempts):
            wait = self._quiet_until - loop.time()
            if wait > self.policy.max_delay_s:
                raise ExchangeCallFailed(what, "cooling_down", f"asked to wait {wait:.0f}s more")
            if wait > 0:
                await self.sleep(wait)
            try:
                return await attempt()
            except ccxt.BaseError as error:
                kind = error_kind(error)
                self.on_error(kind or "exchange_error")
                if kind is None:
                    raise ExchangeCallFailed(what, "exchange_error", str(error)[:200]) from error
                asked = self.retry_after() if kind in {"rate_limited", "ddos_protection"} else None
                if asked is not None:
                    # The exchange said how long: send nothing before then (the loop waits).
                    self._quiet_until = loop.time() + asked
                if n == self.policy.attempts - 1:
                    raise ExchangeCallFailed(what, kind, str(error)[:200]) from error
                if asked is None:
                    await self.sleep(self.policy.backoff(n, self.draw))
                elif asked > self.policy.max_delay_s:
                    raise ExchangeCallFailed(what, kind, f"asked to wait {asked:.0f}s") from error
        raise AssertionError("unreachable")  # pragma: no cover
