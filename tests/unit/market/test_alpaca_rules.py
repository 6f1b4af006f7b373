"""Alpaca's account rules, checked before an order leaves: each refusal says why.

Sources: docs.alpaca.markets/docs/orders-at-alpaca (buying power of buys and of short sales:
the greater of the limit and 3% above the ask; extended hours: limit, day, 04:00-09:30 and
16:00-20:00 ET), alpaca.markets/support/how-do-you-trade-in-extended-hours-with-alpaca (the
same hours), Alpaca's "Pattern Day Trader Protection" (judged on last_equity), and the
calendar day's shape in Alpaca's calendar answer (`session_open` "0400", `session_close`
"2000", as alpaca-py's GetCalendarRequest model reads them)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from trader.market.alpaca.facts import buying_power, is_margin
from trader.market.alpaca.rules import OrderFacts, refusal, session_at, time_in_force

NEW_YORK = ZoneInfo("America/New_York")
STOCK = OrderFacts(
    symbol="AAPL/USD", side="buy", amount=Decimal(2), price=Decimal(190), limit=False,
    stock=True, asset={"tradable": True, "status": "active", "fractionable": False,
                       "shortable": False, "easy_to_borrow": False},
    held=Decimal(0), cash_available=Decimal(1000), session="regular", extended=False,
    last_equity=Decimal(10_000), day_trades=0, other_side_today=False,
)  # fmt: skip
LENDABLE = STOCK.asset | {"shortable": True, "easy_to_borrow": True}
# A trading day as Alpaca's /v2/calendar answers it (an early close shows in `close`).
DAY = {"date": "2025-03-03", "open": "09:30", "close": "16:00", "session_open": "0400",
       "session_close": "2000"}  # fmt: skip


def test_an_order_within_every_rule_may_go():
    assert refusal(STOCK) is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"asset": STOCK.asset | {"tradable": False}}, "not tradable"),
        ({"amount": Decimal("1.5")}, "whole shares only"),
        ({"session": "closed"}, "market for AAPL/USD is closed (no regular or extended"),
        ({"session": "pre"}, "pre-market session, and exchange.alpaca.extended_hours does not"),
        ({"side": "sell", "held": Decimal(1)}, "needs a margin account with shorting enabled"),
        ({"side": "sell", "held": Decimal(1), "margin": True}, "not shortable"),
        ({"side": "sell", "held": Decimal(2), "other_side_today": True, "day_trades": 3},
         "pattern-day-trader"),
        ({"amount": Decimal(6)}, "buying power 1000 is short of 1140"),
        ({"stock": False, "side": "sell", "held": Decimal(1)}, "does not short crypto"),
    ],
)  # fmt: skip
def test_each_rule_refuses_with_its_reason(change, words):
    why = refusal(replace(STOCK, **change))
    assert why is not None
    assert words in why


def test_the_pattern_day_trader_rule_judges_on_last_equity():
    fourth = replace(STOCK, side="sell", held=Decimal(2), other_side_today=True, day_trades=3)
    assert "last_equity 10000" in str(refusal(fourth))
    assert refusal(replace(fourth, last_equity=Decimal(30_000))) is None


def test_a_margin_account_shorts_lendable_stock_in_whole_shares_within_buying_power():
    short = replace(STOCK, side="sell", held=Decimal(0), asset=LENDABLE, margin=True,
                    ask=Decimal(190), cash_available=Decimal(10_000))  # fmt: skip
    assert refusal(short) is None
    assert "whole shares only" in str(
        refusal(replace(short, amount=Decimal("1.5"), asset=LENDABLE | {"fractionable": True}))
    )
    # 2 shares at 3% above a 190 ask: 391.4 of buying power.
    assert "buying power 300 is short of 391.40" in str(
        refusal(replace(short, cash_available=Decimal(300)))
    )
    assert "not shortable" in str(
        refusal(replace(short, asset=LENDABLE | {"easy_to_borrow": False}))
    )
    # Selling what is held is no short and spends no buying power.
    assert refusal(replace(short, held=Decimal(2), cash_available=Decimal(0))) is None


def test_extended_sessions_take_limit_orders_of_listed_stocks_only():
    pre = replace(STOCK, session="pre", extended=True)
    assert "limit orders only" in str(refusal(pre))
    assert refusal(replace(pre, limit=True)) is None
    assert refusal(replace(pre, limit=True, session="after")) is None
    fraction = replace(
        pre, limit=True, amount=Decimal("0.5"), asset=STOCK.asset | {"fractionable": True}
    )
    assert "whole shares only" in str(refusal(fraction))
    assert "is closed" in str(refusal(replace(pre, limit=True, session="closed")))


@pytest.mark.parametrize(
    ("clock", "day", "session"),
    [
        ("2025-03-03T03:59", DAY, "closed"),
        ("2025-03-03T04:00", DAY, "pre"),
        ("2025-03-03T09:29", DAY, "pre"),
        ("2025-03-03T09:30", DAY, "regular"),
        ("2025-03-03T15:59", DAY, "regular"),
        ("2025-03-03T16:00", DAY, "after"),
        ("2025-03-03T19:59", DAY, "after"),
        ("2025-03-03T20:00", DAY, "closed"),
        ("2025-11-28T13:30", DAY | {"date": "2025-11-28", "close": "13:00"}, "after"),
        ("2025-03-01T10:00", None, "closed"),  # a Saturday: no calendar day
        ("2025-03-04T10:00", DAY, "closed"),  # the calendar day of another date
    ],
)  # fmt: skip
def test_the_session_comes_from_alpacas_calendar_day(clock, day, session):
    local = datetime.fromisoformat(clock).replace(tzinfo=NEW_YORK)
    assert session_at(local, day) == session


def test_buying_power_is_the_accounts_field_for_the_asset_class():
    # Fields as a paper margin account answers /v2/account (alpaca-py's fixture,
    # tests/trading/trading_client/test_account_routes.py: multiplier "4", shorting_enabled).
    margin = {"multiplier": "4", "shorting_enabled": True, "buying_power": "262113.632",
              "non_marginable_buying_power": "98945.02", "cash": "-23140.2"}  # fmt: skip
    assert is_margin(margin)
    assert buying_power(margin, stock=True) == Decimal("262113.632")
    assert buying_power(margin, stock=False) == Decimal("98945.02")
    cash = margin | {"multiplier": "1", "shorting_enabled": False, "buying_power": "98945.02"}
    assert not is_margin(cash)
    assert buying_power(cash, stock=True) == Decimal("98945.02")


def test_time_in_force_follows_the_asset_class():
    assert time_in_force(stock=True, limit=False, fractional=False, extended=False) == "day"
    assert time_in_force(stock=True, limit=True, fractional=False, extended=False) == "gtc"
    assert time_in_force(stock=True, limit=True, fractional=True, extended=False) == "day"
    assert time_in_force(stock=True, limit=True, fractional=False, extended=True) == "day"
    assert time_in_force(stock=False, limit=True, fractional=True, extended=False) == "gtc"
