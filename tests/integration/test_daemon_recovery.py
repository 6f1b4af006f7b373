"""A live daemon (live mode, the real ccxt client) on `trader sandbox`'s Binance emulator, with
one-second bars, when the exchange goes away and comes back, and when it stops taking our keys.

The reported problems: after an outage during which the scheduled reconciliation failed, every
order was refused as "unreconciled" until the next scheduled one (minutes with the default
300 s); and a key refused mid-run was not counted as `authentication`: ccxt raises Binance's
HTTP 401 -2015 as DDoSProtection once the client has authenticated before (ccxt 4.5 binance.py
handle_errors), and the live broker's failed calls were not counted at all.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.daemon import metric, metrics_port, running
from tests.integration.sandboxed import KEY, SECRET, daemon_env, start_sandbox

pytestmark = pytest.mark.integration

INTERVAL_S = 12  # the scheduled reconciliation: far enough apart that the contrast shows
# Per venue: its pairs on the sandbox, the paths that ask for our keys, its answer to a key
# it does not take, and the settings a person must check. Binance: HTTP 401 -2015
# REJECTED_MBX_KEY (Binance's REST API error codes) on the signed endpoints (the public ones
# ask for no key); Alpaca: HTTP 401 40110000 on every endpoint, market data too (alpaca-py's
# fixtures; trader/market/alpaca/errors.py).
REFUSED = {
    "binance": (("SOL/USDT", "BTC/USDT"),
                ("/api/v3/order", "/api/v3/openOrders", "/api/v3/allOrders", "/api/v3/myTrades",
                 "/api/v3/account", "/sapi/*"),
                '{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}',
                "exchange.api_key, exchange.api_secret"),
    "alpaca": (("SOL/USD", "BTC/USD"), ("*",),
               '{"code": 40110000, "message": "request is not authorized"}',
               "exchange.alpaca.key_id and exchange.alpaca.secret_key"),
}  # fmt: skip


def faults(ready: dict, plan: list[dict] | None) -> None:
    """Add faults to the sandbox (`plan`), or clear them all (None)."""
    data = json.dumps(plan).encode() if plan is not None else None
    request = urllib.request.Request(  # noqa: S310 - loopback, the test's own sandbox
        ready["base_url"] + "/__emulator__/faults",
        data=data,
        method="POST" if plan is not None else "DELETE",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
        answer.read()


def at(line: dict, key: str = "timestamp") -> float:
    return datetime.fromisoformat(line[key].replace("Z", "+00:00")).timestamp()


def keep_log(daemon, tmp: Path) -> None:  # type: ignore[no-untyped-def]
    with (tmp / "daemon.jsonl").open("w") as log:
        log.writelines(json.dumps(line) + "\n" for line in daemon.lines)


def test_the_first_tick_after_an_outage_trades_reconciled(cli, tmp_path):
    sandbox, ready = start_sandbox(tmp_path)
    env = daemon_env(tmp_path, ready) | {
        "TRADER_SCHEDULE__RECONCILE_INTERVAL_S": str(INTERVAL_S),
        "TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S": "0.2",
        "TRADER_EXCHANGE__RETRY_ATTEMPTS": "1",
    }
    try:
        with running(cli.start("run", env=env)) as daemon:
            daemon.wait_for("ready", 120)
            daemon.wait_for("order sent", 60)  # it trades
            faults(ready, [{"kind": "status", "status": 503, "times": -1, "body": "<html>503"}])
            # The scheduled reconciliation fails while the exchange is away: orders wait.
            daemon.wait_for("reconciliation incomplete", INTERVAL_S + 20)
            # Back just after a tick, so that the quote poll (every 0.2 s) is the first to
            # find it, well before the next tick's own calls could.
            while time.time() - at(daemon.wait_for("tick done", 10)) > 0.3:
                pass
            faults(ready, None)
            back = time.time()
            recovery = daemon.wait_for("exchange back: reconciling now", 10)
            reconciled = daemon.wait_for("reconciled", 30)
            sent = daemon.wait_for("order sent", 30)
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.finish(timeout=60) == 0
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
        keep_log(daemon, tmp_path)
    lines = daemon.lines
    refused = [
        x for x in lines
        if x["event"] == "order refused" and x["rule"] == "unreconciled" and at(x, "tick") > back
    ]  # fmt: skip
    decided = [at(x) for x in lines if x["event"] == "decision" and at(x, "tick") > back]
    waited = not_sent(tmp_path / "ledger.sqlite3", back)
    print(
        f"exchange back at {back:.3f}; recovery reconciliation logged {at(recovery) - back:.2f} s"
        f" later, done {at(reconciled) - back:.2f} s after it came back (scheduled every "
        f"{INTERVAL_S} s); first order sent {at(sent) - back:.2f} s after it came back, by the "
        f"tick of {sent['tick']}; ticks refused as unreconciled: {len(refused)}, orders not "
        f"sent for the venue's pause: {len(waited)}"
    )
    # The reconciliation ran before the first tick after the exchange was back decided
    # anything; no order after the return was refused as unreconciled or held back by the
    # broker's pause for a venue that was down, and orders went out again.
    assert at(reconciled) < min(decided)
    assert at(reconciled) - back < INTERVAL_S / 2  # not the next scheduled one
    assert refused == []
    assert waited == []
    assert at(sent, "tick") > back


def not_sent(ledger: Path, after: float) -> list[str]:
    """The orders the live broker kept back because the venue had been down, after `after`."""
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
        rows = c.execute(
            "SELECT client_order_id, at FROM order_events WHERE detail LIKE 'not sent: the "
            "venue asked us to wait%'"
        ).fetchall()
    return [cid for cid, when in rows if at({"t": when}, "t") > after]


@pytest.mark.parametrize("venue", ["binance", "alpaca"])
def test_a_key_refused_mid_run_is_counted_said_with_the_settings_and_halts(cli, tmp_path, venue):
    symbols, paths, body, settings = REFUSED[venue]
    sandbox, ready = start_sandbox(tmp_path, venue, symbols)
    env = daemon_env(tmp_path, ready) | {"TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S": "0.5"}
    try:
        with running(cli.start("run", env=env)) as daemon:
            port = metrics_port(daemon)
            daemon.wait_for("ready", 120)
            daemon.wait_for("order sent", 60)  # an order rests: each tick polls it, signed
            before = metric(port, "trader_exchange_errors_total", kind="authentication")
            faults(ready, [
                {"kind": "status", "path": path, "status": 401, "times": -1, "body": body}
                for path in paths
            ])  # fmt: skip
            said = daemon.wait_for("exchange refused our credentials: a person must fix them", 30)
            halted = daemon.wait_for("trading state", 30)
            counted = metric(port, "trader_exchange_errors_total", kind="authentication")
            halted_metric = metric(port, "trader_trading_state", state="halted")
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.finish(timeout=60) == 0
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
        keep_log(daemon, tmp_path)
    print(
        f"authentication errors: {before} -> {counted}; said: {said['check']!r}; "
        f"halted: {halted['reason']!r}"
    )
    assert before == 0
    assert counted >= 1
    assert said["check"].startswith(settings)
    assert halted["state"] == "halted"
    assert "refused our credentials" in halted["reason"]
    assert settings in halted["reason"]
    assert halted_metric == 1
    broker = [x for x in daemon.lines if x["event"] == "credentials refused"]
    assert broker  # the live broker's own line, with the same settings to check
    assert broker[0]["check"] == said["check"]
    text = (tmp_path / "daemon.jsonl").read_text()
    assert KEY not in text
    assert SECRET not in text
