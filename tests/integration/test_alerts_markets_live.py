"""The session- and timeframe-aware alerts (issue 41) on a real Prometheus, scraping daemons
every second and evaluating the project's rules every second, on venue clocks that run faster
than the wall clock (`exchange.clock`, as `trader sandbox --venue alpaca` keeps one): the rules
judge a daemon by its own clock (trader_clock_timestamp_seconds), so a run on such a clock is
the real one time-lapsed. Where a test shortens an alert's `for:`, it divides the project's
duration by the venue clock's speed (`time_lapsed`: 2m becomes 2 s at 60x), so the alert waits
as long in venue time as it would live.

- A stock daemon (two XNYS stocks, hour bars, 3600x) from a Friday afternoon over the weekend
  to Monday afternoon: none of the session-aware alerts is even pending in Friday's session,
  while the market is closed, or in Monday's session once the open's first quote poll is in
  (until then the quote is Friday's: QuoteStale may pend, as live, and its `for:` covers
  it), and no alert fires at all (the session-aware ones with `for:` time-lapsed; TraderDown,
  judged by scrapes, after eight failed ones as the real rule), while its clock is not a
  simulated one (trader_clock_simulated 0: nothing silenced).
- The same kind of daemon (minute bars, 60x) in session: its quotes stop (the venue answers
  without them) while its bars go on, and TraderQuoteStale fires; it was quiet before.
- A 24/7 crypto daemon on minute bars (6x, the ccxt emulator) whose tick hangs on a bars
  answer the venue holds back: TraderTickStale fires within three bars of the stuck tick.
- A daemon on an exchange calendar that exchange_calendars ends soon (chosen at run time),
  started the day before that end: TraderCalendarEndsSoon fires, and past the end its
  ticks go on, on the exchange's regular week, with TraderCalendarFallback firing.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import time
import urllib.request
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import aiohttp
import backtesting
import pytest

from tests.integration.daemon import metrics_port, running, stop, ticks
from tests.integration.emulated import live_env, recorded_bars
from tests.integration.market_alerts import (
    SCRAPED,
    SCRAPES_TO_FIRE,
    SESSION_AWARE,
    accelerated_venue,
    first,
    keep_log,
    seen,
    time_lapsed,
)
from tests.integration.prometheus import (
    RunningPrometheus,
    prometheus,
    rule_for,
    seconds,
    shortened_rules,
    wait_for,
)
from tests.integration.sandboxed import daemon_env, start_sandbox, wall_instant
from tests.recorded import AAPL_1D, XSHG_600977_5MIN
from trader.domain import Timeframe
from trader.emulator import EmulatorServer, Fault
from trader.emulator.sandbox_replay import recorded_bars as bars_of
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration

NEW_YORK = ZoneInfo("America/New_York")
STOCKS = ("GOOG/USD", "AAPL/USD")
# Google's recorded daily bars (the `backtesting` package's GOOG.csv) and Apple's
# (tests/data/AAPL_1d_2004_2006.csv.gz), laid by the sandbox on New York's sessions.
STOCK_DATA = (Path(backtesting.__file__).parent / "test" / "GOOG.csv", AAPL_1D)
HOLD_S = 30  # the venue's clock stands at its start this long: the daemon starts meanwhile
SLACK_S = 20.0  # a scrape, an evaluation and a poll on a busy machine
NEVER_SILENCED = "max_over_time(trader_clock_simulated[{w}])"


def stock_sandbox(tmp: Path, start: datetime, timeframe: str, bar_seconds: str) -> tuple:
    return start_sandbox(
        tmp, "alpaca", STOCKS, STOCK_DATA, "--timeframe", timeframe, "--bar-seconds",
        bar_seconds, "--start", start.isoformat(), "--hold", str(HOLD_S),
        "--calendar", f"{STOCKS[0]}=XNYS", "--calendar", f"{STOCKS[1]}=XNYS", "--warmup", "605",
    )  # fmt: skip


def quote_settings(speed: float) -> dict[str, str]:
    """Quotes polled every half wall second, and a quote stale after four polls: the same
    bound in venue seconds as the venue's clock runs (a healthy daemon at any speed)."""
    return {
        "TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S": "0.5",
        "TRADER_MARKET__MAX_QUOTE_AGE_S": f"{4 * 0.5 * speed:g}",
    }


