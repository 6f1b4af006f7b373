"""Operator commands over MQTT, accepted only when signed with the shared secret.

A command is a JSON object sent to the daemon's command topic, `<prefix>/<instance>/cmd`:

    {"command": "pause", "args": {}, "timestamp": 1767225600, "nonce": "9f1c...",
     "signature": "..."}

`signature` is the hex HMAC-SHA256, keyed with `mqtt.command_secret`, of the five lines

    <topic>\\n<timestamp>\\n<nonce>\\n<command>\\n<args as JSON with sorted keys and no spaces>

The topic is the one it is sent to, so a command signed for one daemon is refused by every
other that shares the key. The timestamp (Unix seconds) must lie within `mqtt.command_window_s`
of the daemon's clock, and a nonce (8 to 128 of A-Z a-z 0-9 _ -) is accepted once: used nonces
are kept in the ledger for as long as their command could pass the freshness check, so a
captured command cannot be sent again, neither inside the window (nor after a restart) nor
after it (its timestamp is stale), nor after the wall clock is stepped back (the window is
measured on a clock that cannot go back, `ledger/nonces.py`). Sign from a shell with:

    printf '%s\\n%s\\n%s\\n%s\\n%s' "$topic" "$ts" "$nonce" pause '{}' \\
        | openssl dgst -sha256 -hmac "$KEY"

Parsing is bounded in size and in nesting, and every field is checked for its type and form
before anything else reads it: whatever arrives becomes a `Command` or a `Refusal`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from trader.ledger.nonces import CommandNonces

KNOWN = frozenset({"pause", "resume", "flatten", "reload"})
MAX_PAYLOAD_BYTES = 4096
MAX_DEPTH = 8  # the body and its args need two; JSON nested deeper is refused unparsed
MAX_NONCES = 10_000  # a flood of signed commands cannot grow the ledger without bound
NONCE = re.compile(r"[A-Za-z0-9_-]{8,128}")
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SIGNATURE = re.compile(r"[0-9a-f]{64}")  # hex SHA-256; compare_digest refuses non-ASCII text
LATEST_TIMESTAMP = 2**53  # no float loses a second below it


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


def signed_text(
    topic: str, timestamp: int, nonce: str, command: str, args: dict[str, Any]
) -> bytes:
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"))
    return f"{topic}\n{timestamp}\n{nonce}\n{command}\n{canonical}".encode()


def sign(
    secret: str,
    command: str,
    *,
    topic: str,
    timestamp: int,
    nonce: str | None = None,
    args: dict[str, Any] | None = None,
) -> bytes:
    """A signed command payload for `topic`, as an operator's tool would send it."""
    nonce = nonce or secrets.token_hex(16)
    args = args or {}
    signature = hmac.new(
        secret.encode(), signed_text(topic, timestamp, nonce, command, args), hashlib.sha256
    ).hexdigest()
    body = {
        "command": command, "args": args, "timestamp": timestamp, "nonce": nonce,
        "signature": signature,
    }  # fmt: skip
    return json.dumps(body).encode()


def nesting(payload: bytes) -> int:
    """How deeply `payload`'s arrays and objects nest, read without parsing (so a deep one
    cannot exhaust the parser's recursion); stops counting past MAX_DEPTH."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in payload:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


@dataclass(frozen=True)
class Signed:
    name: str
    args: dict[str, Any]
    timestamp: int
    nonce: str
    signature: str

    @property
    def label(self) -> str:
        return self.name if self.name in KNOWN else "invalid"


def _body(payload: bytes) -> dict[str, Any] | Refusal:
    if len(payload) > MAX_PAYLOAD_BYTES:
        return Refusal("malformed", f"payload over {MAX_PAYLOAD_BYTES} bytes")
    if nesting(payload) > MAX_DEPTH:
        return Refusal("malformed", f"JSON nested deeper than {MAX_DEPTH}")
    try:
        body = json.loads(payload)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return Refusal("malformed", "not JSON")
    if not isinstance(body, dict):
        return Refusal("malformed", "not a JSON object")
    return body


def _parse(payload: bytes) -> Signed | Refusal:
    body = _body(payload)
    if isinstance(body, Refusal):
        return body
    name, args = body.get("command"), body.get("args", {})
    timestamp, nonce, signature = (body.get(k) for k in ("timestamp", "nonce", "signature"))
    if not isinstance(name, str) or not NAME.fullmatch(name) or not isinstance(args, dict):
        return Refusal("malformed", "command must be a name and args an object")
    label = name if name in KNOWN else "invalid"
    if (
        isinstance(timestamp, bool)
        or not isinstance(timestamp, int)
        or not 0 <= timestamp < LATEST_TIMESTAMP
        or not isinstance(nonce, str)
        or not NONCE.fullmatch(nonce)
        or not isinstance(signature, str)
        or not SIGNATURE.fullmatch(signature)
    ):
        return Refusal(
            "malformed",
            "timestamp (Unix seconds), nonce (8-128 of A-Z a-z 0-9 _ -) and signature (64 "
            "lowercase hex digits) are required",
            label,
        )
    return Signed(name, args, timestamp, nonce, signature)


_CLAIM_REFUSALS = {
    "used": ("replayed", "this nonce was used already"),
    "full": ("rate_limited", f"over {MAX_NONCES} commands in the window"),
}


@dataclass(frozen=True)
class CommandVerifier:
    """Checks form, signature and freshness (`check`), then uniqueness (`admit`). The secret
    never leaves this object and never appears in a refusal's reason."""

    secret: bytes = field(repr=False)
    window_s: float
    topic: str  # the command topic: part of the signed text

    def check(self, payload: bytes, now: float) -> Signed | Refusal:
        """Form, signature and freshness: what can be judged without the ledger."""
        signed = _parse(payload)
        if isinstance(signed, Refusal):
            return signed
        message = signed_text(self.topic, signed.timestamp, signed.nonce, signed.name, signed.args)
        expected = hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        # Signature first, in constant time: nothing about an unsigned command is trusted.
        if not hmac.compare_digest(expected, signed.signature):
            return Refusal(
                "bad_signature",
                f"the signature does not match (signed for {self.topic}?)",
                signed.label,
            )
        if not math.isfinite(now) or abs(now - signed.timestamp) > self.window_s:
            return Refusal(
                "stale", f"timestamp {signed.timestamp} is outside the window", signed.label
            )
        return signed

    async def admit(self, signed: Signed, now: float, nonces: CommandNonces) -> Command | Refusal:
        """A checked command, once its nonce is recorded as used (and its name known)."""
        claim = await nonces.claim(
            signed.nonce, signed.label, now=now, fresh_until=signed.timestamp + self.window_s
        )
        if claim == "stale":
            return Refusal(
                "stale",
                f"timestamp {signed.timestamp} is older than a command admitted already, less "
                "the window (was the clock stepped back?)",
                signed.label,
            )
        if claim != "new":
            return Refusal(*_CLAIM_REFUSALS[claim], signed.label)
        if signed.name not in KNOWN:
            return Refusal("unknown_command", f"unknown command {signed.name!r}", signed.label)
        return Command(signed.name, signed.args, signed.nonce)
