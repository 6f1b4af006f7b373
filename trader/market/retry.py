"""Retrying exchange calls: exponential backoff with full jitter, the wait the exchange asked
for honoured (`asked_wait`: Retry-After, or Alpaca's X-RateLimit-Reset), and a cool-down that
sends nothing while the exchange has asked us to stay away."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from trader.clock import Clock
from trader.market.feed import ExchangeCallFailed

T = TypeVar("T")
EPOCH_2001 = 1e9  # seconds: any X-RateLimit-Reset under this counts seconds, not a date
_BINANCE_KEY_REFUSED = re.compile(r'"code"\s*:\s*-2015\b')


def refused_credentials(error: BaseException) -> bool:
    """Whether the venue refused our keys: ccxt's AuthenticationError (PermissionDenied is
    one; Binance's HTTP 401 -2014 "API-key format invalid." and -2015 "Invalid API-key, IP, or
    permissions for action.", Alpaca's 401), and Binance's -2015 that ccxt raises as
    DDoSProtection once the same client has authenticated before (ccxt 4.5 binance.py
    handle_errors, `hasAlreadyAuthenticatedSuccessfully`: "raised by Binance on a temporary
    ban"). A key revoked, an IP taken off its list or a permission removed while the daemon
    runs answers exactly that, and Binance bans with HTTP 418/429 -1003 (its REST API's
    LIMITS), so a person must look: never retried, counted as `authentication`."""
    import ccxt.async_support as ccxt  # noqa: PLC0415 - ccxt loads where exchanges are called

    if isinstance(error, ccxt.AuthenticationError):
        return True
    return isinstance(error, ccxt.DDoSProtection) and bool(_BINANCE_KEY_REFUSED.search(str(error)))


def error_kind(error: BaseException) -> str | None:
    """A bounded label for a retryable exchange error, or None for one retrying cannot fix.

    In current ccxt RateLimitExceeded and DDoSProtection are siblings under NetworkError, so
    each is named before the catch-all."""
    import ccxt.async_support as ccxt  # noqa: PLC0415 - ccxt loads where exchanges are called

    if refused_credentials(error):
        return None
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


def failure_kind(error: BaseException) -> str:
    """The label a failed exchange call is counted under: its retryable kind, credentials the
    exchange refused (`authentication`: a person must fix the keys, so an alert names it), or
    any other exchange error."""
    if refused_credentials(error):
        return "authentication"
    return error_kind(error) or "exchange_error"


def asked_wait(headers: Mapping[str, str], now_s: float) -> float | None:
    """How long (seconds) the answer with `headers` asked us to wait, or None: Retry-After
    (Binance, most venues), else X-RateLimit-Reset, the epoch second the rate limit's window
    resets (Alpaca sends X-RateLimit-Limit/-Remaining/-Reset on every answer, never
    Retry-After: alpaca.markets/support/usage-limit-api-calls and Alpaca's forum on reading
    them), only when X-RateLimit-Remaining says none is left. `now_s`: the epoch now."""
    named = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after" in named:
            return max(0.0, float(named["retry-after"]))
        reset, left = named.get("x-ratelimit-reset"), named.get("x-ratelimit-remaining")
        if reset is not None and (left is None or int(left) <= 0):
            # Some venues send the seconds left rather than the epoch second: no epoch is
            # that small.
            at = float(reset)
            return max(0.0, at - now_s if at > EPOCH_2001 else at)
    except ValueError:
        return None
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
    retry_after: Callable[[], float | None] = lambda: None  # the last answer's `asked_wait`
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
                self.on_error(failure_kind(error))
                if kind is None:
                    raise ExchangeCallFailed(what, failure_kind(error), str(error)[:200]) from error
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
