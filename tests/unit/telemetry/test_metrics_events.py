"""Every metric the deployment reads exists from the first scrape, and a tick shows up in the
metrics and as events in the order things happened."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.engine.builders import T0, forecast, quote
from trader.domain import (
    Direction,
    Fill,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Portfolio,
    Side,
    Signal,
)
from trader.engine.report import TickReport
from trader.risk.state import TradingState, TradingStatus
from trader.telemetry.events import SCHEMA_VERSION, tick_events, topic_symbol
from trader.telemetry.metrics import Metrics

# The list: what the dashboard and the alerts may use.
REQUIRED = {
    "trader_tick_duration_seconds": {"stage"},
    "trader_inference_latency_seconds": {"model", "device", "mode"},
    "trader_torch_recompiles_total": {"model"},
    "trader_torch_graph_breaks_total": {"model"},
    "trader_torch_cudagraph_skips_total": {"model"},
    "trader_gpu_memory_bytes": {"kind"},
    "trader_ticks_total": {"outcome"},
    "trader_tick_lateness_seconds": set(),
    "trader_event_loop_lag_seconds": set(),
    "trader_quote_age_seconds": {"symbol"},
    "trader_quote_spread_bps": {"symbol"},
    "trader_quote_source": {"symbol", "source"},
    "trader_orders_total": {"symbol", "side", "status"},
    "trader_fills_total": {"symbol", "side"},
    "trader_fees_paid_total": set(),
    "trader_fill_cost_bps_total": {"symbol", "kind", "part"},
    "trader_fill_cost_fills_total": {"symbol", "liquidity"},
    "trader_fill_cost_unpriced_total": {"symbol"},
    "trader_position": {"symbol"},
    "trader_pnl_realized": {"symbol"},
    "trader_pnl_unrealized": {"symbol"},
    "trader_equity": set(),
    "trader_drawdown_ratio": set(),
    "trader_trading_state": {"state"},
    "trader_data_skips_total": {"reason"},
    "trader_exchange_errors_total": {"kind"},
    "trader_mqtt_connected": set(),
    "trader_mqtt_dropped_total": {"queue"},
    "trader_last_tick_timestamp_seconds": set(),
    "trader_last_ok_tick_timestamp_seconds": set(),
    "trader_clock_simulated": set(),
    "trader_exchange_reachable": set(),
    "trader_jobs_missed_total": {"task"},
    "trader_daily_loss_ratio": set(),
    "trader_risk_limit_ratio": {"limit"},
    "trader_model_forced_eager": {"model"},
    "trader_ready": set(),
    "trader_device_info": {"device", "precision", "reason", "fallback", "name", "capability",
                           "torch", "cuda", "bf16"},
    "trader_build_info": {"version", "broker_mode"},
    # Issue 41: what the rules need to judge the daemon in its own time and its sessions.
    "trader_clock_timestamp_seconds": set(),
    "trader_clock_speed": set(),
    "trader_replay_finished": set(),
    "trader_timeframe_seconds": set(),
    "trader_next_tick_due_timestamp_seconds": set(),
    "trader_market_in_session": {"symbol"},
    "trader_quote_max_age_seconds": set(),
    "trader_ticks_not_ok_in_a_row": set(),
    "trader_symbol_skips_in_a_row": {"symbol"},
    "trader_exchange_info": {"venue", "exchange"},
}  # fmt: skip


def samples(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    [found] = [
        v for got, v in samples(registry)[name] if all(got.get(k) == x for k, x in labels.items())
    ]
    return found


def filled_order() -> tuple[Order, Fill]:
    order = Order.create(
        strategy="simple", symbol="SOL/USDT", side=Side.BUY, type=OrderType.MARKET,
        amount=Decimal(2), limit_price=None, tick_time=T0, leg="market",
    ).transition(OrderStatus.SUBMITTED)  # fmt: skip
    fill = Fill("f1", order.client_order_id, "SOL/USDT", Side.BUY, Decimal(100), Decimal(2),
                Decimal("0.2"), "USDT", Liquidity.TAKER, T0)  # fmt: skip
    return order.with_fill(fill), fill


def test_a_fee_charged_in_the_base_asset_counts_in_cash_at_the_fill_price():
    metrics = Metrics(CollectorRegistry(), ["SOL/USDT"])
    order, _ = filled_order()
    fill = Fill("f2", order.client_order_id, "SOL/USDT", Side.BUY, Decimal(100), Decimal(2),
                Decimal("0.002"), "SOL", Liquidity.TAKER, T0)  # fmt: skip
    metrics.observe_tick(TickReport(T0, timings={}, orders=[], fills=[fill]))
    assert value(metrics.registry, "trader_fees_paid_total") == pytest.approx(0.2)


def test_every_required_metric_is_exposed_before_anything_happened():
    metrics = Metrics(CollectorRegistry(), ["SOL/USDT", "BTC/USDT"])
    metrics.prepare_models([("toto", "cpu", "eager")])
    exposed = samples(metrics.registry)
    for name, labels in REQUIRED.items():
        series = exposed.get(name) or exposed.get(name + "_count") or exposed.get(name + "_bucket")
        assert series, f"{name} is not exposed"
        present = {k for got, _ in series for k in got} - {"le"}
        assert labels <= present, f"{name}: labels {present}, want {labels}"
    assert value(metrics.registry, "trader_ticks_total", outcome="missed") == 0
    assert value(metrics.registry, "trader_quote_source", symbol="BTC/USDT", source="real") == 0


def test_a_tick_moves_the_metrics():
    metrics = Metrics(CollectorRegistry(), ["SOL/USDT"])
    order, fill = filled_order()
    portfolio = Portfolio("USDT", Decimal(10_000)).apply(fill)
    report = TickReport(
        T0, timings={"data": 0.01, "forecast": 0.2}, orders=[order], fills=[fill],
        equity=portfolio.equity({"SOL/USDT": Decimal(110)}), quotes={"SOL/USDT": quote()},
        marks={"SOL/USDT": Decimal(110)}, drawdown=0.01, portfolio=portfolio,
        status=TradingStatus(TradingState.ACTIVE, "started", T0),
    )  # fmt: skip
    metrics.observe_tick(report)
    r = metrics.registry
    assert value(r, "trader_ticks_total", outcome="ok") == 1
    assert value(r, "trader_orders_total", symbol="SOL/USDT", side="buy", status="filled") == 1
    assert value(r, "trader_fills_total", symbol="SOL/USDT", side="buy") == 1
    assert value(r, "trader_fees_paid_total") == 0.2
    assert value(r, "trader_position", symbol="SOL/USDT") == 2
    assert value(r, "trader_pnl_unrealized", symbol="SOL/USDT") == 20
    assert value(r, "trader_equity") == float(report.equity)
    assert value(r, "trader_drawdown_ratio") == 0.01
    assert value(r, "trader_last_tick_timestamp_seconds") == T0.timestamp()
    assert value(r, "trader_quote_source", symbol="SOL/USDT", source="real") == 1
    assert value(r, "trader_quote_spread_bps", symbol="SOL/USDT") > 0
    assert value(r, "trader_trading_state", state="active") == 1
    assert value(r, "trader_tick_duration_seconds_count", stage="forecast") == 1
    assert value(r, "trader_tick_duration_seconds_sum", stage="total") == pytest.approx(0.21)


def test_a_ticks_events_come_in_order_with_their_schema():
    order, fill = filled_order()
    signal = Signal("simple", "SOL/USDT", T0, Direction.LONG, "median up", {"ret": 0.01})
    portfolio = Portfolio("USDT", Decimal(10_000)).apply(fill)
    report = TickReport(
        T0, forecasts=[forecast(101)], decisions=[signal], orders=[order], fills=[fill],
        equity=Decimal("9999.8"), marks={"SOL/USDT": Decimal(100)}, portfolio=portfolio,
    )  # fmt: skip
    out = list(tick_events("paper-1", report))
    assert [e.topic for e in out] == ["forecast/SOL-USDT", "decision", "order", "fill", "pnl"]
    bodies = [json.loads(e.payload()) for e in out]
    assert [b["schema"] for b in bodies] == [
        f"trader.{kind}/{SCHEMA_VERSION}"
        for kind in ("forecast", "decision", "order", "fill", "pnl")
    ]
    assert all(b["instance"] == "paper-1" and b["at"] == T0.isoformat() for b in bodies)
    assert bodies[2]["amount"] == "2"
    assert bodies[2]["status"] == "filled"
    assert bodies[3]["fee"] == "0.2"
    assert bodies[4]["positions"] == {"SOL/USDT": "2"}
    assert bodies[4]["unrealized"] == {"SOL/USDT": "0"}
    assert topic_symbol("BTC/USDT") == "BTC-USDT"
