"""What a failed Alpaca call means, in ccxt's error classes: the live broker and the retrier
judge every venue's failures by that one hierarchy (`trader.broker.venue_errors`,
`trader.market.retry`), so Alpaca's answers are mapped onto it once, here.

Alpaca answers errors as JSON `{"code": 40310000, "message": "..."}` with an HTTP status; the
SDK raises `APIError` for them, and lets `requests`' own errors (timeouts, dropped
connections, bodies that are not JSON) through. The codes it sends (alpaca-py's fixtures,
tests/trading/trading_client/test_position_routes.py; Alpaca's "How to fix common Trading API
errors" guide, alpaca.markets/learn):

- 401 (40110000 "request is not authorized", or a bare {"message": "unauthorized"}): the keys.
- 403 40310000: the account's rules refuse the order: "insufficient buying power",
  "insufficient qty available for order (...)", "account is not allowed to short",
  "cannot open a long buy while a short sell order is open" (a wash trade); 40310100: the
  pattern-day-trader rule. Each is a rejection with Alpaca's reason, never a retry.
- 404 40410000: no such order (a lookup: the order is not there).
- 422 40010001: a request Alpaca will not take ("client_order_id must be unique", a bad
  field); 42210000: an order it will not process ("potential wash trade detected. use complex
  orders", an extended-hours order that is not limit/day), except on a cancel, where it says
  the order has already ended ("order is not cancelable"): the lookup then decides.
- 429: the rate limit (its wait in the X-RateLimit-Reset header, `trader.market.retry`);
  5xx: Alpaca is down; both are retried.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import ccxt.async_support as ccxt
import requests

from alpaca.common.exceptions import APIError

_PDT = 40310100
_UNPROCESSABLE = 42210000

# (does it apply, the class), given (HTTP status, Alpaca's code, message, a cancel?): the
# first that applies wins. Anything else Alpaca answers is a rejection (InvalidOrder).
_Applies = Callable[[int, int | None, str, bool], bool]
_API_ERRORS: tuple[tuple[_Applies, type[Exception]], ...] = (
    (lambda s, c, m, x: s == 401 or (s == 403 and "not authorized" in m), ccxt.AuthenticationError),
    (lambda s, c, m, x: s == 429, ccxt.RateLimitExceeded),
    (lambda s, c, m, x: s >= 500, ccxt.ExchangeNotAvailable),
    # A cancel of an order that has already ended: the lookup that follows decides.
    (lambda s, c, m, x: s == 404 or (x and (s == 422 or c == _UNPROCESSABLE)), ccxt.OrderNotFound),
    (lambda s, c, m, x: "client_order_id must be unique" in m, ccxt.DuplicateOrderId),
    (lambda s, c, m, x: s == 403 and c != _PDT and "insufficient" in m, ccxt.InsufficientFunds),
)  # fmt: skip


def _body(error: APIError) -> tuple[int | None, str]:
    try:
        parsed = json.loads(str(error))
    except ValueError:
        return None, str(error)[:200]
    if not isinstance(parsed, dict):
        return None, str(error)[:200]
    code = parsed.get("code")
    return (code if isinstance(code, int) else None), str(parsed.get("message", ""))[:200]


def as_ccxt(error: BaseException, *, cancelling: bool = False) -> Exception | None:
    """The ccxt error that means what `error` means, None when it is not a venue failure.
    `cancelling`: the call was a cancel (a 422 then says the order had already ended)."""
    if isinstance(error, APIError):
        status = error.status_code or 0
        code, message = _body(error)
        detail = json.dumps({"status": status, "code": code, "message": message})
        cls = next(
            (k for applies, k in _API_ERRORS if applies(status, code, message, cancelling)),
            None,
        )
        return (cls or ccxt.InvalidOrder)(f"alpaca {detail}")
    transport: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...],
                           type[Exception], str], ...] = (
        (requests.Timeout, ccxt.RequestTimeout, "no answer in time"),
        ((requests.JSONDecodeError, ValueError), ccxt.BadResponse, "an answer that is not JSON"),
        (requests.RequestException, ccxt.NetworkError, "the connection failed"),
    )  # fmt: skip
    for kind, made, what in transport:
        if isinstance(error, kind):
            return made(f"alpaca: {what} ({type(error).__name__})")
    return None


def response_headers(error: BaseException) -> dict[str, str]:
    """The headers of the answer behind `error` (the rate limit's are read from them), empty
    when there was no answer."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    return {str(k): str(v) for k, v in headers.items()} if headers is not None else {}
