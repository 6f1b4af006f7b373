"""Alpaca's settings: the seed system's variable names, and the opt-ins live trading needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trader.config.loader import load_settings
from trader.config.strict import config_refusal

PAPER_KEY, PAPER_SECRET = "PKPAPERKEY12345", "paper-secret-value-0123456789"
LIVE_KEY, LIVE_SECRET = "AKLIVEKEY678901", "live-secret-value-9876543210"
SEED = {
    "ALP_KEY_ID": PAPER_KEY,
    "ALP_SECRET_KEY": PAPER_SECRET,
    "ALP_KEY_ID_PROD": LIVE_KEY,
    "ALP_SECRET_KEY_PROD": LIVE_SECRET,
    "TRADER_EXCHANGE__VENUE": "alpaca",
    "TRADER_MARKET__SYMBOLS": "AAPL/USD,BTC/USD",
    "TRADER_BROKER__CURRENCY": "USD",
}


def load(environ: dict[str, str], config: Path | None = None):
    return load_settings(config, environ=environ, dotenv_file=None, secrets_dir=None)


def test_the_seed_names_set_both_environments_keys_and_paper_picks_which():
    loaded = load(SEED | {"PAPER": "1"})
    alpaca = loaded.settings.exchange.alpaca
    assert alpaca.paper is True
    assert [k.get_secret_value() for k in alpaca.credentials() if k] == [PAPER_KEY, PAPER_SECRET]
    live = load(SEED | {"PAPER": "0"}).settings.exchange.alpaca
    assert [k.get_secret_value() for k in live.credentials() if k] == [LIVE_KEY, LIVE_SECRET]
    assert str(loaded.origins["exchange.alpaca.key_id"]) == "environment (ALP_KEY_ID)"
    assert set(loaded.secret_values()) >= {PAPER_KEY, PAPER_SECRET, LIVE_KEY, LIVE_SECRET}


def test_paper_0_alone_never_trades_live_and_says_so():
    loaded = load(SEED | {"PAPER": "0"})
    refusal = config_refusal(loaded.settings, loaded.origins)
    assert refusal is not None
    assert "PAPER=0 alone never enables live trading" in refusal
    assert "broker.live_confirmation" in refusal
    mode_only = load(SEED | {"PAPER": "0", "TRADER_BROKER__MODE": "live"})
    assert "live_confirmation" in str(config_refusal(mode_only.settings, mode_only.origins))
    opted_in = load(
        SEED
        | {"PAPER": "0", "TRADER_BROKER__MODE": "live", "TRADER_BROKER__LIVE_CONFIRMATION": "1"}
    )
    assert config_refusal(opted_in.settings, opted_in.origins) is None


def test_the_paper_account_is_paper_trading_and_orders_to_it_need_the_opt_ins():
    paper = load(SEED)
    assert config_refusal(paper.settings, paper.origins) is None  # the in-process paper broker
    sent = load(SEED | {"TRADER_BROKER__MODE": "live"})
    assert "live_confirmation" in str(config_refusal(sent.settings, sent.origins))


def test_keys_in_a_config_file_are_refused_for_alpaca(tmp_path):
    config = tmp_path / "trader.toml"
    config.write_text(
        f'[exchange]\nvenue = "alpaca"\n[exchange.alpaca]\nkey_id = "{PAPER_KEY}"\n'
        f'secret_key = "{PAPER_SECRET}"\n'
    )
    env = {
        "TRADER_MARKET__SYMBOLS": "BTC/USD",
        "TRADER_BROKER__CURRENCY": "USD",
        "TRADER_BROKER__MODE": "live",
        "TRADER_BROKER__LIVE_CONFIRMATION": "true",
    }
    loaded = load(env, config)
    refusal = config_refusal(loaded.settings, loaded.origins)
    assert refusal is not None
    assert "exchange.alpaca.key_id is in a config file" in refusal
    assert PAPER_KEY not in refusal


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_paper_switch_that_is_not_a_flag_is_an_error_naming_it(value):
    with pytest.raises(Exception, match="PAPER") as raised:
        load(SEED | {"PAPER": value})
    assert PAPER_SECRET not in str(raised.value)
