"""Signed commands as an attacker on the same MQTT broker would try them, against the real
command handler: a captured command replayed after a restart (same ledger) or sent to another
daemon that shares the key, and a small, deeply nested payload. Every payload is answered on
cmd/result, counted and logged."""

from __future__ import annotations

import time

from structlog.testing import capture_logs

from tests.security.surface import SECRET, open_surface
from tests.unit.service.test_parts import parts
from trader.ledger import Database
from trader.ledger.nonces import CommandNonces
from trader.logging import get_logger
from trader.service.control_surface import ControlSurface
from trader.service.parts import StopRequest
from trader.telemetry.commands import MAX_NONCES, CommandVerifier, Refusal, sign


async def test_a_captured_command_replayed_after_a_restart_is_refused(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    first = await open_surface(ledger)
    captured = sign(SECRET, "pause", topic=first.topic, timestamp=int(time.time()))
    try:
        await first.control.on_command(captured)
        assert first.answers()[-1]["result"] == "accepted"
    finally:
        await first.close()
    restarted = await open_surface(ledger)  # a new process: only the ledger is the same
    try:
        await restarted.control.on_command(captured)
        answer = restarted.answers()[-1]
    finally:
        await restarted.close()
    assert (answer["result"], answer["command"]) == ("replayed", "pause")


async def test_a_command_for_one_daemon_is_refused_by_another_sharing_the_key(tmp_path):
    one = await open_surface(tmp_path / "one.sqlite3", "one")
    two = await open_surface(tmp_path / "two.sqlite3", "two")
    try:
        for_one = sign(SECRET, "flatten", topic=one.topic, timestamp=int(time.time()))
        await two.control.on_command(for_one)  # captured on one's topic, sent to two's
        refused = two.answers()[-1]
        await one.control.on_command(for_one)
        accepted = one.answers()[-1]
    finally:
        await one.close()
        await two.close()
    assert (refused["result"], refused["command"]) == ("bad_signature", "flatten")
    assert "trader/two/cmd" in refused["reason"]
    assert accepted["result"] == "accepted"


async def test_a_small_deeply_nested_payload_is_answered_counted_and_logged():
    made = parts(mqtt={"enabled": True, "commands_enabled": True, "command_secret": SECRET,
                       "command_refusal_interval_s": 0})  # fmt: skip
    control = ControlSurface(made, StopRequest(), get_logger("test.security"))
    nested = b"[" * 2000 + b"]" * 2000  # 4,000 bytes: under the size limit
    for payload in (nested, b'{"command": ' + nested[:3000] + b"}", b'{"args":' * 500):
        with capture_logs() as logs:
            await control.on_command(payload)  # an escaping exception fails the test here
        assert [(e["event"], e["result"]) for e in logs] == [("command refused", "malformed")]
    counted = made.metrics.registry.get_sample_value  # type: ignore[union-attr]
    assert counted("trader_mqtt_commands_total", {"command": "invalid", "result": "malformed"}) == 3


async def test_a_captured_command_cannot_replay_when_the_clock_jumps_ahead_and_back(tmp_path):
    """The clock jumps an hour ahead and a command signed on it arrives (its claim would expire
    every older nonce); the clock is stepped back and the command captured before the jump is
    sent again, inside its window by the wall clock: refused, also after a restart."""
    ledger, window, now = tmp_path / "ledger.sqlite3", 30, int(time.time())
    verifier = CommandVerifier(SECRET.encode(), window, "trader/one/cmd")

    async def send(payload: bytes, at: float, nonces: CommandNonces) -> str:
        checked = verifier.check(payload, at)
        if isinstance(checked, Refusal):
            return checked.result
        verdict = await verifier.admit(checked, at, nonces)
        return verdict.result if isinstance(verdict, Refusal) else "accepted"

    captured = sign(SECRET, "pause", topic=verifier.topic, timestamp=now)
    database = await Database.open(ledger)
    nonces = CommandNonces(database, MAX_NONCES)
    try:
        assert await send(captured, now, nonces) == "accepted"
        ahead = now + 3600  # the clock jumps ahead
        assert await send(sign(SECRET, "resume", topic=verifier.topic, timestamp=ahead), ahead,
                          nonces) == "accepted"  # fmt: skip
        assert await send(captured, now + 5, nonces) != "accepted"  # stepped back
    finally:
        await database.close()
    database = await Database.open(ledger)  # a restart: the latest time is kept in the ledger
    try:
        again = CommandNonces(database, MAX_NONCES)
        assert await send(captured, now + 6, again) != "accepted"
        # The clock has caught up with the jump: commands signed on it pass again.
        caught_up = now + 3600 + 10
        assert await send(sign(SECRET, "resume", topic=verifier.topic, timestamp=caught_up),
                          caught_up, again) == "accepted"  # fmt: skip
    finally:
        await database.close()
