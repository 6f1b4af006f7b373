"""What a failed Alpaca call means, in ccxt's error classes: the live broker and the retrier
judge every venue's failures by that one hierarchy (`trader.broker.venue_errors`,
`trader.market.retry`), so Alpaca's answers are mapped onto it once, here.

Alpaca answers errors as JSON `{"code": 40310000, "message": "..."}` with an HTTP status; the
SDK raises `APIError` for them, and lets `requests`' own errors (timeouts, dropped
connections, bodies that are not JSON) through."""

from __future__ import annotations

import json
from collections.abc import Callable

import ccxt.async_support as ccxt
import requests

from alpaca.common.exceptions import APIError

_PDT = 40310100


def _body(error: APIError) -> tuple[int | None, str]:
    try:
        parsed = json.loads(str(error))
    except ValueError:
        return None, str(error)[:200]
    if not isinstance(parsed, dict):
        return None, str(error)[:200]
    code = parsed.get("code")
    return (code if isinstance(code, int) else None), str(parsed.get("message", ""))[:200]


# (does it apply, the class): the first that applies wins.
_API_ERRORS: tuple[tuple[Callable[[int, int | None, str], bool], type[Exception]], ...] = (
    (lambda s, c, m: s == 401 or (s == 403 and "not authorized" in m), ccxt.AuthenticationError),
    (lambda s, c, m: s == 429, ccxt.RateLimitExceeded),
    (lambda s, c, m: s >= 500, ccxt.ExchangeNotAvailable),
    # Gone, or ended before the cancel: the lookup decides.
    (lambda s, c, m: s == 404 or c == 42210000, ccxt.OrderNotFound),
    (lambda s, c, m: "client_order_id must be unique" in m, ccxt.DuplicateOrderId),
    (lambda s, c, m: s == 403 and c != _PDT and "insufficient" in m, ccxt.InsufficientFunds),
)


def as_ccxt(error: BaseException) -> Exception | None:
    """The ccxt error that means what `error` means, None when it is not a venue failure."""
    if isinstance(error, APIError):
        status = error.status_code or 0
        code, message = _body(error)
        detail = json.dumps({"status": status, "code": code, "message": message})
        cls = next((k for applies, k in _API_ERRORS if applies(status, code, message)), None)
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


def retry_after(error: BaseException) -> float | None:
    """The Retry-After (seconds) of the answer behind `error`, if it sent one."""
    response = getattr(error, "response", None)
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
