"""Operator commands over MQTT, accepted only when signed with the shared secret.

A command is a JSON object:

    {"command": "pause", "args": {}, "timestamp": 1767225600, "nonce": "9f1c...",
     "signature": "..."}

`signature` is the hex HMAC-SHA256, keyed with `mqtt.command_secret`, of the four lines

    <timestamp>\\n<nonce>\\n<command>\\n<args as JSON with sorted keys and no spaces>

The timestamp (Unix seconds) must lie within `mqtt.command_window_s` of the daemon's clock,
and a nonce is accepted once: a captured command cannot be sent again, neither inside the
window (its nonce is remembered for the whole window) nor after it (its timestamp is stale).
Sign from a shell with:

    printf '%s\\n%s\\n%s\\n%s' "$ts" "$nonce" pause '{}' | openssl dgst -sha256 -hmac "$KEY"
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

KNOWN = frozenset({"pause", "resume", "flatten", "reload"})
MAX_PAYLOAD_BYTES = 4096
MAX_NONCES = 10_000  # a flood of signed commands cannot grow memory without bound


@dataclass(frozen=True)
class Command:
    name: str
    args: dict[str, Any]
    nonce: str


@dataclass(frozen=True)
class Refusal:
    result: str  # a bounded label: bad_signature, replayed, stale, malformed, unknown_command
    reason: str
    command: str = "invalid"


def _message(timestamp: int, nonce: str, command: str, args: dict[str, Any]) -> bytes:
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"))
    return f"{timestamp}\n{nonce}\n{command}\n{canonical}".encode()


def sign(
    secret: str,
    command: str,
    *,
    timestamp: int,
    nonce: str | None = None,
    args: dict[str, Any] | None = None,
) -> bytes:
    """A signed command payload, as an operator's tool would send it."""
    nonce = nonce or secrets.token_hex(16)
    args = args or {}
    signature = hmac.new(
        secret.encode(), _message(timestamp, nonce, command, args), hashlib.sha256
    ).hexdigest()
    body = {
        "command": command, "args": args, "timestamp": timestamp, "nonce": nonce,
        "signature": signature,
    }  # fmt: skip
    return json.dumps(body).encode()


@dataclass(frozen=True)
class _Signed:
    name: str
    args: dict[str, Any]
    timestamp: int
    nonce: str
    signature: str


def _parse(payload: bytes) -> _Signed | Refusal:
    if len(payload) > MAX_PAYLOAD_BYTES:
        return Refusal("malformed", f"payload over {MAX_PAYLOAD_BYTES} bytes")
    try:
        body = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return Refusal("malformed", "not JSON")
    if not isinstance(body, dict):
        return Refusal("malformed", "not a JSON object")
    name, args = body.get("command"), body.get("args", {})
    timestamp, nonce, signature = (body.get(k) for k in ("timestamp", "nonce", "signature"))
    if not isinstance(name, str) or not isinstance(args, dict):
        return Refusal("malformed", "command must be a string and args an object")
    if (
        isinstance(timestamp, bool)
        or not isinstance(timestamp, int)
        or not isinstance(nonce, str)
        or not 8 <= len(nonce) <= 128
        or not isinstance(signature, str)
    ):
        label = name if name in KNOWN else "invalid"
        return Refusal("malformed", "timestamp, nonce and signature are required", label)
    return _Signed(name, args, timestamp, nonce, signature)


@dataclass
class CommandVerifier:
    """Checks signature, freshness and uniqueness. The secret never leaves this object and
    never appears in a refusal's reason."""

    secret: bytes = field(repr=False)
    window_s: float
    _seen: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def verify(self, payload: bytes, now: float) -> Command | Refusal:
        signed = _parse(payload)
        if isinstance(signed, Refusal):
            return signed
        label = signed.name if signed.name in KNOWN else "invalid"
        message = _message(signed.timestamp, signed.nonce, signed.name, signed.args)
        expected = hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        # Signature first, in constant time: nothing about an unsigned command is trusted.
        if not hmac.compare_digest(expected, signed.signature):
            return Refusal("bad_signature", "the signature does not match", label)
        if not math.isfinite(now) or abs(now - signed.timestamp) > self.window_s:
            return Refusal("stale", f"timestamp {signed.timestamp} is outside the window", label)
        self._forget(now)
        refusal = None
        if signed.nonce in self._seen:
            refusal = Refusal("replayed", "this nonce was used already", label)
        elif len(self._seen) >= MAX_NONCES:
            refusal = Refusal("rate_limited", f"over {MAX_NONCES} commands in the window", label)
        elif signed.name not in KNOWN:
            refusal = Refusal("unknown_command", f"unknown command {signed.name[:32]!r}", label)
        if refusal is None or refusal.result == "unknown_command":
            self._seen[signed.nonce] = now
        return refusal or Command(signed.name, signed.args, signed.nonce)

    def _forget(self, now: float) -> None:
        """Nonces seen more than twice the window ago: their commands can no longer pass the
        freshness check, so they need not be remembered."""
        while self._seen and next(iter(self._seen.values())) < now - 2 * self.window_s:
            self._seen.popitem(last=False)
