"""Retrying exchange calls, without a network: classification, backoff, Retry-After, give-up."""

from __future__ import annotations

from datetime import UTC, datetime

import ccxt.async_support as ccxt
import pytest

from trader.clock import SimulatedClock
from trader.market.feed import ExchangeCallFailed
from trader.market.retry import Retrier, RetryPolicy, error_kind


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ccxt.RateLimitExceeded("x"), "rate_limited"),
        (ccxt.DDoSProtection("x"), "ddos_protection"),
        (ccxt.RequestTimeout("x"), "timeout"),
        (ccxt.OnMaintenance("x"), "unavailable"),
        (ccxt.ExchangeNotAvailable("x"), "unavailable"),
        (ccxt.InvalidNonce("x"), "network"),
        (ccxt.NullResponse("x"), "bad_response"),
        (ccxt.OperationFailed("x"), "operation_failed"),
        (ccxt.BadSymbol("x"), None),
        (ccxt.AuthenticationError("x"), None),
        (ccxt.InsufficientFunds("x"), None),
    ],
)
def test_errors_are_classified_with_siblings_told_apart(error, kind):
    # RateLimitExceeded and DDoSProtection are siblings in current ccxt; each has its name.
    assert not issubclass(ccxt.RateLimitExceeded, ccxt.DDoSProtection)
    assert error_kind(error) == kind


class Script:
    """An exchange call that fails as scripted, then answers."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "answer"


def retrier(
    sleeps: list[float], errors: list[str], retry_after: float | None = None, attempts: int = 4
) -> Retrier:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return Retrier(
        RetryPolicy(attempts=attempts, base_delay_s=1.0, max_delay_s=10.0),
        SimulatedClock(datetime(2024, 1, 1, tzinfo=UTC)),
        errors.append,
        retry_after=lambda: retry_after,
        sleep=sleep,
        draw=lambda: 1.0,  # the top of each jitter range
    )


async def test_transient_errors_back_off_exponentially_then_succeed():
    sleeps: list[float] = []
    errors: list[str] = []
    call = Script(ccxt.RequestTimeout("a"), ccxt.ExchangeNotAvailable("b"), ccxt.NetworkError("c"))
    assert await retrier(sleeps, errors).call("fetch", call) == "answer"
    assert call.calls == 4
    assert sleeps == [1.0, 2.0, 4.0]
    assert errors == ["timeout", "unavailable", "network"]


async def test_rate_limits_wait_at_least_what_the_exchange_asks():
    sleeps: list[float] = []
    errors: list[str] = []
    call = Script(ccxt.RateLimitExceeded("slow down"))
    assert await retrier(sleeps, errors, retry_after=7.0).call("fetch", call) == "answer"
    assert sleeps == [pytest.approx(7.0, abs=0.1)]
    assert errors == ["rate_limited"]


async def test_retries_are_bounded_and_the_failure_names_the_call():
    sleeps: list[float] = []
    errors: list[str] = []
    call = Script(*[ccxt.RequestTimeout("t")] * 10)
    with pytest.raises(ExchangeCallFailed, match="fetch_ohlcv SOL/USDT: timeout") as caught:
        await retrier(sleeps, errors, attempts=3).call("fetch_ohlcv SOL/USDT", call)
    assert call.calls == 3
    assert caught.value.kind == "timeout"
    assert len(sleeps) == 2


async def test_an_error_retrying_cannot_fix_is_not_retried():
    sleeps: list[float] = []
    errors: list[str] = []
    call = Script(ccxt.BadSymbol("no such market"))
    with pytest.raises(ExchangeCallFailed, match="exchange_error"):
        await retrier(sleeps, errors).call("fetch", call)
    assert call.calls == 1
    assert sleeps == []
    assert errors == ["exchange_error"]
