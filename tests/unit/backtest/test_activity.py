"""What fills add up to: round trips, per-symbol equity, costs, exposure; buy-and-hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest

from trader.backtest.activity import (
    ExitCosts,
    exposure,
    round_trips,
    symbol_curve,
    trade_stats,
    trading_costs,
)
from trader.backtest.hold import buy_and_hold
from trader.domain import Fill, Liquidity, Side

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
FREE = ExitCosts(0.0, 0.0, 0.0)


def fill(n: int, side: Side, price: str, amount: str, fee: str, hour: int, taker=True) -> Fill:
    return Fill(
        f"o{n}-1", f"o{n}", "SOL/USDT", side, Decimal(price), Decimal(amount), Decimal(fee),
        "USDT", Liquidity.TAKER if taker else Liquidity.MAKER, T0 + hour * HOUR,
    )  # fmt: skip


def ms(hour: int) -> int:
    return int((T0 + hour * HOUR).timestamp() * 1000)


def test_a_long_round_trip_earns_the_move_less_both_fees():
    fills = [fill(1, Side.BUY, "100", "1", "0.1", 1), fill(2, Side.SELL, "110", "1", "0.11", 3)]
    (trade,) = round_trips(fills, 110.0, FREE)
    assert trade.direction == "long"
    assert trade.pnl == pytest.approx(10 - 0.21)
    assert trade.entry_notional == 100
    assert trade.return_ == pytest.approx(0.0979)
    assert (trade.opened, trade.closed) == (T0 + HOUR, T0 + 3 * HOUR)


def test_a_flip_closes_one_trade_and_opens_the_next_with_the_fee_shared():
    fills = [fill(1, Side.BUY, "100", "1", "0.1", 1), fill(2, Side.SELL, "90", "2", "0.18", 2)]
    # The short left open is closed at the end at 80 (no costs here).
    first, second = round_trips(fills, 80.0, FREE)
    assert (first.direction, second.direction) == ("long", "short")
    assert first.pnl == pytest.approx(-10 - 0.1 - 0.09)
    assert second.pnl == pytest.approx(90 - 80 - 0.09)
    assert second.closed is None
    stats = trade_stats([first, second])
    assert (stats.trades, stats.wins, stats.open_at_end) == (2, 1, 1)
    assert stats.win_rate == 0.5
    assert stats.average_win == pytest.approx(9.91)
    assert stats.average_loss == pytest.approx(-10.19)
    assert stats.profit_factor == pytest.approx(9.91 / 10.19)


def test_partial_fills_make_one_trade():
    fills = [
        fill(1, Side.BUY, "100", "0.5", "0.05", 1),
        fill(2, Side.BUY, "102", "0.5", "0.051", 2),
        fill(3, Side.SELL, "105", "0.25", "0", 3, taker=False),
        fill(4, Side.SELL, "106", "0.75", "0", 4, taker=False),
    ]
    (trade,) = round_trips(fills, 106.0, FREE)
    assert trade.entry_notional == pytest.approx(101)
    assert trade.pnl == pytest.approx(0.25 * 105 + 0.75 * 106 - 101 - 0.101)


def test_a_trade_open_at_the_end_is_closed_at_the_bid_with_costs():
    costs = ExitCosts(half_spread=0.0005, slippage=0.0002, taker_fee=0.001)
    (trade,) = round_trips([fill(1, Side.BUY, "100", "2", "0.2", 1)], 120.0, costs)
    sold = 120 * (1 - 0.0005) * (1 - 0.0002)
    assert trade.pnl == pytest.approx(2 * sold * (1 - 0.001) - 200.2)


def test_a_symbols_equity_is_cash_plus_the_position_at_the_close():
    fills = [fill(1, Side.BUY, "100", "1", "0.1", 1), fill(2, Side.SELL, "110", "1", "0.11", 3)]
    ticks = np.array([ms(h) for h in (1, 2, 3, 4)])
    closes = np.array([100.5, 105.0, 110.0, 108.0])
    curve = symbol_curve(fills, ticks, closes, 1000.0, FREE)
    assert curve.equity.tolist() == pytest.approx(
        [1000, 1000 - 100.1 + 100.5, 1000 - 100.1 + 105, 1000 + 9.79, 1000 + 9.79]
    )
    assert curve.position.tolist() == [1, 1, 0, 0]
    assert curve.closing_cost == 0


def test_an_open_position_is_closed_out_in_the_last_point():
    costs = ExitCosts(0.001, 0.0, 0.0)
    curve = symbol_curve(
        [fill(1, Side.BUY, "100", "1", "0", 1)], np.array([ms(1), ms(2)]),
        np.array([100.0, 110.0]), 1000.0, costs,
    )  # fmt: skip
    assert curve.equity[-1] == pytest.approx(1000 - 100 + 110 * 0.999)
    assert curve.closing_cost == pytest.approx(0.11)


def test_costs_split_what_a_taker_paid_into_spread_and_slippage():
    # Mid 100, ask 100.05, 2 bps slippage: a buy fills at 100.07001.
    price = Decimal("100.05") * Decimal("1.0002")
    fills = [
        fill(1, Side.BUY, str(price), "2", "0.2", 1),
        fill(2, Side.SELL, "101", "2", "0", 2, taker=False),
    ]
    costs = trading_costs(fills, {"SOL/USDT": {ms(1): 100.0, ms(2): 101.5}}, 0.0002)
    assert costs.traded_notional == pytest.approx(float(price) * 2 + 202)
    assert costs.fees == pytest.approx(0.2)
    assert costs.spread == pytest.approx(0.05 * 2)
    assert costs.slippage == pytest.approx(float(price - Decimal("100.05")) * 2)


def test_exposure_is_time_in_market_average_share_and_yearly_turnover():
    values = np.array([0.0, 500.0, -250.0, 0.0])
    equity = np.array([1000.0, 1000.0, 1000.0, 1000.0, 1000.0])
    result = exposure(values, equity, traded_notional=2000.0, years=0.5)
    assert result.time_in_market == 0.5
    assert result.average == pytest.approx((0.5 + 0.25) / 4)
    assert result.turnover == pytest.approx(4.0)


def test_buy_and_hold_returns_the_price_ratio_less_fees_spread_and_slippage():
    h, s, f = 0.0005, 0.0002, 0.001
    closes = np.array([100.0, 120.0, 90.0, 150.0])
    held = buy_and_hold(closes, 1000.0, h, ExitCosts(h, s, f))
    expected = 150 * (1 - h) * (1 - s) * (1 - f) / (100 * (1 + h) * (1 + s) * (1 + f))
    assert held.equity[-1] / 1000 == pytest.approx(expected, rel=1e-12)
    units = held.position[0]
    assert held.equity[2] == pytest.approx(units * 120)
    assert held.costs.fees == pytest.approx(
        units * f * (100 * (1 + h) * (1 + s) + 150 * (1 - h) * (1 - s))
    )
    assert held.costs.spread == pytest.approx(units * (100 * h + 150 * h))


def test_buy_and_hold_bought_late_is_flat_until_then_and_the_ratio_from_there():
    h, s, f = 0.0005, 0.0002, 0.001
    closes = np.array([100.0, 120.0, 90.0, 150.0])
    held = buy_and_hold(closes, 1000.0, h, ExitCosts(h, s, f), start=2)
    assert held.equity[:3].tolist() == [1000.0, 1000.0, 1000.0]  # E_0 and the first two ticks
    assert held.position[:2].tolist() == [0.0, 0.0]
    expected = 150 * (1 - h) * (1 - s) * (1 - f) / (90 * (1 + h) * (1 + s) * (1 + f))
    assert held.equity[-1] / 1000 == pytest.approx(expected, rel=1e-12)


def test_closing_out_costs_are_split_like_any_taker_fill():
    exit_ = ExitCosts(0.0005, 0.0002, 0.001)
    long, short = exit_.costs(2.0, 100.0), exit_.costs(-2.0, 100.0)
    bid = 100 * (1 - 0.0005)
    sold = bid * (1 - 0.0002)
    assert long.traded_notional == pytest.approx(2 * sold)
    assert long.spread == pytest.approx(2 * (100 - bid))
    assert long.slippage == pytest.approx(2 * (bid - sold))
    assert long.fees == pytest.approx(2 * sold * 0.001)
    assert short.spread == pytest.approx(long.spread)  # the ask is as far above the mid
    # What the columns count is what the equity curve paid to close.
    assert 2 * 100 - exit_.proceeds(2.0, 100.0) == pytest.approx(
        long.spread + long.slippage + long.fees
    )