def up(prom: RunningPrometheus) -> float:
    """The wall time (epoch s) of the first scrape of the daemon."""
    wait_for(lambda: prom.value('up{job="trader"}') == 1, "a scrape", 60)
    return time.time()


def over(prom: RunningPrometheus, expr: str, start: float, end: float) -> float | None:
    """`expr` (a `{w}` in it: the window) over [start, end]."""
    return prom.value_at(expr.replace("{w}", f"{max(1, math.ceil(end - start))}s"), end)


def venue_time(ready: dict, wall_s: float) -> str:
    """The sandbox's time (New York) at the wall-clock instant `wall_s`."""
    env = ready["env"]
    origin = datetime.fromisoformat(env["TRADER_EXCHANGE__CLOCK__ORIGIN"])
    wall = datetime.fromisoformat(env["TRADER_EXCHANGE__CLOCK__WALL_ORIGIN"]).timestamp()
    ran = timedelta(seconds=max(0.0, wall_s - wall) * float(env["TRADER_EXCHANGE__CLOCK__SPEED"]))
    return f"{(origin + ran).astimezone(NEW_YORK):%a %H:%M}"


def all_alerts(prom: RunningPrometheus) -> list[str]:
    return [rule["name"] for rule in prom.rules() if rule["type"] == "alerting"]


def new_york_days(stamps: list[str]) -> set[date]:
    return {datetime.fromisoformat(s).astimezone(NEW_YORK).date() for s in stamps}


def test_the_alerts_under_test_are_the_projects():
    names = {*SESSION_AWARE, SCRAPED, "TraderCalendarEndsSoon", "TraderCalendarFallback"}
    for alert in sorted(names):
        rule_for(alert)  # AssertionError: no such alert in the project's rules
    assert seconds(rule_for("TraderQuoteStale")) > 0, "QuoteStale pages on one evaluation"
    assert seconds(rule_for("TraderTickStale")) > 0, "TickStale pages on one evaluation"


async def test_a_held_fault_holds_the_answer_until_the_faults_are_cleared():
    venue = accelerated_venue(
        {"SOL/USDT": (recorded_bars(300), "continuous")}, Timeframe("1m"), 1.0,
        datetime.now(UTC).replace(second=0, microsecond=0),
    )  # fmt: skip
    async with EmulatorServer(venue.market) as server, aiohttp.ClientSession() as http:
        server.faults.add(Fault("hold", path="/api/v3/klines", times=-1))
        url = f"{server.base_url}/api/v3/klines?symbol=SOLUSDT&interval=1m&limit=2"
        answer = asyncio.create_task(http.get(url))
        await asyncio.sleep(1.0)
        assert not answer.done(), "the venue answered while it should hang"
        server.faults.clear()
        response = await asyncio.wait_for(answer, 10)
        assert response.status == 200
        assert len(await response.json()) == 2


# --- 1. a stock daemon over a weekend ---------------------------------------------------------

FRIDAY = datetime(2025, 3, 7, 14, 50, tzinfo=NEW_YORK)  # the last hours of the week's session
MONDAY = datetime(2025, 3, 10, 15, 30, tzinfo=NEW_YORK)  # Monday's session (clocks went forward)
FRIDAY_CLOSE = datetime(2025, 3, 7, 16, 0, tzinfo=NEW_YORK)
MONDAY_OPEN = datetime(2025, 3, 10, 9, 30, tzinfo=NEW_YORK)
WEEKEND_SPEED = 3600  # an hour bar every wall second
# The open's first quote poll (0.5 s), a scrape (1 s) and an evaluation (1 s), and a second for
# a busy machine: wall seconds after the open in which the quote may still be Friday's.
OPEN_GRACE_S = 4.5


