"""What `trader doctor --venue alpaca` makes of an account's flags. The account is the one
alpaca-py 0.44 answers in its own test (tests/trading/trading_client/test_account_routes.py,
`test_get_account`: a $103,820.56 margin account, multiplier "4", shorting enabled), changed
one field at a time as Alpaca documents the field (docs.alpaca.markets, "Account")."""

from __future__ import annotations

import json

import pytest

from trader.config.schema import Settings
from trader.doctor.alpaca_account import Symbols, account_findings, worst

# alpaca-py 0.44, tests/trading/trading_client/test_account_routes.py, test_get_account.
RECORDED = json.loads("""{
  "account_blocked": false, "accrued_fees": "0", "account_number": "010203ABCD",
  "buying_power": "262113.632", "cash": "-23140.2", "created_at": "2019-06-12T22:47:07.99658Z",
  "currency": "USD", "daytrade_count": 0, "daytrading_buying_power": "262113.632",
  "equity": "103820.56", "id": "e6fe16f3-64a4-4921-8928-cadf02f92f98",
  "initial_margin": "63480.38", "last_equity": "103529.24",
  "last_maintenance_margin": "38000.832", "non_marginable_buying_power": "98945.02",
  "long_market_value": "126960.76", "maintenance_margin": "38088.228", "multiplier": "4",
  "pattern_day_trader": false, "portfolio_value": "103820.56",
  "regt_buying_power": "80680.36", "short_market_value": "0", "shorting_enabled": true,
  "sma": "0", "status": "ACTIVE", "trade_suspended_by_user": false, "trading_blocked": false,
  "transfers_blocked": false, "options_buying_power": "262113.632",
  "options_approved_level": "1", "options_trading_level": "1"
}""")
STOCK_AND_COIN = Symbols(["AAPL/USD"], ["BTC/USD"])


def findings(symbols: Symbols = STOCK_AND_COIN, settings: Settings | None = None, **changed):
    return account_findings(RECORDED | changed, settings or Settings(), symbols)


def effect(found, field: str) -> str:
    (one,) = [f for f in found if f.what.startswith(field)]
    return f"{one.level}: {one.effect}"


def test_the_recorded_margin_account_is_usable_and_says_why():
    found = findings()
    assert worst(found) == "note"  # the multiplier is a note, nothing worse
    assert effect(found, "status") == "ok: Alpaca accepts orders"
    assert effect(found, "multiplier").startswith("note: a margin account: buying power 262113")
    assert effect(found, "equity") == (
        "ok: +291.32 (+0.28%) since the previous close; Alpaca judges the pattern-day-trader "
        "rule on last_equity"
    )
    assert effect(found, "pattern_day_trader").startswith("ok: last_equity 103529.24 is at least")


@pytest.mark.parametrize("field", ["trading_blocked", "account_blocked", "trade_suspended_by_user"])
def test_any_block_makes_it_unusable_with_what_the_daemon_does(field):
    found = findings(**{field: True})
    assert worst(found) == "unusable"
    assert "Alpaca refuses every order, and the daemon records each as a rejection" in effect(
        found, field
    )


def test_an_account_not_yet_active_is_unusable():
    assert effect(findings(status="APPROVAL_PENDING"), "status").startswith(
        "unusable: Alpaca refuses every order"
    )


def test_pattern_day_trading_is_judged_on_last_equity_not_equity():
    # Equity above $25,000 today, but the previous close (what Alpaca judges) under it.
    limited = findings(equity="30000", last_equity="24000", daytrade_count=3)
    assert effect(limited, "pattern_day_trader").startswith(
        "degraded: 3 day trades in five sessions with last_equity 24000 under 25000"
    )
    room = findings(equity="24000", last_equity="26000", daytrade_count=3)
    assert effect(room, "pattern_day_trader").startswith("ok: last_equity 26000 is at least")
    two = findings(equity="20000", last_equity="20000", daytrade_count=2)
    assert effect(two, "pattern_day_trader").startswith("ok: 1 more day trade(s)")
    crypto_only = findings(Symbols([], ["BTC/USD"]), last_equity="100", daytrade_count=3)
    assert effect(crypto_only, "pattern_day_trader").startswith("ok: the pattern-day-trader rule")


def test_a_cash_account_that_cannot_short_degrades_a_daemon_that_wants_to():
    cash = {"multiplier": "1", "shorting_enabled": False}
    wants = Settings(strategy={"allow_short": True})
    found = findings(settings=wants, **cash)
    assert worst(found) == "degraded"
    assert effect(found, "shorting_enabled").startswith(
        "degraded: sells are limited to what is held, but strategy.allow_short = true"
    )
    assert effect(found, "multiplier").startswith("note: a cash account: no leverage")
    assert effect(findings(**cash), "shorting_enabled") == (
        "ok: sells are limited to what is held, as the daemon trades"
    )


def test_crypto_not_enabled_refuses_the_pairs():
    assert effect(findings(crypto_status="INACTIVE"), "crypto_status").startswith(
        "degraded: Alpaca refuses every order for BTC/USD"
    )
    coins_only = findings(Symbols([], ["BTC/USD"]), crypto_status="INACTIVE")
    assert worst(coins_only) == "unusable"


def test_maxdiff_is_told_the_venue_forbids_resting_both_sides():
    maxdiff = Settings(strategy={"name": "maxdiff"}, exchange={"venue": "alpaca"})
    assert effect(findings(settings=maxdiff), "exchange.resting_both_sides") == (
        "ok: Alpaca forbids resting both sides: maxdiff rests one at a time"
    )
    forced = Settings(
        strategy={"name": "maxdiff"},
        exchange={"venue": "alpaca", "resting_both_sides": "allowed"},
    )
    assert effect(findings(settings=forced), "exchange.resting_both_sides").startswith(
        "degraded: maxdiff rests a buy and a sell at once, and Alpaca refuses the second"
    )
    assert not [f for f in findings() if f.what.startswith("exchange.resting_both_sides")]
