"""Every ccxt error means one thing for an order; a lost answer is never a rejection."""

from __future__ import annotations

import ccxt.async_support as ccxt
import pytest

from trader.broker.venue_errors import Meaning, classify


@pytest.mark.parametrize(
    ("error", "meaning", "pause"),
    [
        (ccxt.AuthenticationError('binance {"code":-2015}'), Meaning.HALT, False),
        (ccxt.PermissionDenied("binance"), Meaning.HALT, False),
        (ccxt.InsufficientFunds('{"code":-2010}'), Meaning.REJECTED, False),
        (ccxt.InvalidOrder('{"code":-2010,"msg":"Duplicate order sent."}'), Meaning.EXISTS, False),
        (ccxt.DuplicateOrderId("x"), Meaning.EXISTS, False),
        (ccxt.OrderNotFound('{"code":-2013}'), Meaning.NOT_FOUND, False),
        (ccxt.InvalidOrder("Filter failure: LOT_SIZE"), Meaning.REJECTED, False),
        (ccxt.BadSymbol("x"), Meaning.REJECTED, False),
        (ccxt.RateLimitExceeded("429"), Meaning.REFUSED, True),
        (ccxt.DDoSProtection("418"), Meaning.REFUSED, True),
        (ccxt.InvalidNonce('{"code":-1021}'), Meaning.REFUSED, False),
        (ccxt.RequestTimeout("timed out"), Meaning.UNKNOWN, False),
        (ccxt.ExchangeNotAvailable("503"), Meaning.UNKNOWN, True),
        (ccxt.OnMaintenance("x"), Meaning.UNKNOWN, True),
        (ccxt.NetworkError("reset"), Meaning.UNKNOWN, False),
        (ccxt.OperationFailed('{"code":-1001}'), Meaning.UNKNOWN, True),
        (ccxt.BadResponse("<html>"), Meaning.UNKNOWN, False),
        (ccxt.ExchangeError("anything"), Meaning.UNKNOWN, False),
        (RuntimeError("not ccxt"), Meaning.UNKNOWN, False),
    ],
)
def test_each_error_means_one_thing(error, meaning, pause):
    found = classify(error)
    assert (found.meaning, found.pause) == (meaning, pause)


def test_the_detail_keeps_the_venues_answer_and_drops_a_signed_url():
    error = ccxt.InvalidOrder(
        "binance POST http://127.0.0.1/api/v3/order?timestamp=1&signature=abcdef "
        '{"code":-1013,"msg":"Filter failure: NOTIONAL"}'
    )
    detail = classify(error).detail
    assert detail == '{"code":-1013,"msg":"Filter failure: NOTIONAL"}'
    assert "signature" not in detail


def test_a_message_without_an_answer_keeps_its_words_but_no_url():
    error = ccxt.NetworkError(
        "binance GET http://127.0.0.1:9/api/v3/order?timestamp=1&signature=abc Connection reset"
    )
    detail = classify(error).detail
    assert detail == "NetworkError: binance GET <url> Connection reset"
