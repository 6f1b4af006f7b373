"""The perpetual metrics the liquidation alerts and the dashboard read: every series from the
first scrape (flat symbols NaN where there is nothing to say), each position's side, size,
leverage, margin, liquidation price and distance, the funding counters from the ledger's rows,
and the buffer rule's reductions.

Figures: a cross long's liquidation price by Binance's formula (FAQ "How to Calculate
Liquidation Price of USDⓈ-M Futures Contracts"), worked by hand beside each assertion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from tests.unit.engine.builders import T0
from trader.config.trading_settings import RiskSettings
from trader.domain import Fill, Liquidity, Portfolio, Side
from trader.domain.perp import LeverageBrackets, MarginMode, PerpAccount, PerpPosition
from trader.domain.perp.position_risk import position_risks
from trader.engine.report import TickReport
from trader.telemetry.metrics import Metrics
from trader.telemetry.perp_metrics import PerpMetrics

BTC, ETH = "BTC/USDT", "ETH/USDT"
D = Decimal


@dataclass(frozen=True)
class Row:
    symbol: str
    paid: Decimal


def metrics() -> tuple[PerpMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    return PerpMetrics(registry, [BTC, ETH]), registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def account(wallet: str = "1000", size: str = "0.5") -> PerpAccount:
    brackets = {BTC: LeverageBrackets.from_binance(BTC, BTCUSDT_NOW)}
    position = PerpPosition(BTC, D(size), D(30000), 20, MarginMode.CROSS)
    return PerpAccount.with_positions(D(wallet), brackets, [position])


def test_every_series_exists_flat_from_the_first_scrape():
    m, r = metrics()
    m.set_limits(RiskSettings())
    for symbol in (BTC, ETH):
        assert value(r, "trader_perp_position_side", symbol=symbol) == 0
        assert value(r, "trader_perp_position_size", symbol=symbol) == 0
        assert math.isnan(value(r, "trader_perp_liquidation_price", symbol=symbol))
        assert math.isnan(value(r, "trader_perp_liquidation_distance_ratio", symbol=symbol))
        assert value(r, "trader_perp_funding_paid_total", symbol=symbol) == 0
        assert value(r, "trader_perp_buffer_reductions_total", symbol=symbol) == 0
    assert value(r, "trader_perp_liquidation_buffer_ratio") == 0.05  # the default
    assert value(r, "trader_perp_max_leverage") == 1.0


def test_a_position_is_exported_with_its_liquidation_distance():
    m, r = metrics()
    marks = {BTC: D(29000)}
    a = account()
    m.observe(position_risks(a, marks), a.margin_balance(marks))
    # 1000 + 0.5 (P - 30000) = 0.5 P x 0.004 (bracket 1): P = 14000 / 0.498 = 28112.45;
    # (29000 - 28112.45) / 29000 = 3.06%.
    assert value(r, "trader_perp_position_side", symbol=BTC) == 1
    assert value(r, "trader_perp_position_size", symbol=BTC) == 0.5
    assert value(r, "trader_perp_leverage", symbol=BTC) == 20
    assert value(r, "trader_perp_margin", symbol=BTC) == pytest.approx(14500 / 20)  # IM at mark
    assert value(r, "trader_perp_liquidation_price", symbol=BTC) == pytest.approx(
        28112.45, abs=0.01
    )
    distance = (29000 - 14000 / 0.498) / 29000
    assert value(r, "trader_perp_liquidation_distance_ratio", symbol=BTC) == pytest.approx(distance)
    assert value(r, "trader_perp_unrealized_pnl", symbol=BTC) == -500
    # Margin balance 1000 - 500 = 500 behind 14,500 of notional.
    assert value(r, "trader_perp_account_leverage_ratio") == pytest.approx(29.0)
    # ETH is flat; BTC closed again reads flat too.
    assert math.isnan(value(r, "trader_perp_liquidation_distance_ratio", symbol=ETH))
    m.observe((), D(1000))
    assert value(r, "trader_perp_position_side", symbol=BTC) == 0
    assert math.isnan(value(r, "trader_perp_liquidation_price", symbol=BTC))
    assert value(r, "trader_perp_account_leverage_ratio") == 0


def test_no_liquidation_price_reads_as_an_infinite_distance_either_way():
    m, r = metrics()
    # A 1x long, wallet 30,000 for 1 BTC at 30,000: covered down to a zero price.
    covered = account(wallet="30000", size="1")
    marks = {BTC: D(30000)}
    m.observe(position_risks(covered, marks), covered.margin_balance(marks))
    assert math.isnan(value(r, "trader_perp_liquidation_price", symbol=BTC))
    assert value(r, "trader_perp_liquidation_distance_ratio", symbol=BTC) == math.inf
    # A short whose wallet is 10,000 short of its entry notional: below maintenance at any
    # price (at 0 its margin balance is -40,000 + 30,000).
    broke = account(wallet="-40000", size="-1")
    m.observe(position_risks(broke, marks), None)
    assert value(r, "trader_perp_liquidation_distance_ratio", symbol=BTC) == -math.inf
    assert math.isnan(value(r, "trader_perp_account_leverage_ratio"))


def test_funding_rows_count_paid_and_received_apart():
    m, r = metrics()
    m.funding_booked([Row(BTC, D("1.5")), Row(BTC, D("-0.25")), Row(ETH, D("2")), Row(ETH, D(0))])
    m.funding_booked([Row(BTC, D("0.5"))])
    assert value(r, "trader_perp_funding_paid_total", symbol=BTC) == 2.0
    assert value(r, "trader_perp_funding_received_total", symbol=BTC) == 0.25
    assert value(r, "trader_perp_funding_paid_total", symbol=ETH) == 2.0
    assert value(r, "trader_perp_funding_received_total", symbol=ETH) == 0


def test_reductions_follow_the_risk_engines_running_count():
    m, r = metrics()
    m.count_reductions({BTC: 2})
    m.count_reductions({BTC: 2})
    m.count_reductions({BTC: 3, ETH: 1})
    assert value(r, "trader_perp_buffer_reductions_total", symbol=BTC) == 3
    assert value(r, "trader_perp_buffer_reductions_total", symbol=ETH) == 1


def test_the_daemons_metrics_carry_the_perp_series_and_limits():
    registry = CollectorRegistry()
    daemon = Metrics(registry, [BTC])
    daemon.set_risk_limits(RiskSettings(liquidation_buffer=0.08, max_leverage=3.0))
    assert registry.get_sample_value("trader_perp_liquidation_buffer_ratio") == 0.08
    assert registry.get_sample_value("trader_perp_max_leverage") == 3.0
    assert registry.get_sample_value("trader_perp_position_side", {"symbol": BTC}) == 0


def test_a_perpetual_daemons_book_is_read_as_its_account_at_each_tick():
    # The engine's book: 1,000 cash, then a buy of 0.5 BTC at 30,000 (no fee): cash -14,000.
    # As Binance counts it: wallet = -14000 + 0.5 x 30000 = 1000, long 0.5 @ 30000, cross 20x.
    fill = Fill("f1", "o1", BTC, Side.BUY, D(30000), D("0.5"), D(0), "USDT", Liquidity.TAKER, T0)
    portfolio = Portfolio("USDT", D(1000)).apply(fill)
    registry = CollectorRegistry()
    daemon = Metrics(registry, [BTC])
    marks = {BTC: D(29000)}
    daemon.observe_book(portfolio, marks, D(500), 0.0)
    # No terms (a spot daemon): nothing read as a perpetual.
    assert registry.get_sample_value("trader_perp_position_side", {"symbol": BTC}) == 0
    brackets = {BTC: LeverageBrackets.from_binance(BTC, BTCUSDT_NOW)}
    daemon.perp.use_terms(brackets, leverage=20, margin_mode="cross")
    daemon.observe_book(portfolio, marks, D(500), 0.0)
    distance = registry.get_sample_value("trader_perp_liquidation_distance_ratio", {"symbol": BTC})
    assert distance == pytest.approx((29000 - 14000 / 0.498) / 29000)  # as the account above
    # A mark missing for a held position: the last values stay.
    daemon.observe_book(portfolio, {}, D(500), 0.0)
    assert registry.get_sample_value(
        "trader_perp_liquidation_distance_ratio", {"symbol": BTC}
    ) == pytest.approx(distance)


def test_a_tick_valued_on_an_old_mark_exports_its_age_and_is_degraded():
    """A live feed's refresh failed at the tick at T0 + 2h: BTC was valued on the mark read at
    the tick at T0 + 1h (an hour old), ETH on none read yet; the next good tick reads 0."""
    registry = CollectorRegistry()
    daemon = Metrics(registry, [BTC, ETH])
    assert registry.get_sample_value("trader_perp_mark_age_seconds", {"symbol": BTC}) == 0
    at = T0 + timedelta(hours=2)
    stale = TickReport(at, stale_marks={BTC: T0 + timedelta(hours=1), ETH: None})
    daemon.observe_tick(stale)
    assert registry.get_sample_value("trader_perp_mark_age_seconds", {"symbol": BTC}) == 3600
    assert registry.get_sample_value("trader_perp_mark_age_seconds", {"symbol": ETH}) == math.inf
    assert registry.get_sample_value("trader_ticks_total", {"outcome": "degraded"}) == 1
    assert registry.get_sample_value("trader_last_ok_tick_timestamp_seconds") == 0
    daemon.observe_tick(TickReport(at + timedelta(hours=1)))
    for symbol in (BTC, ETH):
        assert registry.get_sample_value("trader_perp_mark_age_seconds", {"symbol": symbol}) == 0
    assert registry.get_sample_value("trader_ticks_total", {"outcome": "ok"}) == 1
