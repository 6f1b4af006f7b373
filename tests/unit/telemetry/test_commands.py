"""Signed commands: only a fresh, unused, correctly signed command of a known name passes."""

from __future__ import annotations

import hashlib
import hmac
import json

from trader.telemetry.commands import Command, CommandVerifier, Refusal, sign

SECRET = "a-shared-secret-of-some-length"
NOW = 1_767_225_600


def verifier() -> CommandVerifier:
    return CommandVerifier(SECRET.encode(), window_s=30)


def test_a_signed_fresh_command_is_accepted_once():
    check = verifier()
    payload = sign(SECRET, "pause", timestamp=NOW, nonce="nonce-0001")
    accepted = check.verify(payload, NOW + 5)
    assert accepted == Command("pause", {}, "nonce-0001")
    replayed = check.verify(payload, NOW + 6)
    assert isinstance(replayed, Refusal)
    assert (replayed.result, replayed.command) == ("replayed", "pause")


def test_the_signature_is_the_documented_hmac_so_a_shell_can_make_one():
    body = json.loads(sign(SECRET, "flatten", timestamp=NOW, nonce="abcdefgh", args={"b": 1}))
    message = f'{NOW}\nabcdefgh\nflatten\n{{"b":1}}'.encode()
    assert body["signature"] == hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()


def test_an_unsigned_a_wrongly_signed_or_a_tampered_command_is_refused():
    check = verifier()
    unsigned = json.dumps({"command": "pause", "timestamp": NOW, "nonce": "nonce-0002"}).encode()
    assert check.verify(unsigned, NOW).result == "malformed"  # type: ignore[union-attr]
    wrong_key = sign("another-secret-entirely", "pause", timestamp=NOW, nonce="nonce-0003")
    assert check.verify(wrong_key, NOW).result == "bad_signature"  # type: ignore[union-attr]
    body = json.loads(sign(SECRET, "pause", timestamp=NOW, nonce="nonce-0004"))
    body["command"] = "flatten"  # signed for pause, sent as flatten
    tampered = check.verify(json.dumps(body).encode(), NOW)
    assert isinstance(tampered, Refusal)
    assert (tampered.result, tampered.command) == ("bad_signature", "flatten")
    # The refused nonce was not spent: the genuine command still passes.
    assert isinstance(
        check.verify(sign(SECRET, "pause", timestamp=NOW, nonce="nonce-0004"), NOW), Command
    )


def test_a_command_outside_the_window_is_stale_even_when_its_signature_is_good():
    check = verifier()
    old = sign(SECRET, "resume", timestamp=NOW - 31, nonce="nonce-0005")
    future = sign(SECRET, "resume", timestamp=NOW + 31, nonce="nonce-0006")
    assert check.verify(old, NOW).result == "stale"  # type: ignore[union-attr]
    assert check.verify(future, NOW).result == "stale"  # type: ignore[union-attr]


def test_garbage_and_unknown_commands_are_refused_with_bounded_labels():
    check = verifier()
    for payload in (b"\xff\xfe", b"[]", b"{", b"x" * 5000):
        refusal = check.verify(payload, NOW)
        assert isinstance(refusal, Refusal)
        assert (refusal.result, refusal.command) == ("malformed", "invalid")
    unknown = check.verify(sign(SECRET, "sell-everything", timestamp=NOW, nonce="nonce-0007"), NOW)
    assert isinstance(unknown, Refusal)
    assert (unknown.result, unknown.command) == ("unknown_command", "invalid")


def test_the_secret_never_appears_in_a_refusal():
    check = verifier()
    for payload in (
        sign("wrong-secret-here", "pause", timestamp=NOW, nonce="nonce-0008"),
        sign(SECRET, "pause", timestamp=0, nonce="nonce-0009"),
    ):
        refusal = check.verify(payload, NOW)
        assert isinstance(refusal, Refusal)
        assert SECRET not in refusal.reason
    assert SECRET not in repr(check)


def test_old_nonces_are_forgotten_once_they_could_no_longer_pass():
    check = verifier()
    for i in range(100):
        assert isinstance(
            check.verify(sign(SECRET, "pause", timestamp=NOW + i, nonce=f"n-{i:06d}"), NOW + i),
            Command,
        )
    later = NOW + 1000
    assert isinstance(
        check.verify(sign(SECRET, "pause", timestamp=later, nonce="n-final!"), later), Command
    )
    assert len(check._seen) == 1
