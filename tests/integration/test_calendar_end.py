"""A daemon whose venue clock starts two days before a calendar's last known session trades on
past it, on the exchange's regular weekly sessions, and says so.

The calendar is chosen at run time: of exchange_calendars' calendars that end, the one that
ends first (XSHG, preferred among those ending the same day since the stock is Shanghai's:
2026-12-31 in 4.13). The venue is the Alpaca emulator (`trader sandbox --venue alpaca`) on its
accelerated clock (an hour bar every half second), its stock laid on that calendar's sessions
(which go on past the end just as the daemon's do): the recorded Shanghai 5-minute bars of
600977 (tests/data/README.md), one an hour; beside it the recorded SOL/USDT hours as BTC/USD.
From 09:00 two days before the end to noon of the second regular session after it:

- at start, a warning names the calendar, its last known session and the fix, and /metrics and
  /readyz say the same (the last session's close; fallback 0; the check ok but saying it);
- when the clock passes the end, one log line says the calendar runs on the regular week;
- the stock ticks on: bars in the regular sessions after the end, and ticks in them at the
  times the last known session had them, never a skip as outside_calendar; /metrics says
  fallback 1 and /readyz says so while staying ok.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as time_of_day
from zoneinfo import ZoneInfo

import exchange_calendars as xc
import pytest
from exchange_calendars.calendar_utils import _default_calendar_factories

from tests.integration.daemon import scrape
from tests.integration.loopback import http_get
from tests.integration.sandboxed import daemon_env, start_sandbox, stop_at, wall_instant
from tests.recorded import SOLUSDT_1H, XSHG_600977_5MIN

pytestmark = pytest.mark.integration
HOLD_S = 60  # the venue's clock stands at the start this long: the daemon starts meanwhile
STOCK, PAIR = "SHA/USD", "BTC/USD"
REGULAR = "the exchange's regular weekly sessions (no holidays)"


def ending_first() -> tuple[str, date]:
    bounded = sorted(
        (f.bound_max().date(), n != "XSHG", n)
        for n, f in _default_calendar_factories.items()
        if f.bound_max() is not None
    )
    if not bounded:
        pytest.skip("no exchange_calendars calendar ends any more")
    bound, _, name = bounded[0]
    return name, bound


def readyz(port: int) -> dict:
    _, body = http_get(f"http://127.0.0.1:{port}/readyz")
    return json.loads(body)["checks"]["calendars"]


@pytest.mark.timeout(400)
def test_a_daemon_trades_on_past_its_calendar_s_end_and_says_so(cli, tmp_path):
    name, bound = ending_first()
    library = xc.get_calendar(
        name, start=(bound - timedelta(days=20)).isoformat(), end=bound.isoformat()
    )
    zone = ZoneInfo(str(library.tz))
    last_close = library.schedule["close"].iloc[-1].to_pydatetime()
    start = datetime.combine(bound - timedelta(days=2), datetime.min.time(), zone).replace(hour=9)
    regular_days = [
        d
        for d in (bound + timedelta(days=n) for n in range(1, 10))
        if library.weekmask[d.weekday()] == "1"
    ][:2]
    end = datetime.combine(regular_days[1], datetime.min.time(), zone).replace(hour=12)
    sandbox, ready = start_sandbox(
        tmp_path, "alpaca", (STOCK, PAIR), (XSHG_600977_5MIN, SOLUSDT_1H),
        "--timeframe", "1h", "--bar-seconds", "0.5", "--start", start.isoformat(),
        "--hold", str(HOLD_S), "--calendar", f"{STOCK}={name}", "--warmup", "200",
    )  # fmt: skip
    env = daemon_env(tmp_path, ready) | {"TRADER_STRATEGY__NAME": "simple"}
    try:
        daemon = cli.start("run", "--log-format", "json", env=env)
        clock_runs = wall_instant(ready, start)
        port = int(daemon.wait_for("serving metrics", timeout=clock_runs - time.time())["port"])
        warning = daemon.wait_for("calendar sessions run out", timeout=clock_runs - time.time())
        daemon.wait_for("ready", timeout=clock_runs - time.time())
        at_start, ready_at_start = scrape(port), readyz(port)
        stopped, (at_end, ready_at_end) = stop_at(
            daemon, ready, end, tmp_path, lambda: (scrape(port), readyz(port))
        )
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    assert stopped == 0

    # At start: the warning, with the date, what it will run on and the fix.
    last = f"{last_close.astimezone(zone):%Y-%m-%d %H:%M} {zone.key}"
    assert warning["level"] == "warning"
    assert (warning["calendar"], warning["last_known_session"]) == (name, last)
    assert warning["runs_on"] == f"will run on {REGULAR} after it"
    assert "upgrade exchange_calendars" in warning["fix"]
    label = (("calendar", name),)
    assert at_start[("trader_calendar_last_session_timestamp_seconds", label)] == (
        last_close.timestamp()
    )
    assert at_start[("trader_calendar_fallback", label)] == 0
    assert ready_at_start["ok"] is True
    assert f"{name}: exchange_calendars knows its sessions to {last}" in ready_at_start["detail"]
    assert "will run on" in ready_at_start["detail"]

    # Past the end: said once, in the log, the metric and /readyz (still ok).
    past = [x for x in daemon.lines if x["event"] == "calendar past its known sessions"]
    assert len(past) == 1, past
    assert past[0]["runs_on"] == f"runs on {REGULAR} since then"
    assert at_end[("trader_calendar_fallback", label)] == 1
    assert at_end[("trader_calendar_last_session_timestamp_seconds", label)] == (
        last_close.timestamp()
    )
    assert ready_at_end["ok"] is True
    assert f"runs on {REGULAR} since then" in ready_at_end["detail"]

    # The stock ticked on in the regular sessions after the end, never outside its calendar.
    assert at_end[("trader_data_skips_total", (("reason", "outside_calendar"),))] == 0
    assert not [x for x in daemon.lines if x["event"] == "no calendar for this time"]
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        bars = [
            datetime.fromtimestamp(row[0] / 1000, UTC)
            for row in c.execute("SELECT start_ms FROM bars WHERE symbol = ?", (STOCK,))
        ]
        ticks = [(datetime.fromisoformat(at), skipped) for at, skipped in c.execute(
            "SELECT at, skipped FROM ticks"
        )]  # fmt: skip
    for day in regular_days:
        assert any(b.astimezone(zone).date() == day for b in bars), f"no {STOCK} bar on {day}"

    def traded(day: date) -> list[time_of_day]:
        """The local times of the day's ticks where the stock was not skipped."""
        return sorted(
            at.astimezone(zone).time()
            for at, skipped in ticks
            if at.astimezone(zone).date() == day and STOCK not in json.loads(skipped)
        )

    # Each regular session after the end ticks as the last known one did (out of its sessions
    # the stock's quote is stale, as before the end).
    last_day = traded(last_close.astimezone(zone).date())
    assert last_day, "the stock never traded in its last known session"
    assert traded(regular_days[0]) == last_day
    assert traded(regular_days[1]) == [t for t in last_day if t < end.time()]
