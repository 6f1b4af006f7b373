"""`trader doctor --venue alpaca` as a user runs it, against the Alpaca emulator: a paper
margin account, a cash account, a blocked one, SIP on a free data plan, keys Alpaca refuses,
and no keys. Read only: it never touches an order. The blocked account's body is alpaca-py
0.44's own recorded account (tests/trading/trading_client/test_account_routes.py,
`test_get_account`) with `trading_blocked` true; the bars are the recorded AAPL daily rows
(AAPL/USD, a US stock) and SOL/USDT hours (as BTC/USD), laid as minutes up to now."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.integration.conftest import TRADER, clean_env
from tests.recorded import AAPL_1D, SOLUSDT_1H
from tests.unit.doctor.test_alpaca_account import RECORDED
from trader.domain import Timeframe
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.emulator.alpaca_feeds import DataPlan
from trader.emulator.faults import Fault
from trader.emulator.sandbox_replay import recorded_bars, restamped
from trader.emulator.sessions import Sessions
from trader.emulator.venue import Venue
from trader.exit_codes import EX_CONFIG, EX_UNAVAILABLE
from trader.market.alpaca.wire import STOCK_STEP
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration
KEY, SECRET = "PKDOCTOR4242", "doctor-secret-0a1b2c3d4e5f6a7b8c9d"
MINUTE = Timeframe("1m")


@dataclass
class Ran:
    code: int
    out: str
    err: str


@asynccontextmanager
async def alpaca(
    account_type: str = "margin", *, free: bool = False, secret: str = SECRET
) -> AsyncIterator[EmulatorServer]:
    now = datetime.now(UTC)
    market = EmulatedMarket(lambda: datetime.now(UTC))
    stock = Instrument(
        "AAPL/USD", step_size=STOCK_STEP, min_qty=STOCK_STEP, min_notional=Decimal(1),
        asset_class="us_equity", fractionable=True,
    )  # fmt: skip
    for instrument, path in ((stock, AAPL_1D), (Instrument("BTC/USD"), SOLUSDT_1H)):
        bars = recorded_bars(read_recording(path, instrument.symbol))
        market.add_listing(instrument, restamped(bars[:400], MINUTE, 300, now))
    venue = Venue(market, unique_client_ids=True)
    venue.open_account(KEY, {"USD": Decimal(100_000), "AAPL": Decimal(0), "BTC": Decimal(0)})
    server = EmulatorServer(
        market, venue=venue, secrets={KEY: secret}, dialect="alpaca",
        sessions=Sessions.of("XNYS", now - timedelta(days=30), now + timedelta(days=30)),
        data_plan=DataPlan(free=free), account_type=account_type,  # type: ignore[arg-type]
    )  # fmt: skip
    async with server:
        yield server


async def doctor(server: EmulatorServer | None, **settings: str) -> Ran:
    env = clean_env(
        TRADER_EXCHANGE__API_BASE_URL=server.base_url if server else "http://127.0.0.1:9",
        TRADER_EXCHANGE__TIMEOUT_S="5", TRADER_MARKET__SYMBOLS="AAPL/USD,BTC/USD",
        TRADER_MARKET__CALENDARS=json.dumps({"AAPL/USD": "XNYS"}),
        TRADER_BROKER__CURRENCY="USD", TRADER_STRATEGY__NAME="maxdiff", **settings,
    )  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        TRADER, "doctor", "--venue", "alpaca", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    ran = Ran(process.returncode, out.decode(), err.decode())
    assert KEY not in ran.out + ran.err
    assert SECRET not in ran.out + ran.err
    assert "Traceback" not in ran.err, ran.err
    if server is not None:  # read only: not an order looked at, sent or cancelled
        assert not [r for r in server.requests if r.startswith("/v2/orders")]
        assert server.venue is not None
        assert not server.venue.accounts[KEY].orders
    return ran


KEYS = {"ALP_KEY_ID": KEY, "ALP_SECRET_KEY": SECRET}


def line(ran: Ran, start: str) -> str:
    found = [t.strip() for t in ran.out.splitlines() if t.strip().startswith(start)]
    assert found, ran.out
    return found[0]


async def test_the_paper_margin_account_is_ok_and_each_finding_says_what_the_daemon_does():
    async with alpaca() as server:
        ran = await doctor(server, TRADER_STRATEGY__ALLOW_SHORT="true", **KEYS)
    assert ran.code == 0, ran.out + ran.err
    assert ran.out.startswith(
        "trader doctor --venue alpaca: the paper account (exchange.alpaca.paper = true), read "
        "only: no order, no cancel"
    )
    assert line(ran, "ok       status ACTIVE") == "ok       status ACTIVE: Alpaca accepts orders"
    assert line(ran, "ok       trading_blocked false")
    assert line(ran, "ok       crypto_status ACTIVE").endswith("orders for BTC/USD are accepted")
    assert "the daemon may short stocks Alpaca lists as shortable" in line(ran, "ok       shorting")
    assert "a margin account" in line(ran, "note     multiplier")
    assert "last_equity" in line(ran, "ok       pattern_day_trader false, daytrade_count 0")
    assert line(ran, "ok       exchange.resting_both_sides auto").endswith(
        "maxdiff rests one at a time"
    )
    assert "the free feed" in line(ran, "ok       exchange.alpaca.feed iex")
    assert ran.out.rstrip().endswith("verdict: OK: the daemon can trade this account as configured")


async def test_a_cash_account_degrades_a_daemon_that_would_short():
    async with alpaca("cash") as server:
        shorts = await doctor(server, TRADER_STRATEGY__ALLOW_SHORT="true", **KEYS)
        longs = await doctor(server, **KEYS)
    assert shorts.code == 1, shorts.out + shorts.err
    assert "a cash account: no leverage, no shorting" in line(shorts, "note     multiplier 1")
    assert "strategy.allow_short = true" in line(shorts, "degraded shorting_enabled false")
    assert "verdict: DEGRADED: the daemon trades, but shorting_enabled false" in shorts.out
    assert longs.code == 0, longs.out
    assert line(longs, "ok       shorting_enabled false").endswith("as the daemon trades")


async def test_sip_on_a_free_plan_is_refused_and_the_daemon_would_read_no_bars():
    async with alpaca(free=True) as server:
        refused = await doctor(server, TRADER_EXCHANGE__ALPACA__FEED="sip", **KEYS)
    assert refused.code == EX_UNAVAILABLE, refused.out + refused.err
    finding = line(refused, "unusable exchange.alpaca.feed sip")
    assert "Alpaca refused a recent SIP bar of AAPL/USD" in finding
    assert "set exchange.alpaca.feed = iex, or subscribe to SIP" in finding
    assert "verdict: UNUSABLE: the daemon would trade nothing here: exchange.alpaca.feed" in (
        refused.out
    )
    async with alpaca(free=False) as server:
        allowed = await doctor(server, TRADER_EXCHANGE__ALPACA__FEED="sip", **KEYS)
    assert allowed.code == 0, allowed.out
    assert line(allowed, "ok       exchange.alpaca.feed sip").endswith("the plan allows SIP")


async def test_a_blocked_account_is_unusable():
    blocked = json.dumps(RECORDED | {"trading_blocked": True})
    async with alpaca() as server:
        server.faults.add(Fault("status", "/v2/account", "GET", status=200, body=blocked))
        ran = await doctor(server, **KEYS)
    assert ran.code == EX_UNAVAILABLE, ran.out + ran.err
    assert line(ran, "unusable trading_blocked true") == (
        "unusable trading_blocked true: trading is blocked: Alpaca refuses every order, and "
        "the daemon records each as a rejection with its reason"
    )
    assert "account ...ABCD" in ran.out  # the recorded account's number, its last four
    assert "verdict: UNUSABLE: the daemon would trade nothing here: trading_blocked true" in (
        ran.out
    )


async def test_keys_alpaca_refuses_and_no_keys_at_all():
    async with alpaca(secret="not-" + SECRET) as server:  # the key known with another secret
        refused = await doctor(server, **KEYS)
    assert refused.code == EX_UNAVAILABLE, refused.out + refused.err
    assert (
        "verdict: UNUSABLE: Alpaca refused the keys (exchange.alpaca.key_id and "
        "exchange.alpaca.secret_key)" in refused.out
    )
    none = await doctor(None)
    assert none.code == EX_CONFIG
    assert none.out == ""
    assert none.err.startswith(
        "trader doctor --venue alpaca: Alpaca needs exchange.alpaca.key_id and "
        "exchange.alpaca.secret_key"
    )
    assert len(none.err.strip().splitlines()) == 1
