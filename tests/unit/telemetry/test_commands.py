"""Signed commands: only a fresh, unused, correctly signed command of a known name, signed for
this daemon's topic, passes. Used nonces are kept in a real ledger."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path

import pytest

from trader.ledger import Database
from trader.ledger.nonces import CommandNonces
from trader.telemetry.commands import (
    MAX_DEPTH,
    Command,
    CommandVerifier,
    Refusal,
    nesting,
    sign,
)

SECRET = "a-shared-secret-of-some-length"
TOPIC = "trader/one/cmd"
NOW = 1_767_225_600


def verifier(topic: str = TOPIC) -> CommandVerifier:
    return CommandVerifier(SECRET.encode(), window_s=30, topic=topic)


@pytest.fixture
async def nonces(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    yield CommandNonces(database, limit=1000)
    await database.close()


async def verify(
    check: CommandVerifier, payload: bytes, now: float, nonces: CommandNonces
) -> Command | Refusal:
    checked = check.check(payload, now)
    return checked if isinstance(checked, Refusal) else await check.admit(checked, now, nonces)


def signed(command: str = "pause", **kwargs) -> bytes:  # type: ignore[no-untyped-def]
    return sign(SECRET, command, **({"topic": TOPIC, "timestamp": NOW} | kwargs))


async def test_a_signed_fresh_command_is_accepted_once(nonces):
    payload = signed(nonce="nonce-0001")
    accepted = await verify(verifier(), payload, NOW + 5, nonces)
    assert accepted == Command("pause", {}, "nonce-0001")
    replayed = await verify(verifier(), payload, NOW + 6, nonces)
    assert isinstance(replayed, Refusal)
    assert (replayed.result, replayed.command) == ("replayed", "pause")


def test_the_signature_is_the_documented_hmac_so_a_shell_can_make_one():
    body = json.loads(signed("flatten", nonce="abcdefgh", args={"b": 1}))
    message = f'{TOPIC}\n{NOW}\nabcdefgh\nflatten\n{{"b":1}}'.encode()
    assert body["signature"] == hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()


async def test_an_unsigned_a_wrongly_signed_or_a_tampered_command_is_refused(nonces):
    check = verifier()
    unsigned = json.dumps({"command": "pause", "timestamp": NOW, "nonce": "nonce-0002"}).encode()
    assert check.check(unsigned, NOW).result == "malformed"  # type: ignore[union-attr]
    wrong_key = sign("another-secret-entirely", "pause", topic=TOPIC, timestamp=NOW)
    assert check.check(wrong_key, NOW).result == "bad_signature"  # type: ignore[union-attr]
    body = json.loads(signed(nonce="nonce-0004"))
    body["command"] = "flatten"  # signed for pause, sent as flatten
    tampered = check.check(json.dumps(body).encode(), NOW)
    assert isinstance(tampered, Refusal)
    assert (tampered.result, tampered.command) == ("bad_signature", "flatten")
    # The refused nonce was not spent: the genuine command still passes.
    assert isinstance(await verify(check, signed(nonce="nonce-0004"), NOW, nonces), Command)


def test_a_command_signed_for_another_daemon_is_refused():
    other = sign(SECRET, "pause", topic="trader/two/cmd", timestamp=NOW)
    refusal = verifier().check(other, NOW)
    assert isinstance(refusal, Refusal)
    assert refusal.result == "bad_signature"
    assert TOPIC in refusal.reason  # says what it must be signed for
    assert not isinstance(verifier("trader/two/cmd").check(other, NOW), Refusal)


def test_a_command_outside_the_window_is_stale_even_when_its_signature_is_good():
    check = verifier()
    assert check.check(signed("resume", timestamp=NOW - 31), NOW).result == "stale"  # type: ignore[union-attr]
    assert check.check(signed("resume", timestamp=NOW + 31), NOW).result == "stale"  # type: ignore[union-attr]


async def test_garbage_and_unknown_commands_are_refused_with_bounded_labels(nonces):
    check = verifier()
    for payload in (b"\xff\xfe", b"[]", b"{", b"x" * 5000, b"[" * 9 + b"]" * 9, b""):
        refusal = check.check(payload, NOW)
        assert isinstance(refusal, Refusal)
        assert (refusal.result, refusal.command) == ("malformed", "invalid")
    unknown = await verify(check, signed("sell-everything"), NOW, nonces)
    assert isinstance(unknown, Refusal)
    assert (unknown.result, unknown.command) == ("unknown_command", "invalid")


@pytest.mark.parametrize(
    "body",
    [
        {"nonce": "has a space in it"},
        {"nonce": "short"},
        {"nonce": "line\nbreak-0001"},
        {"command": "pause\nresume"},
        {"timestamp": 2**60},
        {"timestamp": -1},
        {"timestamp": True},
        {"timestamp": 1.5},
        {"args": []},
        {"signature": "é" * 64},  # hmac.compare_digest raises on non-ASCII text
        {"signature": "0" * 63},
    ],
)
def test_fields_of_the_wrong_form_are_malformed_before_any_signature_is_computed(body):
    fields = {"command": "pause", "args": {}, "timestamp": NOW, "nonce": "nonce-0010"}
    payload = json.dumps(fields | {"signature": "0" * 64} | body).encode()
    refusal = verifier().check(payload, NOW)
    assert isinstance(refusal, Refusal)
    assert refusal.result == "malformed"


def test_nesting_is_measured_without_parsing_and_strings_do_not_count():
    assert nesting(b'{"a": [1, {"b": "[[[[[[[[[[[[["}]}') == 3
    assert nesting(b'{"a": "\\"[[[[[[[[[[[["}') == 1
    assert nesting(b"[" * 4000) == MAX_DEPTH + 1  # stops counting past the limit


async def test_the_secret_never_appears_in_a_refusal(nonces):
    check = verifier()
    for payload in (
        sign("wrong-secret-here", "pause", topic=TOPIC, timestamp=NOW),
        signed(timestamp=0),
    ):
        refusal = check.check(payload, NOW)
        assert isinstance(refusal, Refusal)
        assert SECRET not in refusal.reason
    assert SECRET not in repr(check)


async def test_old_nonces_are_forgotten_once_they_could_no_longer_pass(nonces):
    check = verifier()
    for i in range(20):
        payload = signed(timestamp=NOW + i, nonce=f"n-{i:06d}")
        assert isinstance(await verify(check, payload, NOW + i, nonces), Command)
    assert await nonces.count() == 20
    later = NOW + 1000
    assert isinstance(await verify(check, signed(timestamp=later), later, nonces), Command)
    assert await nonces.count() == 1


async def test_a_flood_of_signed_commands_is_refused_beyond_the_limit(tmp_path):
    database = await Database.open(tmp_path / "ledger.sqlite3")
    try:
        small = CommandNonces(database, limit=3)
        results = [await verify(verifier(), signed(), NOW, small) for _ in range(4)]
    finally:
        await database.close()
    assert [isinstance(r, Command) for r in results] == [True, True, True, False]
    assert results[-1].result == "rate_limited"  # type: ignore[union-attr]


def test_the_readmes_worked_example_is_what_the_daemon_computes():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    secret = re.search(r"with the secret\s+`([^`]+)`", readme).group(1)  # type: ignore[union-attr]
    payload = re.search(r'```json\n\s*(\{"command".*\})\n', readme).group(1)  # type: ignore[union-attr]
    body = json.loads(payload)
    assert payload.encode() == sign(
        secret, body["command"], topic="trader/default/cmd", timestamp=body["timestamp"],
        nonce=body["nonce"], args=body["args"],
    )  # fmt: skip
    check = CommandVerifier(secret.encode(), window_s=30, topic="trader/default/cmd")
    assert not isinstance(check.check(payload.encode(), body["timestamp"]), Refusal)
    signed_bytes = b"trader/default/cmd\n1767225600\n9f1c2e3d4b5a6978\npause\n{}"
    assert f"the {len(signed_bytes)} bytes signed" in readme
    assert hmac.new(secret.encode(), signed_bytes, hashlib.sha256).hexdigest() == body["signature"]
