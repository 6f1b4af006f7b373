"""The loss and drawdown limits mean the same on every timeframe: the risk engine's day loss and
drawdown equal what the equity series alone says, and the first bar of a day counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trader.config.trading_settings import RiskSettings
from trader.risk import RiskEngine, TradingState, TradingStatus
from trader.risk.engine import HaltPolicy

START = datetime(2024, 3, 1, tzinfo=UTC)
OPENING = Decimal(10_000)


def engine(
    daily_loss: float = 1.0,
    drawdown: float = 1.0,
    halt_policy: HaltPolicy = "wait",
    **day: object,
) -> RiskEngine:
    return RiskEngine(
        RiskSettings(max_daily_loss=daily_loss, max_drawdown=drawdown, **day),
        maker_fee_bps=2.0,
        taker_fee_bps=10.0,
        max_quote_age=timedelta(seconds=30),
        status=TradingStatus(TradingState.ACTIVE, "started", START),
        halt_policy=halt_policy,
        opening=OPENING,
    )


def reference(times: list[datetime], equity: list[Decimal]) -> tuple[list[float], list[float]]:
    """Each tick's day loss and drawdown from the series alone: the loss from the last equity
    before the tick's UTC day began (the opening equity before the first), the drawdown from
    the highest equity so far (the opening equity included)."""
    losses, drawdowns = [], []
    for i, (at, e) in enumerate(zip(times, equity, strict=True)):
        before = [x for t, x in zip(times[:i], equity[:i], strict=True) if t.date() < at.date()]
        start = before[-1] if before else OPENING
        high = max([OPENING, *equity[: i + 1]])
        losses.append(max(0.0, float((start - e) / start)))
        drawdowns.append(max(0.0, float((high - e) / high)))
    return losses, drawdowns


# Steps between ticks: 5 minutes to 3 days (a 1d file skips weekends and holidays).
paths = st.lists(
    st.tuples(
        st.integers(min_value=5, max_value=3 * 24 * 60),
        st.decimals(min_value=Decimal(1), max_value=Decimal(50_000), places=2),
    ),
    min_size=1,
    max_size=60,
)


def series(path: list[tuple[int, Decimal]]) -> tuple[list[datetime], list[Decimal]]:
    times, at = [], START
    for minutes, _ in path:
        at += timedelta(minutes=minutes)
        times.append(at)
    return times, [e for _, e in path]


@settings(max_examples=300, deadline=None)
@given(paths)
def test_day_loss_and_drawdown_equal_the_reference_from_the_equity_series(path):
    times, equity = series(path)
    losses, drawdowns = reference(times, equity)
    risk = engine()
    for at, e, loss, drawdown in zip(times, equity, losses, drawdowns, strict=True):
        assert risk.observe_equity(at, e) is None  # limits of 100% never trip
        assert risk.daily_loss(e) == pytest.approx(loss, abs=1e-12)
        assert risk.drawdown(e) == pytest.approx(drawdown, abs=1e-12)
        assert risk.day is not None
        # No one resumed: the limit's peak is the account's high.
        assert risk.day.limit_drawdown(e) == pytest.approx(drawdown, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(
    paths,
    st.floats(min_value=0.01, max_value=0.5),
    st.floats(min_value=0.01, max_value=0.5),
)
def test_the_state_follows_the_reference_until_a_person_resumes(path, loss_limit, dd_limit):
    """The daemon's policy: the first loss past its limit halts, the first drawdown past its
    limit reduces, and neither ends by itself."""
    times, equity = series(path)
    losses, drawdowns = reference(times, equity)
    risk = engine(loss_limit, dd_limit)
    halted = reducing = False
    for at, e, loss, drawdown in zip(times, equity, losses, drawdowns, strict=True):
        risk.observe_equity(at, e)
        halted = halted or loss > loss_limit
        reducing = reducing or drawdown > dd_limit
        expected = (
            TradingState.HALTED if halted
            else TradingState.REDUCING if reducing
            else TradingState.ACTIVE
        )  # fmt: skip
        assert risk.state is expected


@pytest.mark.parametrize("step", [timedelta(days=1), timedelta(hours=4), timedelta(hours=1)])
def test_a_loss_inside_the_days_first_bar_halts_on_every_timeframe(step):
    """Up 5% and flat for two days, then the bar that closes at the next midnight (the new
    day's first tick) loses 6%: measured from the previous day's close (not the opening, not
    the tick itself), on daily bars as on hourly."""
    risk = engine(daily_loss=0.05, drawdown=0.10)
    at = START
    while at < START + timedelta(days=2):
        assert risk.observe_equity(at, Decimal(10_500)) is None
        at += step
    assert at == START + timedelta(days=2)  # the first tick of a new UTC day
    change = risk.observe_equity(at, Decimal(9_870))
    assert change is not None
    assert change.state is TradingState.HALTED
    assert change.reason.startswith("daily loss 6.00% > 5.00% since equity 10500.00")
    assert risk.daily_loss(Decimal(9_870)) == pytest.approx(0.06)
    assert risk.drawdown(Decimal(9_870)) == pytest.approx(0.06)


def test_the_first_tick_of_an_account_counts_from_its_opening_equity():
    risk = engine(daily_loss=0.05)
    change = risk.observe_equity(START, Decimal(9_000))  # lost 10% in the first bar
    assert change is not None
    assert change.state is TradingState.HALTED
    assert risk.drawdown(Decimal(9_000)) == pytest.approx(0.10)


def test_a_loss_seen_between_ticks_after_midnight_counts_from_the_last_tick():
    risk = engine()
    risk.observe_equity(START + timedelta(hours=23), Decimal(10_500))
    # Between ticks, the next UTC day: measured from 10,500, not from the opening 10,000.
    later = START + timedelta(days=1, minutes=10)
    assert risk.daily_loss(Decimal(10_290), later) == pytest.approx(0.02)
    assert risk.daily_loss(Decimal(10_290)) == 0.0  # the marks' own day: up on the opening


@pytest.mark.parametrize("policy", ["resume_next_day", "reduce_only"])
def test_a_backtests_drawdown_stop_ends_with_the_day_and_measures_from_its_start(policy):
    risk = engine(daily_loss=0.5, drawdown=0.10, halt_policy=policy)
    risk.observe_equity(START, Decimal(11_000))
    change = risk.observe_equity(START + timedelta(hours=1), Decimal(9_800))
    assert change is not None
    assert change.state is TradingState.REDUCING
    assert change.reason.endswith(": only reducing orders until the next day (on_halt)")
    resumed = risk.observe_equity(START + timedelta(days=1), Decimal(9_700))
    assert resumed is not None
    assert (resumed.state, resumed.reason) == (TradingState.ACTIVE, "a new trading day")
    assert risk.day is not None
    assert risk.day.peak == Decimal(9_800)  # the day's reference, then the tick's 9,700
    assert risk.drawdown(Decimal(9_700)) == pytest.approx(1 - 9_700 / 11_000)  # the record's


def test_a_backtest_that_stops_for_good_reduces_to_the_end():
    risk = engine(daily_loss=0.5, drawdown=0.10, halt_policy="stop")
    risk.observe_equity(START, Decimal(11_000))
    change = risk.observe_equity(START + timedelta(hours=1), Decimal(9_800))
    assert change is not None
    assert change.reason.endswith(": only reducing orders for the rest of the run (on_halt)")
    assert risk.observe_equity(START + timedelta(days=5), Decimal(12_000)) is None
    assert risk.state is TradingState.REDUCING


def test_a_market_whose_session_crosses_utc_midnight_counts_its_day_in_its_own_zone():
    # The ASX trades 10:00-16:00 Sydney time: 23:00-05:00 UTC in (southern) summer, so a UTC
    # day would cut its session in two and measure half of it from the middle.
    friday_close = datetime(2024, 3, 1, 5, 0, tzinfo=UTC)  # 16:00 in Sydney
    open_ = datetime(2024, 3, 3, 23, 0, tzinfo=UTC)  # Monday 4 March, 10:00 in Sydney
    path = ((friday_close, 10_000), (open_, 9_800), (open_ + timedelta(hours=1), 9_700),
            (open_ + timedelta(hours=5), 9_400))  # fmt: skip
    sydney = engine(daily_loss=0.05, day_zone="Australia/Sydney")
    assert sydney.day_of(open_) == sydney.day_of(open_ + timedelta(hours=6))
    changes = [sydney.observe_equity(at, Decimal(e)) for at, e in path]
    # 6% below Friday's close: the session's loss, its 00:00 UTC tick inside it.
    assert changes[:3] == [None, None, None]
    assert changes[3] is not None
    assert changes[3].state is TradingState.HALTED
    assert "6.00% > 5.00% since equity 10000.00" in changes[3].reason
    # Counted in UTC days, 00:00 opens a new day measured from 9,800 (4.1% down): no halt.
    utc = engine(daily_loss=0.05)
    assert [utc.observe_equity(at, Decimal(e)) for at, e in path] == [None] * 4


def test_fxs_day_ends_at_five_in_new_york():
    risk = engine(day_zone="America/New_York", day_rolls_at="17:00")
    tuesday_close = datetime(2024, 3, 5, 22, 0, tzinfo=UTC)  # 17:00 New York (EST)
    assert risk.day_of(tuesday_close - timedelta(minutes=1)).isoformat() == "2024-03-05"
    assert risk.day_of(tuesday_close).isoformat() == "2024-03-06"
    assert risk.day_of(tuesday_close + timedelta(hours=6)).isoformat() == "2024-03-06"


def test_an_unknown_day_zone_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        RiskSettings(day_zone="Mars/Olympus")