@pytest.mark.timeout(400)
def test_a_stock_daemon_over_a_weekend_raises_no_alert(cli, tmp_path):
    # At 3600x every `for:` would shrink below a second: floored at three of this Prometheus's
    # one-second evaluations, and TraderDown's at eight of its one-second scrapes (each with a
    # one-second timeout) as the real rule waits out eight, so a scrape or two slowed by a
    # busy machine page nothing; an alert held over the 65 wall seconds of the weekend still
    # fires (a daemon that stopped answering: TraderDown).
    lapsed = time_lapsed(SESSION_AWARE, WEEKEND_SPEED, floor_s=3.0) | time_lapsed(
        [SCRAPED], WEEKEND_SPEED, floor_s=float(SCRAPES_TO_FIRE)
    )
    rules = shortened_rules(tmp_path / "rules", lapsed)
    sandbox, ready = stock_sandbox(tmp_path, FRIDAY, "1h", "1")
    env = daemon_env(tmp_path, ready) | quote_settings(WEEKEND_SPEED)
    clock_runs = wall_instant(ready, FRIDAY)
    closed = wall_instant(ready, FRIDAY_CLOSE), wall_instant(ready, MONDAY_OPEN)
    try:
        with running(cli.start("run", "--log-format", "json", env=env)) as daemon:
            port = metrics_port(daemon, timeout=clock_runs - time.time())
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus", rules) as prom:
                begin = up(prom)
                daemon.wait_for("ready", timeout=max(1.0, clock_runs - time.time()))
                time.sleep(max(0.0, wall_instant(ready, MONDAY) - time.time()))
                time.sleep(3)  # the last scrapes and evaluations
                end = time.time()
                states = seen(prom, SESSION_AWARE, begin, end)
                weekend = seen(prom, SESSION_AWARE, *closed)
                friday = seen(prom, SESSION_AWARE, begin, closed[0])
                monday = seen(prom, SESSION_AWARE, closed[1] + OPEN_GRACE_S, end)
                when = {a: venue_time(ready, first(prom, a, "pending", begin, end)) for a in states}
                fired = {a: s for a, s in seen(prom, all_alerts(prom), begin, end).items()
                         if "firing" in s}  # fmt: skip
                simulated = over(prom, NEVER_SILENCED, begin, end)
                session = [
                    over(prom, f'{f}(trader_market_in_session{{symbol="{STOCKS[0]}"}}[{{w}}])',
                         begin, end)
                    for f in ("min_over_time", "max_over_time")
                ]  # fmt: skip
                reached = over(prom, "max_over_time(trader_clock_timestamp_seconds[{w}])",
                               begin, end)  # fmt: skip
                speed = prom.value("trader_clock_speed")
            assert stop(daemon) == 0
            keep_log(daemon.lines, tmp_path / "daemon.jsonl")
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    print(
        f"weekend run: {end - begin:.0f} s wall; session-aware alerts seen {states} (over the "
        f"closed market {weekend}), first pending at {when}; firing {fired}"
    )
    # Judged on its own clock, not silenced: the sandbox's clock is not a simulated one.
    assert simulated == 0
    assert speed == WEEKEND_SPEED
    assert reached is not None
    assert reached >= MONDAY.timestamp()
    assert session == [0, 1], "the market was open and closed during the run"
    # It traded the week's last session and Monday's, and nothing in between.
    booked = new_york_days(ticks(tmp_path / "ledger.sqlite3"))
    assert booked == {date(2025, 3, 7), date(2025, 3, 10)}, booked
    assert weekend == {}, f"session-aware alerts while the market was closed: {weekend}"
    assert friday == {}, f"session-aware alerts in Friday's session: {friday}"
    assert monday == {}, f"session-aware alerts in Monday's session: {monday}"
    # Only at the open, until the first poll in session answers and is scraped, is the quote
    # still Friday's: QuoteStale may go pending then (as live; its `for:` covers it).
    assert set(states) <= {"TraderQuoteStale"}, states
    assert fired == {}, f"alerts fired over a quiet weekend: {fired}"


# --- 2. quotes that stop in session ------------------------------------------------------------

