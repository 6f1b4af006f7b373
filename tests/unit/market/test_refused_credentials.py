"""Keys the venue refuses are `authentication` on every path (the feed's retrier and the live
broker judge by the same test), as ccxt itself raises them: the installed ccxt's Binance
`handle_errors` is given Binance's own 401 answers (its REST API's error codes: -2014 "API-key
format invalid.", -2015 "Invalid API-key, IP, or permissions for action."), before and after
the client has once authenticated: ccxt 4.5 binance.py turns a -2015 after that into
DDoSProtection ("raised by Binance on a temporary ban"), which must not be retried as a ban."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import ccxt.async_support as ccxt
import pytest

from trader.broker.venue_errors import Meaning, classify
from trader.market.retry import error_kind, failure_kind, refused_credentials

URL = "https://api.binance.com/api/v3/account"
KEY_REFUSED = '{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}'
KEY_MALFORMED = '{"code":-2014,"msg":"API-key format invalid."}'
# Binance's ban (HTTP 418, -1003: its REST API's LIMITS section), which stays a ban.
BANNED = '{"code":-1003,"msg":"Way too much request weight used; IP banned until 1700000000000."}'


@pytest.fixture
async def binance() -> AsyncIterator[ccxt.Exchange]:
    client = ccxt.binance({"apiKey": "k", "secret": "s"})
    yield client
    await client.close()


def raised(exchange: ccxt.Exchange, status: int, body: str) -> ccxt.BaseError:
    """What ccxt raises for Binance's answer `status` `body` to a signed request."""

    def answer() -> None:  # as ccxt's fetch does: the body first, then the HTTP status
        exchange.handle_errors(status, "", URL, "GET", {}, body, json.loads(body), {}, None)
        exchange.handle_http_status_code(status, "", URL, "GET", body)

    with pytest.raises(ccxt.BaseError) as error:
        answer()
    return error.value


@pytest.mark.parametrize("authenticated_before", [False, True])
@pytest.mark.parametrize("body", [KEY_REFUSED, KEY_MALFORMED])
def test_binance_401_answers_are_refused_credentials(binance, body, authenticated_before):
    binance.options["hasAlreadyAuthenticatedSuccessfully"] = authenticated_before
    error = raised(binance, 401, body)
    assert refused_credentials(error)
    assert error_kind(error) is None  # never retried: a person must fix the keys
    assert failure_kind(error) == "authentication"
    found = classify(error)
    assert (found.meaning, found.label) == (Meaning.HALT, "authentication")
    assert found.detail == body


def test_ccxt_raises_a_key_refused_after_a_success_as_ddos_protection(binance):
    # The reason `refused_credentials` reads the body: if ccxt stops doing this, the
    # special case can go.
    binance.options["hasAlreadyAuthenticatedSuccessfully"] = True
    assert type(raised(binance, 401, KEY_REFUSED)) is ccxt.DDoSProtection


def test_a_ban_stays_a_ban(binance):
    error = raised(binance, 418, BANNED)
    assert isinstance(error, ccxt.DDoSProtection)
    assert not refused_credentials(error)
    assert failure_kind(error) == "ddos_protection"
    assert classify(error).meaning is Meaning.REFUSED


def test_permission_denied_is_refused_credentials():
    assert failure_kind(ccxt.PermissionDenied("binance no trading permission")) == "authentication"
    assert classify(ccxt.PermissionDenied("x")).meaning is Meaning.HALT
