"""Live mode refuses to start with a clear message: with keys in a config file, or with
another running instance on the same symbol (same host, any ledger) or on the same ledger
(without the confirmation or the keys: tests/integration/test_cli.py). A ledger belongs to
one mode for good."""

from __future__ import annotations

import json
import signal
from decimal import Decimal

import pytest

from tests.integration.conftest import clean_env
from tests.integration.sandboxed import KEY, daemon_env, start_sandbox
from trader.broker.factory import build_broker
from trader.broker.safety import StartRefused
from trader.config.schema import Settings
from trader.ledger import Database
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration


def refusal(result) -> dict:
    lines = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    return next(x for x in lines if x["event"] in {"refusing to start", "cannot start"})


def test_keys_in_a_config_file_are_refused(cli, tmp_path):
    config = tmp_path / "live.toml"
    config.write_text(
        '[broker]\nmode = "live"\nlive_confirmation = true\n'
        '[exchange]\napi_key = "key-in-a-file"\napi_secret = "secret-in-a-file"\n'
    )
    result = cli.run("run", "--config", str(config), env=clean_env())
    assert result.returncode == 78
    reason = refusal(result)["reason"]
    assert "keep keys out of config files" in reason
    assert "secret-in-a-file" not in result.stderr + result.stdout


def test_a_second_instance_on_a_symbol_or_a_ledger_refuses_to_start(cli, tmp_path):
    sandbox, ready = start_sandbox(tmp_path)
    env = daemon_env(tmp_path, ready) | {"TRADER_INSTANCE": "first"}
    try:
        first = cli.start("run", env=env)
        first.wait_for("ready", timeout=120)
        # Another ledger, the same account and symbol: the host-wide symbol lock says no.
        other = env | {
            "TRADER_INSTANCE": "second",
            "TRADER_LEDGER__PATH": str(tmp_path / "other.sqlite3"),
            "TRADER_MARKET__SYMBOLS": "SOL/USDT",
            "TRADER_STRATEGY__PER_SYMBOL": "{}",
        }
        second = cli.run("run", env=other)
        # The same ledger, another symbol: the ledger's lock says no.
        third = cli.run(
            "run",
            env=env | {"TRADER_INSTANCE": "third", "TRADER_MARKET__SYMBOLS": "BTC/USDT"},
        )
        first.process.send_signal(signal.SIGTERM)
        assert first.finish(timeout=60) == 0
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    assert second.returncode == 78
    reason = refusal(second)["reason"]
    assert "SOL/USDT on binance" in reason
    assert "instance 'first'" in reason
    assert "stop that daemon first" in reason
    assert KEY not in second.stderr  # the account is named by a hash of its key
    assert third.returncode == 78
    assert "ledger" in refusal(third)["reason"]
    assert "instance 'first'" in refusal(third)["reason"]


async def test_a_paper_ledger_never_turns_live_nor_a_live_one_paper(tmp_path):
    paper = Settings(ledger={"path": tmp_path / "paper.sqlite3"})
    database = await Database.open(paper.ledger.path)
    try:
        await TradingLedger(database).open("USDT", Decimal(1000))

        class Feed:
            exchange = object()

        live = paper.model_copy(update={"broker": paper.broker.model_copy(update={"mode": "live"})})
        with pytest.raises(StartRefused, match="records a paper account"):
            await build_broker(live, Feed(), {}, database, paper_time())  # type: ignore[arg-type]
        await ReconciliationLedger(database).set_baseline({"USDT": Decimal(5)}, paper_time())
        with pytest.raises(StartRefused, match="records a live account"):
            await build_broker(paper, Feed(), {}, database, paper_time())  # type: ignore[arg-type]
    finally:
        await database.close()


def paper_time():
    from datetime import UTC, datetime  # noqa: PLC0415

    return datetime(2024, 1, 1, tzinfo=UTC)
