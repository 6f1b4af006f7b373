"""A flood on the command topic, as anyone who may publish on the broker could send it, against
the real command handler and MQTT link (tests/security/surface.py): the rate limit refuses
payloads unread before their signature is checked, refusals are answered and logged once per
kind and interval with a count of the rest, every payload is counted, and trading events keep a
queue of their own that command answers cannot empty. The flood limits run on a clock the test
steps by hand (a monotonic clock in the daemon), so nothing here depends on how fast it runs."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from structlog.testing import capture_logs

from tests.security.surface import SECRET, open_surface
from trader.telemetry import events
from trader.telemetry.commands import sign

FLOOD = 20_000
RATE, BURST, INTERVAL = 1.0, 10, 10.0


class SteppedClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refused_lines(logs: list[dict]) -> list[dict]:
    return [entry for entry in logs if entry["event"] == "command refused"]


async def test_a_flood_is_refused_unread_and_answered_and_logged_once_per_interval(tmp_path):
    clock = SteppedClock()
    surface = await open_surface(
        tmp_path / "ledger.sqlite3", monotonic=clock, command_rate_per_s=RATE,
        command_burst=BURST, command_refusal_interval_s=INTERVAL,
    )  # fmt: skip
    try:
        garbage = [b"not a command %d" % n for n in range(FLOOD)]
        with capture_logs() as logs:
            for payload in garbage:  # all in one instant of the flood limits' clock
                await surface.control.on_command(payload)
        assert surface.counted() == FLOOD  # every payload counted
        counted = surface.parts.metrics.registry.get_sample_value  # type: ignore[union-attr]
        limited = counted("trader_mqtt_commands_total",
                          {"command": "invalid", "result": "rate_limited"})  # fmt: skip
        assert limited == FLOOD - BURST  # past the burst, nothing was read
        assert counted("trader_mqtt_commands_total",
                       {"command": "invalid", "result": "malformed"}) == BURST  # fmt: skip
        # One answer and one log line per kind of refusal, not one per payload.
        assert sorted(a["result"] for a in surface.answers()) == ["malformed", "rate_limited"]
        assert sorted(e["result"] for e in refused_lines(logs)) == ["malformed", "rate_limited"]

        # A signed command inside the flood is refused like the rest: the bucket cannot tell.
        pause = sign(SECRET, "pause", topic=surface.topic, timestamp=int(time.time()))
        await surface.control.on_command(pause)
        assert len(surface.answers()) == 2

        # An interval later the bucket has refilled and the next line counts what was held.
        clock.now += INTERVAL
        with capture_logs() as logs:
            await surface.control.on_command(pause)  # read again: carried out
            for payload in garbage[: BURST + 1]:
                await surface.control.on_command(payload)
        answers = surface.answers()[2:]
        assert [a["result"] for a in answers] == ["accepted", "malformed", "rate_limited"]
        assert "more refused as rate_limited" in answers[-1]["reason"]
        lines = {entry["result"]: entry["held_back"] for entry in refused_lines(logs)}
        assert lines == {"malformed": BURST - 1, "rate_limited": FLOOD - BURST}
    finally:
        await surface.close()


async def test_command_answers_cannot_push_trading_events_out_of_the_queue(tmp_path):
    """20,000 command answers and a day of trading events through one link with the default
    queue size (1,000): every order, fill, P&L and decision is still queued, the answers beyond
    the queue's size are dropped and counted as the other queue's."""
    surface = await open_surface(tmp_path / "ledger.sqlite3", queue_size=1000)
    link, at = surface.link, datetime(2026, 1, 5, tzinfo=UTC)
    trading = []
    for n in range(FLOOD):
        link.publish(events.command_result("one", at, "invalid", "malformed", "not JSON"))
        if n % 100 == 0:  # 200 trading events spread through the flood
            event = events.pnl(
                "one", at, equity=n, cash=n, fees_paid=0, drawdown=None, positions={},
                realized={}, unrealized=None, source="snapshot",
            )  # fmt: skip
            trading.append(event)
            link.publish(event)
    try:
        queued = link.queued()
        assert [e for e in queued if e.topic == "pnl"] == trading  # all of them, in order
        counted = surface.parts.metrics.registry.get_sample_value  # type: ignore[union-attr]
        assert counted("trader_mqtt_dropped_total", {"queue": "trading"}) == 0
        assert counted("trader_mqtt_dropped_total", {"queue": "other"}) == FLOOD - 1000
    finally:
        await surface.close()
