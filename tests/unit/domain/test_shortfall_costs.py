"""Measured costs: per fill against its decision's quote, in basis points, by side and order
type; the fill ratio of limit orders; the fee rate paid by liquidity. The figures are worked
out by hand in each test."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.unit.domain.shortfall_cases import order, record
from trader.domain import Liquidity, OrderType, Side
from trader.domain.shortfall_costs import Distribution, measure_costs
from trader.domain.shortfall_records import Run

D = Decimal


def test_spread_slippage_delay_fill_ratio_and_fees_are_measured_from_the_fills():
    run = Run(
        D(10_000),
        D(10_000),
        (
            # Quote 99/101: mid 100, spread 2 / 100 = 200 bps. A buy at 101.101 paid
            # 0.101 / 101 = 10 bps beyond the ask; the mid had moved to 100.5: 50 bps delay.
            # Fee 0.101101 on a notional of 101.101: 10 bps.
            record(order(0, Side.BUY, "1"), "99", "101", [("101.101", "1", "0.101101")],
                   mids=["100.5"]),
            # A sell of 2 at 98.901: (99 - 98.901) / 99 = 10 bps; fee 0.197802 of 197.802.
            record(order(1, Side.SELL, "2"), "99", "101", [("98.901", "2", "0.197802")]),
            # A limit buy of 2 at 99 of which 0.5 filled (fee 0.0099 of 49.5: 2 bps), and a
            # limit sell of 2 that never filled: 0.5 of the 4 ordered, 1 of 2 orders filled.
            record(order(2, Side.BUY, "2", limit="99"), "99", "101", [("99", "0.5", "0.0099")],
                   liquidity=Liquidity.MAKER),
            record(order(3, Side.SELL, "2", limit="102"), "99", "101"),
        ),
    )  # fmt: skip
    costs = measure_costs(run)
    groups = {(g.side, g.type): g for g in costs.groups}
    assert list(groups) == [
        (Side.BUY, OrderType.LIMIT),
        (Side.BUY, OrderType.MARKET),
        (Side.SELL, OrderType.MARKET),
    ]
    market_buy = groups[Side.BUY, OrderType.MARKET]
    assert market_buy.fills == 1
    assert market_buy.spread_bps is not None
    assert market_buy.spread_bps.mean == pytest.approx(200)
    assert market_buy.slippage_bps is not None
    assert market_buy.slippage_bps.mean == pytest.approx(10)
    assert market_buy.delay_bps is not None
    assert market_buy.delay_bps.mean == pytest.approx(50)
    market_sell = groups[Side.SELL, OrderType.MARKET]
    assert market_sell.slippage_bps is not None
    assert market_sell.slippage_bps.mean == pytest.approx(10)
    assert market_sell.delay_bps is None  # no mid measured at its fill
    # The resting buy filled at its limit 99, 2 / 101 below the ask: -198.0198... bps.
    limit_buy = groups[Side.BUY, OrderType.LIMIT]
    assert limit_buy.slippage_bps is not None
    assert limit_buy.slippage_bps.mean == pytest.approx(-2 / 101 * 10_000)
    assert (costs.limit_orders, costs.limit_orders_filled) == (2, 1)
    assert costs.limit_fill_ratio == pytest.approx(0.125)
    # Taker: (0.101101 + 0.197802) / (101.101 + 197.802) = 10 bps; maker 2 bps.
    assert costs.fee_bps == {Liquidity.MAKER: pytest.approx(2), Liquidity.TAKER: pytest.approx(10)}
    written = json.loads(json.dumps(costs.as_dict()))
    assert written["limit_fill_ratio"] == pytest.approx(0.125)
    assert written["fee_bps"]["taker"] == pytest.approx(10)
    assert written["groups"][1]["slippage_bps"]["p50"] == pytest.approx(10)


def test_a_synthetic_quote_has_no_spread_to_measure_and_is_counted():
    synthetic = record(order(0, Side.BUY, "1"), "100", "100", [("100.2", "1", "0")], synthetic=True)
    (group,) = measure_costs(Run(D(1), D(1), (synthetic,))).groups
    assert (group.fills, group.unknown_spread, group.spread_bps) == (1, 1, None)
    assert group.slippage_bps is not None
    assert group.slippage_bps.mean == pytest.approx(20)  # 0.2 / 100


def test_a_run_without_fills_or_limit_orders_measures_nothing():
    costs = measure_costs(Run(D(1), D(1), (record(order(0, Side.BUY, "1"), "99", "101"),)))
    assert (costs.groups, costs.limit_fill_ratio, dict(costs.fee_bps)) == ((), None, {})


def test_percentiles_are_linear_between_ranks():
    found = Distribution.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert found is not None
    assert found.count == 5
    assert found.mean == 3.0
    # Rank (5 - 1) * p / 100: p5 at 0.2 (1.2), p25 at 1 (2), p95 at 3.8 (4.8).
    assert dict(found.percentiles) == pytest.approx({5: 1.2, 25: 2.0, 50: 3.0, 75: 4.0, 95: 4.8})
    assert Distribution.of([]) is None
