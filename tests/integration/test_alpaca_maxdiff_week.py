"""maxdiff on Alpaca for a week of sessions (Monday 2025-03-10 to Friday 03-14, New York), as
`trader sandbox --venue alpaca` serves it and the daemon trades it with the settings the
sandbox prints: two US stocks, the recorded AAPL and MSFT daily bars (tests/data/README.md:
bokeh-sampledata's Quandl WIKI prices) laid one an hour on XNYS's sessions, both on maxdiff
with shorting allowed, so that a flat maxdiff wants a buy below and a sell above the market.

Alpaca refuses an order opposite a resting one of the same symbol (422 {"code": 42210000,
"message": "potential wash trade detected. use complex orders"}, github.com/Petersoj/
alpaca-java issue #145; 403 "cannot open a long buy while a short sell order is open"), so on
Alpaca (`exchange.resting_both_sides = auto`) maxdiff rests one side at a time: no buy and
sell of one stock are ever open together at the venue, and no order is refused as a wash
trade. One 42210000 answer is injected mid-week (the emulator's fault plan): the ledger
records that order as a rejection with Alpaca's reason, not as a lost order looked up and
declared "never reached the venue"; the ledger still equals the account at the end.

What reaches the venue is less than what maxdiff decides: the sandbox lists its stocks as not
lendable, so a short entry is refused before it leaves (with that reason), and the emulator
fills a resting limit only from bars that open after it was placed, which maxdiff's orders,
replaced every tick, never meet. So the decisions and the orders of the ledger show the
one-side choice, and the venue sees the buys."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.integration.sandboxed import daemon_env, emulator, start_sandbox, stop_at, wall_instant
from tests.recorded import AAPL_1D, MSFT_1D
from trader.emulator.sessions import Sessions

pytestmark = pytest.mark.integration
NEW_YORK = ZoneInfo("America/New_York")
START = datetime(2025, 3, 10, 9, 0, tzinfo=NEW_YORK)  # Monday, before the open
INJECT = datetime(2025, 3, 12, 11, 0, tzinfo=NEW_YORK)  # Wednesday morning
END = datetime(2025, 3, 14, 16, 30, tzinfo=NEW_YORK)  # Friday, after the close
HOLD_S = 60  # the venue's clock stands at START this long: the daemon starts meanwhile
STOCKS = ("AAPL/USD", "MSFT/USD")
WASH = "potential wash trade detected"
INJECTED = {
    "kind": "status", "path": "/v2/orders", "method": "POST", "status": 422,
    "body": json.dumps({"code": 42210000, "message": f"{WASH}. use complex orders"}),
}  # fmt: skip


def ended(order: dict) -> datetime | None:
    """When an order stopped resting at the venue (None: it still rests)."""
    for field in ("filled_at", "canceled_at", "expired_at", "failed_at"):
        if order.get(field):
            return datetime.fromisoformat(order[field])
    if order["status"] in {"new", "accepted", "partially_filled", "pending_new"}:
        return None
    return datetime.fromisoformat(order["updated_at"])


def both_sides_resting(orders: list[dict]) -> list[tuple[str, str]]:
    """Pairs of a buy and a sell of one symbol open at the venue at the same time."""
    far = datetime.max.replace(tzinfo=NEW_YORK)
    spans = [
        (o["symbol"], o["side"], datetime.fromisoformat(o["created_at"]), ended(o) or far, o["id"])
        for o in orders
    ]
    return [
        (a[4], b[4])
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if a[0] == b[0] and a[1] != b[1] and a[2] < b[3] and b[2] < a[3]
    ]


def rejections(ledger: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(ledger) as c:
        return c.execute(
            "SELECT client_order_id, detail FROM order_events WHERE status = 'rejected'"
        ).fetchall()


@pytest.mark.timeout(400)
def test_maxdiff_rests_one_side_at_a_time_on_alpaca_for_a_week(cli, tmp_path):
    sandbox, ready = start_sandbox(
        tmp_path, "alpaca", STOCKS, (AAPL_1D, MSFT_1D),
        "--timeframe", "1h", "--bar-seconds", "0.5", "--start", START.isoformat(),
        "--hold", str(HOLD_S), "--calendar", f"{STOCKS[0]}=XNYS",
        "--calendar", f"{STOCKS[1]}=XNYS", "--warmup", "605",
    )  # fmt: skip
    env = daemon_env(tmp_path, ready) | {
        "TRADER_STRATEGY__PER_SYMBOL": "{}",  # both stocks on maxdiff
        "TRADER_STRATEGY__ALLOW_SHORT": "true",
    }
    try:
        daemon = cli.start("run", "--log-format", "json", env=env)
        clock_runs = wall_instant(ready, START)
        daemon.wait_for("ready", timeout=clock_runs - time.time())
        time.sleep(max(0.0, wall_instant(ready, INJECT) - time.time()))
        emulator(ready, "/__emulator__/faults", [INJECTED])  # type: ignore[arg-type]
        stopped, _ = stop_at(daemon, ready, END, tmp_path)
        assert stopped == 0
        reconcile = cli.run("reconcile", "--json", "--log-level", "ERROR", env=env)
        account = emulator(ready, "/__emulator__/account")[ready["api_key"]]
        faults_left = emulator(ready, "/__emulator__/faults", [])["faults"]  # type: ignore[arg-type]
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)

    orders = account["orders"]
    ledger = tmp_path / "ledger.sqlite3"
    with sqlite3.connect(ledger) as c:
        decided = c.execute("SELECT tick, symbol, reason FROM decisions").fetchall()
        sent = c.execute("SELECT symbol, created_at, side FROM orders").fetchall()
    # maxdiff decided through the week's sessions, for both stocks...
    days = {datetime.fromisoformat(t).astimezone(NEW_YORK).date() for t, _, _ in decided}
    assert len(days) >= 4, sorted(days)
    assert {s for _, s, _ in decided} == set(STOCKS)
    # ...flat, it wanted both entries, and rested one of them: the side its forecast favours,
    one_side = [r for _, _, r in decided if "one side at a time, as the venue requires" in r]
    assert one_side, [r for _, _, r in decided][:10]
    assert {r.split()[2] for r in one_side} <= {"buy", "sell"}
    # never two sides of one stock in one tick's orders,
    per_tick: dict[tuple[str, str], set[str]] = {}
    for symbol, created, side in sent:
        per_tick.setdefault((symbol, created), set()).add(side)
    assert all(len(sides) == 1 for sides in per_tick.values()), per_tick
    # nor a buy and a sell of one stock open at once at the venue,
    assert orders
    sessions = Sessions.of("XNYS", START, END)
    assert all(sessions.is_open(datetime.fromisoformat(o["created_at"])) for o in orders)
    assert both_sides_resting(orders) == []
    # and the one wash-trade refusal is the injected one: a rejection with Alpaca's reason,
    # not a lost order.
    assert faults_left == 0  # it was used
    refused = [(cid, detail) for cid, detail in rejections(ledger) if WASH in detail]
    assert len(refused) == 1, refused
    ((cid, detail),) = refused
    assert "42210000" in detail
    with sqlite3.connect(ledger) as c:
        events = c.execute(
            "SELECT status, detail FROM order_events WHERE client_order_id = ?", (cid,)
        ).fetchall()
    assert not [d for _, d in events if "never reached the venue" in d], events
    # The ledger is the account.
    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    report = json.loads(reconcile.stdout)
    assert report["ok"], report["lines"]
