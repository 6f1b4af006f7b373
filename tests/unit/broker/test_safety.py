"""Live trading's guards, in process: the opt-ins, the flock locks, the capital cap."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from trader.broker.safety import (
    InstanceLocks,
    StartRefused,
    account_name,
    ledger_holder,
    take_live_locks,
    trading_capital,
)
from trader.config.schema import Settings
from trader.config.strict import config_refusal

NOW = datetime(2024, 3, 1, tzinfo=UTC)
KEY = "a-key-of-the-account"


def live(tmp_path, **broker) -> Settings:
    return Settings(
        instance="one",
        exchange={"api_key": KEY, "api_secret": "s3cret"},
        broker={"mode": "live", "live_confirmation": True, "lock_dir": tmp_path / "locks"} | broker,
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )


def test_the_three_opt_ins_and_where_the_keys_come_from(tmp_path):
    settings = live(tmp_path)
    assert config_refusal(settings, {}) is None
    assert config_refusal(Settings(), {}) is None  # paper needs nothing
    unconfirmed = live(tmp_path, live_confirmation=False)
    assert "live_confirmation" in (config_refusal(unconfirmed, {}) or "")
    keyless = Settings(broker={"mode": "live", "live_confirmation": True})
    assert "api_key" in (config_refusal(keyless, {}) or "")
    from_file = {"exchange.api_secret": "file config/live.toml"}
    assert "keep keys out of config files" in (config_refusal(settings, from_file) or "")
    from_env = {"exchange.api_key": "environment (TRADER_EXCHANGE__API_KEY)"}
    assert config_refusal(settings, from_env) is None


def test_a_held_symbol_or_ledger_is_refused_naming_its_holder_never_the_key(tmp_path):
    first = take_live_locks(live(tmp_path), ["SOL/USDT", "BTC/USDT"], NOW)
    try:
        other_ledger = live(tmp_path, lock_dir=tmp_path / "locks").model_copy(
            update={"ledger": live(tmp_path).ledger.model_copy(
                update={"path": tmp_path / "other.sqlite3"})}
        )  # fmt: skip
        with pytest.raises(StartRefused, match=r"BTC/USDT on binance .* instance 'one'") as held:
            take_live_locks(other_ledger, ["BTC/USDT"], NOW)
        assert KEY not in str(held.value)
        assert account_name(live(tmp_path)) in str(held.value)
        with pytest.raises(StartRefused, match=r"ledger .* is held by instance 'one'"):
            take_live_locks(live(tmp_path), ["ETH/USDT"], NOW)
        assert "instance 'one'" in (ledger_holder(tmp_path / "ledger.sqlite3") or "")
        # Another account may trade the same symbol on the same host.
        elsewhere = other_ledger.model_copy(
            update={"exchange": other_ledger.exchange.model_copy(
                update={"api_key": other_ledger.exchange.api_secret})}
        )  # fmt: skip
        take_live_locks(elsewhere, ["BTC/USDT"], NOW).release()
    finally:
        first.release()
    # Released (as the kernel does when the process dies): free again.
    assert ledger_holder(tmp_path / "ledger.sqlite3") is None
    take_live_locks(live(tmp_path), ["SOL/USDT"], NOW).release()


def test_a_failed_lock_keeps_none_of_the_others(tmp_path):
    held = InstanceLocks()
    held.take(tmp_path / "locks" / f"binance-{account_name(live(tmp_path))}-BTC_USDT.lock",
              "BTC", {"instance": "x"})  # fmt: skip
    with pytest.raises(StartRefused):
        take_live_locks(live(tmp_path), ["SOL/USDT", "BTC/USDT"], NOW)
    assert ledger_holder(tmp_path / "ledger.sqlite3") is None
    held.release()


@pytest.mark.parametrize(
    ("share", "limit", "balance", "capital"),
    [
        (1.0, None, "12345.678", "12345.67"),
        (0.1, None, "50000", "5000.00"),  # start live with 10% of capital
        (0.1, "1000", "50000", "1000.00"),  # and never more than the limit
        (1.0, "1000", "300", "300.00"),  # nor more than there is
    ],
)
def test_the_capital_cap(tmp_path, share, limit, balance, capital):
    settings = live(tmp_path, capital_share=share, capital_limit=limit)
    assert trading_capital(settings, Decimal(balance)) == Decimal(capital)
