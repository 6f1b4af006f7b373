"""The running shortfall against the cost model: each fill's spread, slippage and fees against
the quote its order was decided on, beside what the configured costs charge; worked out by
hand in each test."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.engine.builders import T0, quote
from trader.domain import Fill, Liquidity, Order, OrderStatus, OrderType, QuoteSource, Side
from trader.engine.report import TickReport
from trader.telemetry.fill_cost_metrics import CostModel, fill_costs
from trader.telemetry.metrics import Metrics

D = Decimal
# The model: a 10 bps spread (5 to cross), 2 bps slippage, 10 bps taker, 4 bps maker.
MODEL = CostModel(spread_bps=10, slippage_bps=2, taker_fee_bps=10, maker_fee_bps=4)


def _order(side: Side, type_: OrderType = OrderType.MARKET, leg: str = "main") -> Order:
    return Order.create(
        strategy="simple", symbol="SOL/USDT", side=side, type=type_, amount=D(2),
        limit_price=D("99") if type_ is OrderType.LIMIT else None, tick_time=T0, leg=leg,
    ).transition(OrderStatus.SUBMITTED)  # fmt: skip


def _fill(order: Order, price: str, fee: str, liquidity=Liquidity.TAKER, at=T0) -> Fill:  # type: ignore[no-untyped-def]
    return Fill(f"{order.client_order_id}-1", order.client_order_id, "SOL/USDT", order.side,
                D(price), D(2), D(fee), "USDT", liquidity, at)  # fmt: skip


def test_a_taker_fill_against_its_decision_quote_beside_the_model():
    # Quote 99.9 / 100.1: mid 100, the ask 10 bps above it. A buy of 2 at 100.2001 paid
    # 0.1001 / 100.1 = 10 bps beyond the ask; fee 0.2004002 of 200.4002: 10 bps.
    order = _order(Side.BUY)
    costs = fill_costs(_fill(order, "100.2001", "0.2004002"), quote("99.9", "100.1"), MODEL)
    assert costs == {
        ("realised", "spread"): pytest.approx(10),
        ("realised", "slippage"): pytest.approx(10),
        ("realised", "fees"): pytest.approx(10),
        ("realised", "improvement"): 0,
        ("modelled", "spread"): 5,
        ("modelled", "slippage"): 2,
        ("modelled", "fees"): 10,
    }


def test_a_better_price_and_a_rebate_are_improvement_never_a_negative_count():
    # A sell at 99.95 against a bid of 99.9: 0.05 / 99.9 = 5.005 bps better than the touch;
    # a fee of -0.01999 on 199.9 (a rebate of 1 bp) improves it too.
    order = _order(Side.SELL)
    costs = fill_costs(_fill(order, "99.95", "-0.01999"), quote("99.9", "100.1"), MODEL)
    assert costs["realised", "slippage"] == 0
    assert costs["realised", "fees"] == 0
    assert costs["realised", "improvement"] == pytest.approx(0.05 / 99.9 * 1e4 + 1)
    assert costs["realised", "spread"] == pytest.approx(0.1 / 100 * 1e4)


def test_a_maker_fill_counts_for_fees_only():
    order = _order(Side.BUY, OrderType.LIMIT)
    costs = fill_costs(_fill(order, "99", "0.0792", Liquidity.MAKER), quote("99.9", "100.1"), MODEL)
    assert costs == {
        ("realised", "fees"): pytest.approx(4),
        ("realised", "improvement"): 0,
        ("modelled", "fees"): 4,
    }


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    assert found is not None, (name, labels)
    return found


def test_the_daemon_sums_each_fill_once_with_the_quote_its_order_was_decided_on():
    metrics = Metrics(CollectorRegistry(), ["SOL/USDT"])
    metrics.fill_costs.use_model(MODEL)
    for kind in ("realised", "modelled"):
        for part in ("spread", "slippage", "fees", "improvement"):
            assert _value(metrics, "trader_fill_cost_bps_total", symbol="SOL/USDT", kind=kind,
                          part=part) == 0  # fmt: skip
    # Tick 1 places a market buy (filled at once) and a resting limit buy on 99.9 / 100.1.
    market, limit = _order(Side.BUY), _order(Side.BUY, OrderType.LIMIT, "entry")
    taker = _fill(market, "100.2001", "0.2004002")
    first = TickReport(T0, orders=[market.with_fill(taker), limit.transition(OrderStatus.OPEN)],
                       fills=[taker], quotes={"SOL/USDT": quote("99.9", "100.1")})  # fmt: skip
    metrics.observe_tick(first)
    # Tick 2, on another quote, fills the limit: its fees count; the quote is tick 1's.
    later = T0 + timedelta(hours=1)
    maker = _fill(limit.transition(OrderStatus.OPEN), "99", "0.0792", Liquidity.MAKER, later)
    second = TickReport(later, orders=[limit.transition(OrderStatus.OPEN).with_fill(maker)],
                        fills=[maker], quotes={"SOL/USDT": quote("50", "150")})  # fmt: skip
    metrics.observe_tick(second)
    cost = {
        (kind, part): _value(metrics, "trader_fill_cost_bps_total", symbol="SOL/USDT",
                             kind=kind, part=part)
        for kind in ("realised", "modelled") for part in ("spread", "slippage", "fees")
    }  # fmt: skip
    assert cost == {
        ("realised", "spread"): pytest.approx(10),
        ("realised", "slippage"): pytest.approx(10),
        ("realised", "fees"): pytest.approx(14),
        ("modelled", "spread"): 5,
        ("modelled", "slippage"): 2,
        ("modelled", "fees"): 14,
    }
    fills = {liq: _value(metrics, "trader_fill_cost_fills_total", symbol="SOL/USDT", liquidity=liq)
             for liq in ("taker", "maker")}  # fmt: skip
    assert fills == {"taker": 1, "maker": 1}
    assert _value(metrics, "trader_fill_cost_unpriced_total", symbol="SOL/USDT") == 0


def test_a_fill_of_an_order_placed_before_a_restart_is_counted_unpriced():
    metrics = Metrics(CollectorRegistry(), ["SOL/USDT"])
    metrics.fill_costs.use_model(MODEL)
    old = _order(Side.BUY, OrderType.LIMIT)  # placed at T0, by the daemon's previous run
    later = T0 + timedelta(hours=5)
    maker = _fill(old.transition(OrderStatus.OPEN), "99", "0.0792", Liquidity.MAKER, later)
    metrics.observe_tick(TickReport(later, orders=[old.transition(OrderStatus.OPEN).with_fill(
        maker)], fills=[maker], quotes={"SOL/USDT": quote("99.9", "100.1")}))  # fmt: skip
    assert _value(metrics, "trader_fill_cost_unpriced_total", symbol="SOL/USDT") == 1
    assert _value(metrics, "trader_fill_cost_bps_total", symbol="SOL/USDT", kind="realised",
                  part="fees") == 0  # fmt: skip


def test_an_order_decided_on_a_synthetic_quote_is_unpriced():
    metrics = Metrics(CollectorRegistry(), ["SOL/USDT"])
    metrics.fill_costs.use_model(MODEL)
    order = _order(Side.BUY)
    fill = _fill(order, "100", "0.2")
    synthetic = quote("100", "100", QuoteSource.SYNTHETIC)
    metrics.observe_tick(TickReport(T0, orders=[order.with_fill(fill)], fills=[fill],
                                    quotes={"SOL/USDT": synthetic}))  # fmt: skip
    assert _value(metrics, "trader_fill_cost_unpriced_total", symbol="SOL/USDT") == 1
