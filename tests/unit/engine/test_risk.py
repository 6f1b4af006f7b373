"""Each risk rule refuses what it should, and the trading state follows equity."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest

from tests.unit.engine.builders import T0, quote
from trader.config.trading_settings import RiskSettings
from trader.domain import Direction, DomainError, Instrument, Order, OrderType, QuoteSource, Side
from trader.risk import (
    OrderCheck,
    RiskEngine,
    TradingState,
    TradingStatus,
    order_size,
    target_amount,
)
from trader.risk.engine import HaltPolicy

AT = T0 + timedelta(seconds=5)
LIMITS = RiskSettings(
    max_order_notional=Decimal(1000),
    max_position_notional=Decimal(2000),
    max_total_exposure=Decimal(3000),
    max_orders_per_minute=3,
    max_daily_loss=0.05,
    max_drawdown=0.10,
    min_edge_bps=5.0,
)


def engine(
    state: TradingState = TradingState.ACTIVE, halt_policy: HaltPolicy = "wait"
) -> RiskEngine:
    return RiskEngine(
        LIMITS,
        maker_fee_bps=2.0,
        taker_fee_bps=10.0,
        max_quote_age=timedelta(seconds=30),
        status=TradingStatus(state, "test", T0),
        halt_policy=halt_policy,
    )


def check(
    side: Side = Side.BUY,
    amount: str = "5",
    *,
    position: str = "0",
    others: str = "0",
    edge: float | None = 50.0,
    type_: OrderType = OrderType.MARKET,
    q=None,
    leg: str = "market",
) -> OrderCheck:
    limit = Decimal(100) if type_ is OrderType.LIMIT else None
    order = Order.create(
        strategy="simple", symbol="SOL/USDT", side=side, type=type_, amount=Decimal(amount),
        limit_price=limit, tick_time=AT, leg=leg,
    )  # fmt: skip
    return OrderCheck(
        order, Decimal(100), q or quote(), Decimal(position), Decimal(100), Decimal(others), edge
    )


def test_a_sound_order_is_accepted():
    verdict = engine().check(check(), AT)
    assert (verdict.accepted, verdict.rule) == (True, "ok")


@pytest.mark.parametrize(
    ("c", "rule", "reason"),
    [
        (check(amount="11"), "order_notional", "order 1100.00 > 1000"),
        (check(amount="8", position="15"), "position_limit", "position 2300.00 > 2000"),
        (
            check(amount="5", position="5", others="2500"),
            "exposure_limit",
            "exposure 3500.00 > 3000",
        ),
        (check(edge=26.0), "min_edge", "edge 4.0 bps after fees and spread < 5.0 bps"),
        (check(edge=None), "min_edge", "no expected edge was stated for this entry"),
        (check(type_=OrderType.LIMIT, edge=8.0), "min_edge", "edge 4.0 bps after fees and spread"),
        (check(q=quote("100", source=QuoteSource.SYNTHETIC)), "synthetic_quote", "no real price"),
        (check(q=replace(quote(), at=T0 - timedelta(minutes=5))), "stale_quote", "old"),
    ],
)
def test_each_rule_refuses_with_its_reason(c, rule, reason):
    verdict = engine().check(c, AT)
    assert not verdict.accepted
    assert verdict.rule == rule
    assert reason in verdict.reason


def test_the_edge_rule_charges_the_spread_to_market_orders_only():
    # Spread 2 bps: a market entry needs 10+10+2+5 = 27 bps; a limit entry 2+2+5 = 9.
    assert engine().check(check(edge=27.0), AT).accepted
    assert not engine().check(check(edge=26.9), AT).accepted
    assert engine().check(check(type_=OrderType.LIMIT, edge=9.0), AT).accepted


def test_orders_that_shrink_exposure_skip_size_and_edge_rules():
    big_exit = check(Side.SELL, "30", position="30", edge=None)
    assert engine().check(big_exit, AT).accepted
    flip = check(Side.SELL, "40", position="30", edge=None)
    assert engine().check(flip, AT).rule == "order_notional"


def test_the_order_rate_is_limited_per_minute():
    risk = engine()
    for n in range(3):
        assert risk.check(check(leg=f"l{n}"), AT).accepted
    assert risk.check(check(leg="l3"), AT).rule == "order_rate"
    later = AT + timedelta(seconds=61)
    assert risk.check(check(leg="l4", q=replace(quote(), at=later)), later).accepted


def test_halted_refuses_everything_and_reducing_only_what_grows_exposure():
    halted = engine(TradingState.HALTED)
    assert halted.check(check(Side.SELL, "1", position="5"), AT).rule == "halted"
    reducing = engine(TradingState.REDUCING)
    assert reducing.check(check(), AT).rule == "reducing"
    assert reducing.check(check(Side.SELL, "1", position="5", edge=None), AT).accepted


def test_drawdown_from_the_running_peak_means_reducing_until_a_person_resumes():
    risk = engine()
    assert risk.observe_equity(AT, Decimal(10_000)) is None
    assert risk.observe_equity(AT + timedelta(hours=1), Decimal(11_000)) is None
    # A slide over days: no day loses 5%, yet the peak of two days ago is 10.45% away.
    assert risk.observe_equity(AT + timedelta(days=1), Decimal(10_500)) is None
    assert risk.observe_equity(AT + timedelta(days=2), Decimal(10_100)) is None
    change = risk.observe_equity(AT + timedelta(days=3), Decimal(9_850))
    assert change is not None
    assert change.state is TradingState.REDUCING
    assert change.reason == (
        "drawdown 10.45% from the peak 11000.00 > 10.00%: only reducing orders until a person "
        "resumes (the limits are then measured from that equity)"
    )
    assert risk.drawdown(Decimal(9_850)) == pytest.approx(0.104545, abs=1e-5)
    # The day's loss is from the previous day's close, not the peak: max_daily_loss's.
    assert risk.daily_loss(Decimal(9_850)) == pytest.approx(1 - 9_850 / 10_100)
    assert risk.daily_loss(Decimal(10_600)) == 0.0
    assert risk.observe_equity(AT + timedelta(days=4), Decimal(9_850)) is None  # stays
    assert risk.state is TradingState.REDUCING
    resumed = risk.resume("resumed by ops", AT + timedelta(days=4))
    assert resumed is not None
    assert resumed.reason == "resumed by ops; limits measured from equity 9850.00"
    # Measured from the resume now: a further 5% is not yet 10% of the new peak.
    assert risk.observe_equity(AT + timedelta(days=4, hours=1), Decimal(9_400)) is None
    assert risk.state is TradingState.ACTIVE
    # The record keeps the account's all-time high: the ledger's drawdown is from 11,000.
    assert risk.drawdown(Decimal(9_400)) == pytest.approx(1 - 9_400 / 11_000)
    # The limit's, which telemetry compares with max_drawdown, is from the resume.
    assert risk.limit_drawdown(Decimal(9_400)) == pytest.approx(1 - 9_400 / 9_850)


def test_a_daily_loss_past_the_limit_halts_until_resumed():
    risk = engine()
    risk.observe_equity(AT, Decimal(10_000))
    change = risk.observe_equity(AT + timedelta(hours=1), Decimal(9_400))
    assert change is not None
    assert change.state is TradingState.HALTED
    assert change.reason == (
        "daily loss 6.00% > 5.00% since equity 10000.00: halted until a person resumes (the "
        "limits are then measured from that equity)"
    )
    assert risk.observe_equity(AT + timedelta(days=1), Decimal(9_400)) is None  # stays halted
    resumed = risk.resume("checked by hand", AT + timedelta(days=1))
    assert resumed is not None
    assert resumed.state is TradingState.ACTIVE
    # The day's loss counts from the resume: 9,400 is no loss any more.
    assert risk.observe_equity(AT + timedelta(days=1, hours=1), Decimal(9_300)) is None
    assert risk.daily_loss(Decimal(9_300)) == pytest.approx(1 - 9_300 / 9_400)


@pytest.mark.parametrize(
    ("policy", "during", "next_day"),
    [
        ("stop", TradingState.HALTED, TradingState.HALTED),
        ("resume_next_day", TradingState.HALTED, TradingState.ACTIVE),
        ("reduce_only", TradingState.REDUCING, TradingState.ACTIVE),
    ],
)
def test_a_backtest_says_what_the_daily_loss_limit_does(policy, during, next_day):
    risk = engine(halt_policy=policy)
    risk.observe_equity(AT, Decimal(10_000))
    change = risk.observe_equity(AT + timedelta(hours=1), Decimal(9_400))
    assert change is not None
    assert change.state is during
    assert change.reason.startswith("daily loss 6.00% > 5.00% since equity 10000.00: ")
    assert risk.observe_equity(AT + timedelta(hours=2), Decimal(9_300)) is None  # no flapping
    if during is TradingState.REDUCING:
        # Getting out stays possible; getting in does not.
        assert risk.check(check(Side.SELL, "5", position="5"), AT).accepted
        refused = risk.check(check(Side.BUY), AT)
        assert refused.rule == "reducing"
    else:
        assert risk.check(check(Side.SELL, "5", position="5"), AT).rule == ("halted")
    tomorrow = risk.observe_equity(AT + timedelta(days=1), Decimal(9_300))
    assert (tomorrow.state if tomorrow else risk.state) is next_day
    # A halt with another cause (a person must look) never ends with the day.
    other = engine(halt_policy=policy)
    other.observe_equity(AT, Decimal(10_000))
    other.halt("reconciliation: an order open only in the broker", AT)
    assert other.observe_equity(AT + timedelta(days=1), Decimal(10_000)) is None
    assert other.state is TradingState.HALTED


def test_state_changes_are_explicit_and_carry_a_reason():
    status = TradingStatus(TradingState.ACTIVE, "started", T0)
    with pytest.raises(DomainError, match="not a transition"):
        status.to(TradingState.ACTIVE, "again", T0)
    with pytest.raises(DomainError, match="reason"):
        TradingStatus(TradingState.HALTED, "", T0)


BIG = Decimal(10**9)
SOL = Instrument("SOL/USDT", Decimal("0.01"), Decimal("0.001"), Decimal("0.001"), Decimal(5))


def test_sizing_takes_a_share_of_equity_capped_and_rounded_down():
    common = {
        "equity": Decimal(10_000),
        "price": Decimal("150.55"),
        "instrument": SOL,
        "fraction": 0.2,
    }
    amount = target_amount(Direction.LONG, max_position_notional=Decimal(5000), room=BIG, **common)
    assert amount == Decimal("13.284")  # 2000 / 150.55 = 13.2846... rounded down
    capped = target_amount(Direction.SHORT, max_position_notional=Decimal(1000), room=BIG, **common)
    assert capped == Decimal("-6.642")
    no_room = target_amount(
        Direction.LONG, max_position_notional=Decimal(5000), room=Decimal(3), **common
    )
    assert no_room == 0  # below the 5 minimum notional
    assert (
        target_amount(Direction.FLAT, max_position_notional=Decimal(5000), room=BIG, **common) == 0
    )


def test_a_short_is_sized_in_whole_shares_where_the_venue_shorts_only_those():
    """Alpaca trades AAPL in fractions but shorts whole shares only ("fractional orders cannot
    be sold short", Alpaca's fractional trading docs): a long keeps the fraction, a short not."""
    aapl = Instrument("AAPL/USD", Decimal("0.01"), Decimal("0.000000001"), short_step=Decimal(1))
    common = {
        "equity": Decimal(10_000), "price": Decimal("150.55"), "instrument": aapl,
        "fraction": 0.2, "max_position_notional": Decimal(5000), "room": BIG,
    }  # fmt: skip
    assert target_amount(Direction.LONG, **common) == Decimal("13.284623048")  # 2000 / 150.55
    assert target_amount(Direction.SHORT, **common) == Decimal(-13)
    with pytest.raises(DomainError):
        Instrument("AAPL/USD", Decimal("0.01"), Decimal(1), short_step=Decimal(0))


def test_an_order_is_capped_at_the_largest_allowed_and_dust_is_dropped():
    assert order_size(
        Decimal(20), price=Decimal(100), instrument=SOL, max_order_notional=Decimal(1000)
    ) == Decimal(10)
    assert (
        order_size(
            Decimal("0.0004"), price=Decimal(100), instrument=SOL, max_order_notional=Decimal(1000)
        )
        == 0
    )
