"""The seed system's Alpaca names (ALP_KEY_ID, ALP_SECRET_KEY, ALP_KEY_ID_PROD,
ALP_SECRET_KEY_PROD, PAPER) work, and their values never reach a log line, a metric or an
error message: not when PAPER=0 is refused, not in `trader config show`, and not from a daemon
whose keys the (emulated) Alpaca refuses."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.integration.conftest import clean_env
from tests.integration.daemon import metrics_port, running, stop
from tests.integration.emulated import walk
from tests.integration.loopback import http_get
from trader.domain import Timeframe
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument
from trader.emulator.venue import Venue
from trader.exit_codes import EX_CONFIG

pytestmark = pytest.mark.integration
PAPER_KEY, PAPER_SECRET = "PKSEEDPAPER4242", "seed-paper-secret-0a1b2c3d4e5f"
LIVE_KEY, LIVE_SECRET = "AKSEEDLIVE7777", "seed-live-secret-9z8y7x6w5v4u"
SECRETS = (PAPER_KEY, PAPER_SECRET, LIVE_KEY, LIVE_SECRET)


def seed_env(**extra: str) -> dict[str, str]:
    return clean_env(
        ALP_KEY_ID=PAPER_KEY, ALP_SECRET_KEY=PAPER_SECRET, ALP_KEY_ID_PROD=LIVE_KEY,
        ALP_SECRET_KEY_PROD=LIVE_SECRET, TRADER_EXCHANGE__VENUE="alpaca",
        TRADER_MARKET__SYMBOLS="BTC/USD", TRADER_BROKER__CURRENCY="USD", **extra,
    )  # fmt: skip


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_paper_0_alone_is_refused_with_the_reason_and_no_secret(cli):
    done = cli.run("run", env=seed_env(PAPER="0"))
    assert done.returncode == EX_CONFIG
    assert "PAPER=0 alone never enables live trading" in done.stdout + done.stderr
    assert_no_secret(done.stdout + done.stderr)
    shown = cli.run("config", "show", "--json", env=seed_env(PAPER="0"))
    assert shown.returncode == 0, shown.stderr
    assert '"source": "environment (PAPER)"' in shown.stdout
    assert_no_secret(shown.stdout + shown.stderr)


async def test_keys_alpaca_refuses_stay_secret_in_logs_and_metrics(cli, tmp_path):
    start = Timeframe("1m").floor(datetime.now(UTC)) - timedelta(minutes=200)
    market = EmulatedMarket(lambda: datetime.now(UTC))
    bars = walk("BTC/USD", start, 400, 60_000.0, 3)
    market.add_listing(Instrument("BTC/USD"), bars)
    venue = Venue(market, unique_client_ids=True)
    venue.open_account(PAPER_KEY, {"USD": Decimal(1000)})
    # The emulator knows the key with another secret: every call is refused (401).
    server = EmulatorServer(market, venue=venue, secrets={PAPER_KEY: "not-the-secret"},
                            dialect="alpaca")  # fmt: skip
    async with server:
        env = seed_env(
            TRADER_EXCHANGE__API_BASE_URL=server.base_url,
            TRADER_EXCHANGE__TIMEOUT_S="2",
            TRADER_LEDGER__PATH=str(tmp_path / "ledger.sqlite3"),
            TRADER_METRICS__PORT="0",
            TRADER_FORECAST__MODEL="baseline",
            TRADER_MARKET__TIMEFRAME="1m",
            TRADER_MARKET__CONTEXT_BARS="32",
        )
        with running(cli.start("run", "--log-format", "json", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            # Until the daemon has logged the refusal of its first call (the markets' list), on
            # a busy machine too.
            refused = "exchange unreachable: trading waits for it; retrying"
            if not any(line["event"] == refused for line in daemon.lines):
                await asyncio.to_thread(daemon.wait_for, refused, 60.0)
            _, metrics = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/metrics")
            _, ready = await asyncio.to_thread(http_get, f"http://127.0.0.1:{port}/readyz")
            await asyncio.to_thread(stop, daemon)
    logged = "\n".join(str(line) for line in daemon.lines)
    assert "401" in logged or "not authorized" in logged  # Alpaca's refusal was logged
    assert any(r.startswith("/v2/assets") for r in server.requests)  # through the SDK
    for text in (logged, metrics, ready):
        assert_no_secret(text)