TUESDAY = datetime(2025, 3, 4, 10, 0, tzinfo=NEW_YORK)  # in session for six hours
MINUTE_SPEED = 60  # a minute bar every wall second
QUOTES_GONE = {  # the venue answers, without quotes: it stopped publishing them
    "kind": "status", "status": 200, "body": '{"quotes": {}}',
    "path": "/v2/stocks/quotes/latest", "times": -1,
}  # fmt: skip


def post_faults(ready: dict, faults: list[dict]) -> None:
    request = urllib.request.Request(  # noqa: S310 - loopback, the test's own sandbox
        ready["base_url"] + "/__emulator__/faults", data=json.dumps(faults).encode(),
        method="POST", headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
        assert answer.status == 200


@pytest.mark.timeout(300)
def test_quotes_that_stop_in_session_raise_quote_stale(cli, tmp_path):
    stale = "TraderQuoteStale"
    lapsed = time_lapsed([stale], MINUTE_SPEED)  # 2m -> 2 s
    rules = shortened_rules(tmp_path / "rules", lapsed)
    sandbox, ready = stock_sandbox(tmp_path, TUESDAY, "1m", "1")
    settings = quote_settings(MINUTE_SPEED)
    env = daemon_env(tmp_path, ready) | settings
    clock_runs = wall_instant(ready, TUESDAY)
    try:
        with running(cli.start("run", "--log-format", "json", env=env)) as daemon:
            port = metrics_port(daemon, timeout=clock_runs - time.time())
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus", rules) as prom:
                begin = up(prom)
                daemon.wait_for("ready", timeout=max(1.0, clock_runs - time.time()))
                time.sleep(max(0.0, clock_runs - time.time()) + 15)  # 15 venue minutes
                quiet_end = time.time()
                before = seen(prom, [stale], begin, quiet_end)
                ticked = prom.value("trader_last_tick_timestamp_seconds")
                post_faults(ready, [QUOTES_GONE])
                stopped = time.time()
                max_age_wall = float(settings["TRADER_MARKET__MAX_QUOTE_AGE_S"]) / MINUTE_SPEED
                within = max_age_wall + seconds(lapsed[stale]) + SLACK_S
                wait_for(lambda: prom.alert_states().get(stale) == "firing", stale, within)
                fired = first(prom, stale, "firing", stopped, time.time() + 1)
                in_session = prom.value_at(f'trader_market_in_session{{symbol="{STOCKS[0]}"}}',
                                           fired)  # fmt: skip
                time.sleep(3)
                ticked_after = prom.value("trader_last_tick_timestamp_seconds")
            assert stop(daemon) == 0
            keep_log(daemon.lines, tmp_path / "daemon.jsonl")
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    print(f"{stale} fired {fired - stopped:.1f} s wall after the quotes stopped "
          f"({(fired - stopped) * MINUTE_SPEED:.0f} venue s); for: {lapsed[stale]}")  # fmt: skip
    assert before == {}, f"{stale} before the quotes stopped: {before}"
    assert in_session == 1
    # The bars went on: ticks still ran after the quotes stopped.
    assert ticked is not None
    assert ticked_after is not None
    assert ticked_after > ticked


# --- 3. a stuck scheduler on one-minute crypto bars ------------------------------------------

CRYPTO_SPEED = 6  # a minute bar every ten wall seconds
MINUTE = Timeframe("1m")


@pytest.mark.timeout(240)
async def test_a_stuck_one_minute_scheduler_raises_tick_stale_within_three_bars(cli, tmp_path):
    stale = "TraderTickStale"
    lapsed = time_lapsed([stale], CRYPTO_SPEED)
    rules = shortened_rules(tmp_path / "rules", lapsed)
    origin = datetime.now(UTC).replace(second=0, microsecond=0)
    venue = accelerated_venue(
        {"SOL/USDT": (recorded_bars(600), "continuous")}, MINUTE, CRYPTO_SPEED, origin
    )
    async with EmulatorServer(venue.market) as server:
        env = live_env(server.base_url, tmp_path / "ledger.sqlite3") | venue.env() | {
            "TRADER_MARKET__SYMBOLS": "SOL/USDT",
            "TRADER_SCHEDULE__SETTLE_DELAY_S": "3",  # venue seconds: half a wall second
            "TRADER_EXCHANGE__TIMEOUT_S": "600",  # a request may hang ten wall minutes
            "TRADER_EXCHANGE__RETRY_ATTEMPTS": "1",
            "TRADER_SCHEDULE__SHUTDOWN_DEADLINE_S": "5",
        } | quote_settings(CRYPTO_SPEED)  # fmt: skip
        with running(cli.start("run", "--log-format", "json", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus", rules) as prom:
                begin = await asyncio.to_thread(up, prom)
                await asyncio.to_thread(
                    wait_for, lambda: (prom.value('sum(trader_ticks_total{outcome="ok"})') or 0)
                    >= 2, "two ok ticks", 60 + 3 * 60 / CRYPTO_SPEED,
                )  # fmt: skip
                # The venue now holds back every bars answer: the next tick hangs on it.
                server.faults.add(Fault("hold", path="/api/v3/klines", times=-1))
                stuck = time.time()
                before = seen(prom, [stale], begin, stuck)
                await asyncio.to_thread(
                    wait_for, lambda: prom.alert_states().get(stale) == "firing", stale,
                    3 * 60 / CRYPTO_SPEED + SLACK_S,
                )  # fmt: skip
                fired = first(prom, stale, "firing", stuck, time.time() + 1)
                pending = first(prom, stale, "pending", stuck, time.time() + 1)
                due = prom.value_at("trader_next_tick_due_timestamp_seconds", fired)
                server.faults.clear()  # the held answers go out: the daemon can stop
            code = await asyncio.to_thread(stop, daemon)
            keep_log(daemon.lines, tmp_path / "daemon.jsonl")
    assert before == {}, f"{stale} before the scheduler got stuck: {before}"
    assert due is not None
    assert due >= venue.venue_seconds(stuck) - 60, "the stuck tick is the one after the fault"
    bars = (venue.venue_seconds(fired) - due) / 60
    expression = (venue.venue_seconds(pending) - due) / 60
    print(
        f"{stale}: true {expression:.2f} bars after the stuck tick was due, firing after "
        f"{bars:.2f} bars ({fired - stuck:.1f} wall s after the venue began holding its bars, "
        f"at {CRYPTO_SPEED}x; "
        f"for: {rule_for(stale)} lapsed to {lapsed[stale]}); daemon stopped with {code}"
    )
    # Live (1x), the alert fires its expression's delay plus the project's `for:` after the
    # stuck tick was due: within three one-minute bars.
    assert expression * 60 + seconds(rule_for(stale)) <= 3 * 60
    assert bars <= 3


# --- 4. a calendar that ends soon ---------------------------------------------------------------

CALENDAR_SPEED = 3600  # an hour bar every wall second


def ending_calendar() -> tuple[str, datetime]:
    """An exchange calendar exchange_calendars bounds within the next year (its data end,
    not the year ahead it builds for every calendar), and its last session's close; the
    Shanghai one (lunch break and all) when it is one of them."""
    import exchange_calendars  # noqa: PLC0415 - slow to import

    horizon = datetime.now(UTC) + timedelta(days=365)
    bounded = []
    for name, factory in exchange_calendars.calendar_utils._default_calendar_factories.items():
        bound = factory.bound_max()
        if bound is not None and datetime.now(UTC).date() < bound.date() < horizon.date():
            bounded.append((bound.date(), name != "XSHG", name))
    if not bounded:
        pytest.fail("no calendar exchange_calendars ends within a year: pick another bound")
    _, _, name = min(bounded)
    calendar = exchange_calendars.get_calendar(name)
    return name, calendar.last_minute.to_pydatetime() + timedelta(minutes=1)


@pytest.mark.timeout(300)
async def test_a_calendar_near_its_end_warns_then_runs_on_the_regular_week(cli, tmp_path):
    soon, fallback = "TraderCalendarEndsSoon", "TraderCalendarFallback"
    name, last_close = ending_calendar()
    lapsed = time_lapsed([soon, fallback], CALENDAR_SPEED)
    rules = shortened_rules(tmp_path / "rules", lapsed)
    # The day before the last session, before its open (30 h before the last close): the
    # daemon trades the calendar's last two sessions, then the next day's past its end.
    origin = last_close - timedelta(hours=30)
    symbol = "SH600977/USDT"
    recording = bars_of(read_recording(XSHG_600977_5MIN, symbol))  # prices only: new times
    venue = accelerated_venue(
        {symbol: (recording, name)}, Timeframe("1h"), CALENDAR_SPEED, origin, hold_s=HOLD_S
    )
    after = last_close + timedelta(hours=22)  # the next weekday's morning, past the end
    async with EmulatorServer(venue.market) as server:
        env = live_env(server.base_url, tmp_path / "ledger.sqlite3") | venue.env() | {
            "TRADER_MARKET__SYMBOLS": symbol,
            "TRADER_MARKET__CALENDARS": json.dumps({symbol: name}),
            "TRADER_SCHEDULE__SETTLE_DELAY_S": "60",
            "TRADER_SCHEDULE__MISFIRE_GRACE_S": "10800",
        } | quote_settings(CALENDAR_SPEED)  # fmt: skip
        with running(cli.start("run", "--log-format", "json", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon, HOLD_S)
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus", rules) as prom:
                begin = await asyncio.to_thread(up, prom)
                await asyncio.to_thread(daemon.wait_for, "ready", HOLD_S)
                exported = prom.value(
                    f'trader_calendar_last_session_timestamp_seconds{{calendar="{name}"}}'
                )
                await asyncio.to_thread(
                    wait_for, lambda: prom.alert_states().get(soon) == "firing", soon,
                    seconds(lapsed[soon]) + SLACK_S,
                )  # fmt: skip
                warned = time.time()
                await asyncio.sleep(max(0.0, venue.wall(after) - time.time()))
                await asyncio.sleep(3)
                end = time.time()
                fell_back = seen(prom, [fallback], begin, end)
                fell_back_at = first(prom, fallback, "firing", begin, end)
                flag = prom.value(f'trader_calendar_fallback{{calendar="{name}"}}')
            assert await asyncio.to_thread(stop, daemon) == 0
            keep_log(daemon.lines, tmp_path / "daemon.jsonl")
    booked = [datetime.fromisoformat(t) for t in ticks(tmp_path / "ledger.sqlite3")]
    # The last session's own last tick comes a settle delay after its close: not past it.
    past = [t for t in booked if t > last_close + timedelta(hours=1)]
    print(
        f"{name} ends {last_close:%Y-%m-%d %H:%M} UTC; exported {exported}; {soon} firing "
        f"at venue {datetime.fromtimestamp(venue.venue_seconds(warned), UTC):%Y-%m-%d %H:%M}; "
        f"{fallback} firing at venue "
        f"{datetime.fromtimestamp(venue.venue_seconds(fell_back_at), UTC):%Y-%m-%d %H:%M}; "
        f"{len(past)} ticks past the end: {[f'{t:%m-%d %H:%M}' for t in past]}"
    )
    assert exported is not None
    assert exported == last_close.timestamp(), "the close of the calendar's last session"
    assert venue.venue_seconds(warned) < last_close.timestamp(), "warned before the end"
    assert "firing" in fell_back.get(fallback, set()), fell_back
    assert venue.venue_seconds(fell_back_at) > last_close.timestamp() - 3600
    assert flag == 1
    # Ticks went on past the end, on the regular week's sessions in the exchange's zone.
    assert len(past) >= 2, past
    # The log says so: at the start (before the end), and once past the end.
    said = [
        datetime.fromisoformat(line["timestamp"]).timestamp()
        for line in daemon.lines
        if line.get("level") == "warning" and line.get("calendar") == name
    ]
    ended = venue.wall(last_close)
    assert [t for t in said if t < ended], f"no warning naming {name} at the start"
    assert [t for t in said if t > ended], f"no warning naming {name} past its end"
