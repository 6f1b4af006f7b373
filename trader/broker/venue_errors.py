"""What a failed exchange call means for an order: ccxt's errors, each mapped once.

The question that matters after sending is whether the venue may have acted on the request.
Only answers that say it did not (refused before processing, or rejected on its merits) let
the broker conclude anything; everything else (a timeout, a dropped connection, a 5xx, an
answer that cannot be read) leaves the outcome UNKNOWN, to be settled by looking the order up
by its client id, never by sending it again blindly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

import ccxt.async_support as ccxt

from trader.broker.protocol import BrokerHalt
from trader.market.retry import refused_credentials

__all__ = ["BrokerHalt", "Classified", "Meaning", "classify", "credentials_hint", "venue_code"]


_URL = re.compile(r"\w+://\S+")


class Meaning(StrEnum):
    UNKNOWN = "unknown"  # may have taken effect: look it up
    REFUSED = "refused"  # not processed (rate limited, stale timestamp): may be retried
    REJECTED = "rejected"  # not processed, and retrying will not help
    EXISTS = "exists"  # the venue already has an order with this client id
    NOT_FOUND = "not_found"  # the venue does not know the order (now)
    HALT = "halt"  # the keys do not work: nothing more may be sent


@dataclass(frozen=True)
class Classified:
    meaning: Meaning
    label: str  # a bounded label for logs and metrics
    detail: str  # the venue's message, shortened; never holds request parameters
    pause: bool = False  # the venue is down or asked us to back off: stop sending a while


def _detail(error: BaseException) -> str:
    # ccxt messages start with the exchange id and may quote a URL with its signed query:
    # keep the venue's JSON answer where there is one (it holds no secret), else the message
    # with every URL taken out.
    text = str(error)
    brace = text.find("{")
    if brace >= 0:
        return text[brace:][:200]
    plain = _URL.sub("<url>", text).strip()
    return f"{type(error).__name__}: {plain}"[:200] if plain else type(error).__name__


# (what ccxt raised, what it means, its label, whether to pause), first match wins: in ccxt
# DuplicateOrderId and OrderNotFound are InvalidOrders, and the network errors' subclasses
# must come before NetworkError itself.
_Kinds = type[BaseException] | tuple[type[BaseException], ...]
_TABLE: tuple[tuple[_Kinds, Meaning, str, bool], ...] = (
    (ccxt.AuthenticationError, Meaning.HALT, "authentication", False),  # PermissionDenied too
    (ccxt.DuplicateOrderId, Meaning.EXISTS, "duplicate_id", False),
    (ccxt.OrderNotFound, Meaning.NOT_FOUND, "not_found", False),
    (ccxt.InsufficientFunds, Meaning.REJECTED, "insufficient_funds", False),
    ((ccxt.InvalidOrder, ccxt.BadRequest), Meaning.REJECTED, "invalid_order", False),
    ((ccxt.RateLimitExceeded, ccxt.DDoSProtection), Meaning.REFUSED, "rate_limited", True),
    (ccxt.InvalidNonce, Meaning.REFUSED, "stale_timestamp", False),  # outside the recvWindow
    (ccxt.ExchangeNotAvailable, Meaning.UNKNOWN, "exchange_down", True),  # 5xx, maintenance
    (ccxt.RequestTimeout, Meaning.UNKNOWN, "timeout", False),
    (ccxt.NetworkError, Meaning.UNKNOWN, "network", False),
    (ccxt.BadResponse, Meaning.UNKNOWN, "bad_answer", False),
    (ccxt.OperationFailed, Meaning.UNKNOWN, "venue_error", True),  # -1001 internal error
    (ccxt.BaseError, Meaning.UNKNOWN, "exchange_error", False),
)  # fmt: skip


# Alpaca refuses an order opposite to one of ours resting on the same symbol (HTTP 422 42210000;
# 403 when the resting one is a short sale): a rejection of its own kind, so that it is counted
# apart from other invalid orders.
_WASH_TRADE = ("potential wash trade", "while a short sell order is open",
               "while a long sell order is open")  # fmt: skip


# Binance's futures codes (and Aster's, the same API), classified by the code in the venue's
# answer rather than by ccxt's class: ccxt picks its per-market error tables by host name, so
# against another host (the emulator, a proxy) these come as a plain ExchangeError. Codes from
# ccxt/binance.py `exceptions` and Binance's "Error Codes" page (USDⓈ-M futures).
_FUTURES_CODES: dict[int, tuple[Meaning, str]] = {
    -2019: (Meaning.REJECTED, "margin_insufficient"),  # "Margin is insufficient."
    -2022: (Meaning.REJECTED, "reduce_only_rejected"),  # "ReduceOnly Order is rejected."
    -4164: (Meaning.REJECTED, "below_min_notional"),  # notional below the symbol's minimum
    -2027: (Meaning.REJECTED, "over_leverage_cap"),  # over the position the leverage allows
    -4061: (Meaning.REJECTED, "position_side_mismatch"),  # the account is in hedge mode
    -1021: (Meaning.REFUSED, "stale_timestamp"),  # outside the recvWindow: retried
}
_CODE = re.compile(r'"code"\s*:\s*(-\d+)')


def venue_code(error: BaseException) -> int | None:
    """The (negative) Binance-style error code in the venue's answer, if it quotes one."""
    found = _CODE.search(str(error))
    return int(found.group(1)) if found else None


def classify(error: BaseException) -> Classified:
    detail = _detail(error)
    # Refused keys first: ccxt raises Binance's -2015 as DDoSProtection once the client has
    # authenticated before (`refused_credentials` says why that still halts).
    if refused_credentials(error):
        return Classified(Meaning.HALT, "authentication", detail)
    # Binance answers a reused open client id with -2010, which ccxt maps to InvalidOrder.
    if "Duplicate order sent" in str(error):
        return Classified(Meaning.EXISTS, "duplicate_id", detail)
    if isinstance(error, ccxt.InvalidOrder) and any(w in str(error) for w in _WASH_TRADE):
        return Classified(Meaning.REJECTED, "wash_trade", detail)
    code = venue_code(error)
    if code in _FUTURES_CODES and isinstance(error, ccxt.ExchangeError):
        meaning, label = _FUTURES_CODES[code]
        return Classified(meaning, label, detail)
    for kinds, meaning, label, pause in _TABLE:
        if isinstance(error, kinds):
            return Classified(meaning, label, detail, pause)
    return Classified(Meaning.UNKNOWN, "error", type(error).__name__)


def credentials_hint(exchange: object) -> str:
    """Where the venue's keys are set, for a message about refused credentials: the venue
    names its own settings (`credential_settings`, Alpaca's), else ccxt's exchange.api_key."""
    named = getattr(exchange, "credential_settings", None)
    if named:
        return f"{' and '.join(named)} (and that they are the keys of this environment)"
    return "exchange.api_key, exchange.api_secret and the key's permissions (spot trading)"
