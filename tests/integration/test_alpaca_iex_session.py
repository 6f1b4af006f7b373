"""A daemon on Alpaca's free IEX feed trades a stock through one regular session of sparse
minute bars without a gap halt, and counts the minutes with no trade; a free plan asked for
SIP stops it at start-up with one line naming the setting.

The stock, AAPL/USD on XNYS, is Google's recorded daily bars (the `backtesting` package's
GOOG.csv) laid one a minute on New York's sessions, and BTC/USD the recorded SOL/USDT hours
(tests/data/README.md says which rows), served by `trader sandbox --venue alpaca` on its
accelerated clock (the daemon's settings are the sandbox's, `simple` trading both). The
emulator's IEX feed leaves out the minutes with no IEX trade (`DataPlan`: 30 % of them, by a
hash of symbol and minute); its crypto bars are complete."""

from __future__ import annotations

import json
import signal
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.integration.daemon import scrape
from tests.integration.sandboxed import (
    KEY,
    SECRET,
    daemon_env,
    emulator,
    start_sandbox,
    stop_at,
    wall_instant,
)
from tests.integration.test_alpaca_weekend import GOOG
from tests.recorded import SOLUSDT_1H
from trader.exit_codes import EX_CONFIG

pytestmark = pytest.mark.integration
NEW_YORK = ZoneInfo("America/New_York")
OPEN = datetime(2025, 3, 4, 9, 30, tzinfo=NEW_YORK)  # a Tuesday's regular session
CLOSE = datetime(2025, 3, 4, 16, 0, tzinfo=NEW_YORK)
START = OPEN - timedelta(minutes=2)
HOLD_S = 45  # the venue's clock stands at START this long: the daemon starts meanwhile
BAR_SECONDS = 0.4  # a minute bar every 0.4 s: the session in 156 s
STOCK, PAIR = "AAPL/USD", "BTC/USD"


def served(ready: dict, feed: str, start: datetime, end: datetime) -> set[str]:
    """The minutes (bar times, as Alpaca writes them) the emulator serves on `feed`."""
    query = urllib.parse.urlencode({
        "symbols": "AAPL", "timeframe": "1Min", "feed": feed, "limit": 10_000,
        "start": start.isoformat(), "end": end.isoformat(),
    })  # fmt: skip
    request = urllib.request.Request(  # noqa: S310 - loopback, the test's own sandbox
        f"{ready['base_url']}/v2/stocks/bars?{query}",
        headers={"APCA-API-KEY-ID": KEY, "APCA-API-SECRET-KEY": SECRET},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
        return {bar["t"] for bar in json.loads(answer.read())["bars"].get("AAPL", [])}


def sample(metrics: dict, name: str, **labels: str) -> float:
    return sum(
        v for (n, got), v in metrics.items() if n == name and labels.items() <= dict(got).items()
    )


@pytest.mark.timeout(400)
def test_a_day_of_sparse_iex_minute_bars_trades_through_without_a_gap_halt(cli, tmp_path):
    sandbox, ready = start_sandbox(
        tmp_path, "alpaca", (STOCK, PAIR), (GOOG, SOLUSDT_1H),
        "--timeframe", "1m", "--bar-seconds", str(BAR_SECONDS), "--start", START.isoformat(),
        "--hold", str(HOLD_S), "--calendar", f"{STOCK}=XNYS",
    )  # fmt: skip
    env = daemon_env(tmp_path, ready) | {
        "TRADER_STRATEGY__NAME": "simple",
        "TRADER_STRATEGY__PER_SYMBOL": "{}",
    }
    try:
        daemon = cli.start("run", "--log-format", "json", env=env)
        clock_runs = wall_instant(ready, START)
        port = int(daemon.wait_for("serving metrics", timeout=clock_runs - time.time())["port"])
        daemon.wait_for("ready", timeout=clock_runs - time.time())
        stopped, seen = stop_at(
            daemon,
            ready,
            CLOSE + timedelta(minutes=1),
            tmp_path,
            lambda: (
                scrape(port),
                served(ready, "sip", OPEN - timedelta(hours=24), CLOSE),
                served(ready, "iex", OPEN - timedelta(hours=24), CLOSE),
                emulator(ready, "/__emulator__/account")[KEY],
            ),
        )
        metrics, sip, iex, account = seen
        assert stopped == 0
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)

    # The feed the daemon reads, said at start-up.
    said = [line for line in daemon.lines if line.get("event") == "alpaca stock data feed"]
    assert said, "the daemon did not say which feed it reads"
    assert said[0]["feed"] == "iex"
    assert said[0]["setting"] == "exchange.alpaca.feed"
    # The session on IEX is sparse; SIP has every minute.
    session = {t for t in sip if OPEN <= datetime.fromisoformat(t) < CLOSE}
    assert len(session) == 390
    quiet = session - iex
    assert 0.2 < len(quiet) / len(session) < 0.4
    # No gap, nothing missing: every minute with no IEX trade was a bar with no trade.
    for reason in ("gap", "missing_bar"):
        assert sample(metrics, "trader_data_skips_total", reason=reason) == 0, reason
    assert sample(metrics, "trader_bars_missing_total", symbol=STOCK) == 0
    counted = sample(metrics, "trader_feed_no_trade_bars_total", symbol=STOCK, feed="iex")
    stock_trades = [t for t in account["trades"] if t["symbol"] == "AAPL"]
    summary = {"session_minutes": len(session), "quiet_minutes": len(quiet),
               "no_trade_bars_counted": counted, "stock_trades": len(stock_trades)}  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))  # for the closing note
    # Every quiet minute of the session, and those of the warm-up's reach before it (the
    # window's first fill: at most its 32 bars and 8 to spare, of the last session).
    before = {t for t in sip - iex if datetime.fromisoformat(t) < OPEN}
    assert len(quiet) <= counted <= len(quiet) + min(len(before), 40), (counted, len(quiet))
    assert sample(metrics, "trader_feed_no_trade_bars_total", symbol=PAIR) == 0  # complete
    # And it traded the stock in the session.
    traded = [
        t for t in account["trades"]
        if t["symbol"] == "AAPL"
        and OPEN <= datetime.fromisoformat(t["transaction_time"]) <= CLOSE
    ]  # fmt: skip
    assert traded, "the stock never traded in the session"


@pytest.mark.timeout(200)
def test_sip_on_a_free_plan_stops_the_daemon_at_start_up_naming_the_setting(cli, tmp_path):
    sandbox, ready = start_sandbox(
        tmp_path, "alpaca", (STOCK, PAIR), (GOOG, SOLUSDT_1H),
        "--timeframe", "1m", "--start", START.isoformat(), "--hold", "600",
        "--calendar", f"{STOCK}=XNYS", "--data-plan", "free",
    )  # fmt: skip
    env = daemon_env(tmp_path, ready) | {"TRADER_EXCHANGE__ALPACA__FEED": "sip"}
    try:
        done = cli.run("run", "--log-format", "json", env=env)
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    assert done.returncode == EX_CONFIG, done.stderr[-2000:]
    lines = [json.loads(line) for line in (done.stdout + done.stderr).splitlines()
             if line.startswith("{")]  # fmt: skip
    errors = [line for line in lines if line.get("level") == "error"]
    assert len(errors) == 1, errors
    assert errors[0]["event"] == "cannot start"
    assert 'exchange.alpaca.feed = "sip"' in errors[0]["reason"]
    assert "subscription does not permit querying recent SIP data" in errors[0]["reason"]
