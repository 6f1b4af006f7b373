"""The wait an exchange's answer asks for: Retry-After, or Alpaca's X-RateLimit-Reset. The
headers are those Alpaca's forum shows on every Trading API answer
(forum.alpaca.markets/t/executing-orders/12029: "X-Ratelimit-Limit: 200,
X-Ratelimit-Remaining: 195, X-Ratelimit-Reset: 1679411617"), the reset an epoch second."""

from __future__ import annotations

import ccxt.async_support as ccxt
import pytest

from trader.market.retry import asked_wait, failure_kind

RESET = 1679411617
FORUM = {
    "X-Ratelimit-Limit": "200",
    "X-Ratelimit-Remaining": "195",
    "X-Ratelimit-Reset": str(RESET),
}


@pytest.mark.parametrize(
    ("headers", "now", "wait"),
    [
        (FORUM, RESET - 30, None),  # calls left: nothing to wait for
        (FORUM | {"X-Ratelimit-Remaining": "0"}, RESET - 12.5, 12.5),  # the window's rest
        (FORUM | {"X-Ratelimit-Remaining": "0"}, RESET + 3, 0.0),  # it has reset already
        ({"x-ratelimit-reset": str(RESET)}, RESET - 4, 4.0),  # a 429 that says no more
        ({"Retry-After": "7", "X-Ratelimit-Reset": str(RESET)}, RESET - 30, 7.0),
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "20"}, RESET, 20.0),  # seconds left
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "soon"}, RESET, None),
        ({}, RESET, None),
    ],
)  # fmt: skip
def test_the_wait_asked_for(headers, now, wait):
    assert asked_wait(headers, now) == wait


def test_refused_credentials_are_counted_as_their_own_kind():
    assert failure_kind(ccxt.AuthenticationError("alpaca 401")) == "authentication"
    assert failure_kind(ccxt.PermissionDenied("no trading")) == "authentication"
    assert failure_kind(ccxt.RequestTimeout("slow")) == "timeout"
    assert failure_kind(ccxt.BadSymbol("no such market")) == "exchange_error"
