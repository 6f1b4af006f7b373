"""Fees as Alpaca posts them, end to end: a daemon on the Alpaca emulator trades a US stock and
a crypto pair from a Friday morning to the Tuesday after (2025-03-07 to 03-11), with the
settings `trader sandbox --venue alpaca` prints (the weekend run's: test_alpaca_weekend.py).

The emulator charges what Alpaca charges at each fill (a crypto fill's fee at tier 1 in what
it credits, a stock sale's SEC and FINRA fees in dollars) and posts it only after the end of
the fill's New York day, as Alpaca documents it: CFEE activities without an order id or a
time, FEE activities for a day's regulatory fees. The daemon estimates each fee when the fill
happens from its own fee tier, set to 2 here (22 bps for a taker, where tier 1 charges 25), so
that every crypto estimate is wrong until its posting corrects it. At the end:

- the daemon never halted, and every reconciliation on the way was ok (balances apart by no
  more than the estimates still to be posted);
- once `trader reconcile` has booked the postings, the ledger is the account: exactly, but for
  the estimates of the fills of the last day, still to be posted, by exactly what the venue
  charged for them beyond their estimate;
- the report's posted fees equal the CFEE and FEE activities, asset by asset, and the stock
  paid regulatory fees.

Data: GOOG.csv (the `backtesting` package's daily bars, laid one an hour on XNYS sessions) and
the recorded SOL/USDT hours as BTC/USD (tests/data/README.md), as in the weekend run.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time
import urllib.request
from collections import Counter
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from tests.integration.sandboxed import (
    KEY,
    SECRET,
    daemon_env,
    emulator,
    start_sandbox,
    stop_at,
    wall_instant,
)
from tests.integration.test_alpaca_weekend import GOOG, HOLD_S, START
from tests.integration.test_live_kill_run import ledger_state
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration
NEW_YORK = ZoneInfo("America/New_York")
END = datetime(2025, 3, 11, 0, 30, tzinfo=NEW_YORK)  # Monday's fees are posted at midnight
STOCK, PAIR = "GOOG/USD", "BTC/USD"


def activities(ready: dict, kind: str) -> list[dict]:
    """Every `kind` activity, as the daemon's SDK reads them (page by page, with its keys)."""
    out: list[dict] = []
    token = ""
    while True:
        url = f"{ready['base_url']}/v2/account/activities/{kind}?direction=asc&page_size=100"
        request = urllib.request.Request(  # noqa: S310 - loopback, the test's own sandbox
            url + (f"&page_token={token}" if token else ""),
            headers={"APCA-API-KEY-ID": KEY, "APCA-API-SECRET-KEY": SECRET},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
            page = json.loads(answer.read())
        out += page
        if len(page) < 100:
            return out
        token = page[-1]["id"]


def posted_by_asset(records: list[dict]) -> dict[str, Decimal]:
    """What the activities charged, by asset: a CFEE's coin `qty`, else its `net_amount`."""
    out: Counter[str] = Counter()
    for record in records:
        coin = Decimal(record.get("qty") or 0)
        if record["activity_type"] == "CFEE" and coin:
            out[record["symbol"].removesuffix("USD")] -= coin
        else:
            out["USD"] -= Decimal(record["net_amount"])
    return dict(out)


@pytest.mark.timeout(400)
def test_fees_estimated_at_the_fill_are_corrected_when_alpaca_posts_them(cli, tmp_path):
    sandbox, ready = start_sandbox(
        tmp_path, "alpaca", (STOCK, PAIR), (GOOG, SOLUSDT_1H),
        "--timeframe", "1h", "--bar-seconds", "0.5", "--start", START.isoformat(),
        "--hold", str(HOLD_S), "--calendar", f"{STOCK}=XNYS", "--warmup", "605",
    )  # fmt: skip
    env = daemon_env(tmp_path, ready) | {
        "TRADER_STRATEGY__NAME": "simple",
        "TRADER_EXCHANGE__ALPACA__CRYPTO_FEE_TIER": "2",
    }
    try:
        daemon = cli.start("run", "--log-format", "json", env=env)
        daemon.wait_for("ready", timeout=wall_instant(ready, START) - time.time())
        stopped, _ = stop_at(daemon, ready, END, tmp_path)
        assert stopped == 0
        reconcile = cli.run("reconcile", "--json", "--log-level", "ERROR", env=env)
        account = emulator(ready, "/__emulator__/account")[KEY]
        posted = activities(ready, "CFEE") + activities(ready, "FEE")
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)

    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    report = json.loads(reconcile.stdout)
    assert report["ok"], report["lines"]
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        verdicts = c.execute("SELECT ok, summary FROM reconciliations").fetchall()
        texts = [row[0] for row in c.execute("SELECT report FROM reconciliations")]
        halted = c.execute("SELECT state, reason FROM trading_state").fetchone()
        corrections = c.execute("SELECT estimated, posted, fills FROM fee_corrections").fetchall()
        pending = {
            row[0]: (Decimal(row[1]), row[2])
            for row in c.execute("SELECT fill_id, fee, fee_currency FROM fills WHERE "
                                 "fee_estimated = 1")
            if not any(f'"{row[0]}"' in fills for _e, _p, fills in corrections)
        }  # fmt: skip
    print(  # the run's figures, for whoever reads the log
        f"alpaca fees: {len(account['trades'])} trades, {len(posted)} fee activities "
        f"{dict(Counter(r['activity_type'] for r in posted))}, {len(corrections)} corrections, "
        f"posted {report['fees']['posted']}, still estimated {report['fees']['estimated']}, "
        f"{len(verdicts)} reconciliations"
    )
    print("\n".join(line for line in report["lines"] if "fee" in line or "balance" in line))
    # No halt, and every reconciliation on the way was ok (within the unposted estimates).
    assert halted[0] != "halted", halted
    assert len(verdicts) > 10
    assert all(ok == 1 for ok, _ in verdicts), [s for ok, s in verdicts if not ok]
    explained = [t for t in texts if "of fee estimates the venue has not posted yet" in t]
    assert explained, "no reconciliation met a balance apart by an unposted estimate"
    # The postings came at the ends of the days, and corrected estimates that were wrong.
    kinds = Counter((r["activity_type"], r["symbol"]) for r in posted)
    assert kinds[("CFEE", "BTCUSD")] > 5, kinds
    assert kinds[("FEE", "GOOG")] > 0, kinds  # the stock was sold, and paid for it
    assert all("order_id" not in r and "transaction_time" not in r for r in posted)
    assert any(Decimal(e) != Decimal(p) for e, p, _ in corrections)
    # The report's posted fees are the activities', asset by asset.
    assert {a: Decimal(v) for a, v in report["fees"]["posted"].items()} == posted_by_asset(posted)
    assert any(line.startswith("fees posted by the venue") for line in report["lines"])
    # The ledger is the account, but for the last day's estimates: by what the venue charged
    # for those fills beyond them.
    charged = {f"{t['symbol']}-{t['id'].replace('-', '')}": t for t in account["trades"]}
    beyond: Counter[str] = Counter()
    for fill_id, (estimate, currency) in pending.items():
        beyond[currency] += Decimal(charged[fill_id]["commission"]) - estimate
    state = asyncio.run(ledger_state(tmp_path / "ledger.sqlite3"))
    balances = {asset: Decimal(b["total"]) for asset, b in account["balances"].items()}
    assert state.portfolio.cash - beyond["USD"] == balances["USD"]
    for symbol in (STOCK, PAIR):
        base = symbol.split("/")[0]
        assert state.portfolio.amount(symbol) - beyond[base] == balances[base]
