"""The metrics the alert rules are written against, read from a real registry: latency buckets
that fit what is measured, no label Prometheus would rename, quote ages measured at scrape time
on the daemon's clock, tick outcomes that tell an outage from a good tick, the clock's kind,
the risk limits, and a model forced back to eager."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal
from itertools import pairwise

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.engine.builders import T0, quote
from trader.clock import SimulatedClock
from trader.config.trading_settings import RiskSettings
from trader.daemon.inference import ModelSlot
from trader.domain import Portfolio
from trader.engine.report import TickReport
from trader.forecast.protocol import CompileStats
from trader.telemetry.hooks import TelemetryHooks
from trader.telemetry.labels import INFERENCE_SECONDS, STAGE_SECONDS, tick_outcome
from trader.telemetry.metrics import Metrics

SYMBOL = "SOL/USDT"


def metrics(**kwargs: object) -> Metrics:
    return Metrics(CollectorRegistry(), [SYMBOL], **kwargs)  # type: ignore[arg-type]


def get(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def edges(m: Metrics, name: str) -> list[float]:
    [family] = [f for f in m.registry.collect() if f.name == name]
    return sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels})


def test_inference_buckets_are_dense_from_1_ms_to_10_s_then_reach_minutes():
    m = metrics()
    m.prepare_models([("toto", "cuda:0", "eager")])
    inference = edges(m, "trader_inference_latency_seconds")
    assert inference == [*INFERENCE_SECONDS, math.inf]
    dense = [b for b in inference if 0.001 <= b <= 10]
    assert (dense[0], dense[-1], len(dense)) == (0.001, 10, 25)
    assert all(1.3 <= b / a <= 1.6 for a, b in pairwise(dense))
    assert [b for b in inference if b > 10] == [20, 30, 60, 120, math.inf]
    # A GPU model slowing from 20 ms to 40 ms moves its median across two buckets.
    labels = {"model": "toto", "device": "cuda:0", "mode": "eager"}
    bucket = "trader_inference_latency_seconds_bucket"
    m.observe_inference("toto", "cuda:0", "eager", 0.020)
    m.observe_inference("toto", "cuda:0", "eager", 0.040)
    assert [get(m, bucket, **labels, le=le) for le in ("0.022", "0.033", "0.047")] == [1, 1, 2]


def test_stage_buckets_resolve_from_10_microseconds_to_minutes():
    m = metrics()
    assert edges(m, "trader_tick_duration_seconds") == [*STAGE_SECONDS, math.inf]
    assert (STAGE_SECONDS[0], STAGE_SECONDS[-1]) == (0.00001, 120)
    m.observe_tick(TickReport(T0, timings={"strategy": 0.00004}))
    stage = "trader_tick_duration_seconds_bucket"
    assert get(m, stage, stage="strategy", le="2.5e-05") == 0
    assert get(m, stage, stage="strategy", le="5e-05") == 1


def test_no_metric_has_a_label_prometheus_would_rename():
    m = metrics()
    m.prepare_models([("toto", "cpu", "eager")])
    for family in m.registry.collect():
        for sample in family.samples:
            assert not {"job", "instance"} & set(sample.labels), (family.name, sample.labels)
    assert get(m, "trader_jobs_missed_total", task="quotes") == 0
    m.job_missed("quotes")
    assert get(m, "trader_jobs_missed_total", task="quotes") == 1


def test_quote_age_is_nan_before_the_first_quote_and_measured_at_each_scrape():
    clock = SimulatedClock(T0)
    m = metrics(clock=clock)
    assert math.isnan(get(m, "trader_quote_age_seconds", symbol=SYMBOL) or 0.0)
    m.observe_quote(SYMBOL, quote())  # stamped T0
    assert get(m, "trader_quote_age_seconds", symbol=SYMBOL) == 0
    clock.advance_to(T0 + timedelta(seconds=70))  # the exchange is away: nothing new comes
    assert get(m, "trader_quote_age_seconds", symbol=SYMBOL) == 70
    m.quote_seen(SYMBOL, T0 - timedelta(seconds=5))  # an older quote changes nothing
    assert get(m, "trader_quote_age_seconds", symbol=SYMBOL) == 70


def test_a_quote_too_old_to_trade_on_still_sets_the_age():
    clock = SimulatedClock(T0 + timedelta(minutes=5))
    m = metrics(clock=clock)
    # The tick skipped the symbol (stale_quote): the quote is not in report.quotes, its time is.
    report = TickReport(clock.now(), skipped={SYMBOL: "stale_quote"}, quote_times={SYMBOL: T0})
    m.observe_tick(report)
    assert get(m, "trader_quote_age_seconds", symbol=SYMBOL) == 300


def test_quote_age_waits_for_the_clock_and_follows_a_simulated_one():
    m = metrics()
    m.quote_seen(SYMBOL, T0)
    assert math.isnan(get(m, "trader_quote_age_seconds", symbol=SYMBOL) or 0.0)  # no clock yet
    m.use_clock(SimulatedClock(T0 + timedelta(hours=2)))
    assert get(m, "trader_quote_age_seconds", symbol=SYMBOL) == 7200


def test_a_quote_for_a_symbol_not_in_the_settings_gets_its_series():
    m = metrics(clock=SimulatedClock(T0 + timedelta(seconds=3)))
    m.quote_seen("BTC/USDT", T0)
    assert get(m, "trader_quote_age_seconds", symbol="BTC/USDT") == 3


@pytest.mark.parametrize(("simulated", "value"), [(False, 0.0), (True, 1.0)])
def test_the_clock_says_whether_it_is_simulated(simulated, value):
    assert get(metrics(simulated_clock=simulated), "trader_clock_simulated") == value


@pytest.mark.parametrize(
    ("report", "outcome"),
    [
        (TickReport(T0, ready=[SYMBOL]), "ok"),
        (TickReport(T0, skipped={SYMBOL: "exchange_unavailable"}), "degraded"),
        (TickReport(T0, skipped={SYMBOL: "gap: 5 of 16 bars in a row"}), "degraded"),
        (TickReport(T0, ready=[SYMBOL], failed_stages=["forecast:toto"]), "failed"),
        (TickReport(T0, failed_stages=["data"], skipped={SYMBOL: "stale_bars"}), "failed"),
    ],
)
def test_a_tick_is_ok_only_when_every_symbol_traded_and_no_stage_failed(report, outcome):
    assert tick_outcome(report) == outcome
    m = metrics()
    m.observe_tick(report)
    assert get(m, "trader_ticks_total", outcome=outcome) == 1
    assert get(m, "trader_last_tick_timestamp_seconds") == T0.timestamp()
    expected_ok = T0.timestamp() if outcome == "ok" else 0.0
    assert get(m, "trader_last_ok_tick_timestamp_seconds") == expected_ok


def test_ticks_during_an_outage_run_but_the_last_ok_tick_stays_behind():
    m = metrics(clock=SimulatedClock(T0))
    hooks = TelemetryHooks(m, "paper-1", None)
    hooks.on_tick(TickReport(T0, ready=[SYMBOL], quotes={SYMBOL: quote()}))
    for minutes in (1, 2):
        at = T0 + timedelta(minutes=minutes)
        hooks.on_tick(TickReport(at, skipped={SYMBOL: "exchange_unavailable"}))
    assert get(m, "trader_ticks_total", outcome="ok") == 1
    assert get(m, "trader_ticks_total", outcome="degraded") == 2
    assert get(m, "trader_last_tick_timestamp_seconds") == (T0 + timedelta(minutes=2)).timestamp()
    assert get(m, "trader_last_ok_tick_timestamp_seconds") == T0.timestamp()


def test_the_risk_limits_and_the_days_loss_are_exposed_as_ratios():
    m = metrics()
    assert get(m, "trader_risk_limit_ratio", limit="max_drawdown") == 0
    assert get(m, "trader_daily_loss_ratio") == 0
    m.set_risk_limits(RiskSettings(max_drawdown=0.1, max_daily_loss=0.05))
    assert get(m, "trader_risk_limit_ratio", limit="max_drawdown") == 0.1
    assert get(m, "trader_risk_limit_ratio", limit="daily_loss") == 0.05
    book = Portfolio("USDT", Decimal(10_000))
    report = TickReport(T0, equity=Decimal(9_700), drawdown=0.04, daily_loss=0.03, portfolio=book)
    m.observe_tick(report)
    assert get(m, "trader_drawdown_ratio") == 0.04
    assert get(m, "trader_daily_loss_ratio") == 0.03


class Compiled:
    """A forecaster whose compile guard gives up after its first call."""

    name = "toto"

    def __init__(self) -> None:
        self.calls = 0

    @property
    def mode(self) -> str:
        return "eager" if self.calls > 1 else "compile"

    @property
    def compile_stats(self) -> CompileStats:
        return CompileStats(forced_eager="too many recompiles" if self.calls > 1 else None)

    def forecast(self, requests):
        self.calls += 1
        return []


def test_a_model_the_guard_switched_to_eager_is_flagged():
    m = metrics()
    m.prepare_models([("toto", "cpu", "compile")])
    assert get(m, "trader_model_forced_eager", model="toto") == 0
    slot = ModelSlot("toto", "cpu", m)
    slot.load(Compiled())  # type: ignore[arg-type]
    slot.forecast([])
    assert get(m, "trader_model_forced_eager", model="toto") == 0
    slot.forecast([])
    assert get(m, "trader_model_forced_eager", model="toto") == 1
    assert get(m, "trader_inference_latency_seconds_count", model="toto", device="cpu",
                mode="eager") == 1  # fmt: skip
