"""The live skill metrics exist from the first scrape and follow the scores; the MQTT event."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from trader.skill.live import LiveScore, RollingSkill, SkillUpdate, Stability
from trader.telemetry.events import forecast_score
from trader.telemetry.skill_metrics import SkillMetrics

AT = datetime(2024, 1, 1, tzinfo=UTC)
SUMS = {"crps": (0.02, 2.0), "crps_naive": (0.03, 2.0), "skill": (0.02, 0.03),
        "skill_no_change": (0.02, 0.04), "mase": (0.03, 0.03), "coverage_80": (2.0, 2.0),
        "coverage_50": (0.0, 0.0)}  # fmt: skip
NAIVE = {"crps": (0.03, 2.0), "skill": (0.03, 0.03), "mase": (0.03, 0.03)}


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_every_series_exists_before_a_score_then_follows_them():
    registry = CollectorRegistry()
    metrics = SkillMetrics(registry, ["SOL/USDT"], ["toto"])
    for model in ("toto", "naive"):
        crps = value(registry, "trader_forecast_crps", model=model, symbol="SOL/USDT")
        assert crps is not None
        assert math.isnan(crps)
        assert value(registry, "trader_forecast_coverage", model=model, symbol="SOL/USDT",
                     interval="90") is not None  # fmt: skip
    assert value(registry, "trader_forecasts_unusable_total", model="toto", reason="clipped") == 0
    rolling = RollingSkill(10)
    rolling.add("toto", "SOL/USDT", SUMS)
    rolling.add("naive", "SOL/USDT", NAIVE)
    score = LiveScore("toto", "SOL/USDT", 0, 2, SUMS, NAIVE)
    update = SkillUpdate(
        [score], [("toto", "SOL/USDT", "gap")], {("toto", "SOL/USDT"), ("naive", "SOL/USDT")},
        [Stability("toto", 3, 1, ["SOL/USDT"], {"SOL/USDT": 1.5}, ["SOL/USDT"])],
    )  # fmt: skip
    metrics.observe(update, rolling)
    assert value(registry, "trader_forecast_crps", model="toto", symbol="SOL/USDT") == 0.01
    skill = value(registry, "trader_forecast_skill_vs_naive", model="toto", symbol="SOL/USDT")
    assert skill is not None
    assert abs(skill - (1 - 0.02 / 0.03)) < 1e-12
    assert value(registry, "trader_forecast_skill_vs_naive", model="naive", symbol="SOL/USDT") == 0
    # The no-change point comparison is its own series, never the headline's.
    point = value(registry, "trader_forecast_skill_vs_no_change", model="toto", symbol="SOL/USDT")
    assert point == 0.5
    assert value(registry, "trader_forecast_coverage", model="toto", symbol="SOL/USDT",
                 interval="80") == 1.0  # fmt: skip
    fifty = value(registry, "trader_forecast_coverage", model="toto", symbol="SOL/USDT",
                  interval="50")  # fmt: skip
    assert fifty is not None
    assert math.isnan(fifty)  # no such interval: unknown, never 0
    assert value(registry, "trader_forecast_scores_total", model="toto", symbol="SOL/USDT",
                 outcome="gap") == 1  # fmt: skip
    assert value(registry, "trader_forecasts_total", model="toto") == 3
    assert value(registry, "trader_forecasts_unusable_total", model="toto",
                 reason="non_finite") == 1  # fmt: skip
    assert value(registry, "trader_forecast_median_jumps_total", model="toto",
                 symbol="SOL/USDT") == 1  # fmt: skip
    metrics.resume([(("toto", "SOL/USDT", "scored"), 5)])
    assert value(registry, "trader_forecast_scores_total", model="toto", symbol="SOL/USDT",
                 outcome="scored") == 6  # fmt: skip


def test_the_forecast_score_event():
    rolling = RollingSkill(10)
    rolling.add("toto", "SOL/USDT", SUMS)
    rolling.add("naive", "SOL/USDT", NAIVE)
    score = LiveScore("toto", "SOL/USDT", int(AT.timestamp() * 1000), 2, SUMS, NAIVE)
    event = forecast_score(
        "default", AT, score, rolling.figures("toto", "SOL/USDT"),
        rolling.figures("naive", "SOL/USDT"),
    )  # fmt: skip
    assert event.topic == "forecast_score/SOL-USDT"
    body = json.loads(event.payload())
    assert body["schema"] == "trader.forecast_score/1"
    assert body["as_of"] == AT.isoformat()
    assert body["crps"] == 0.01
    assert body["coverage"] == {"80": 1.0, "50": None}
    assert body["window"]["forecasts"] == 1
    assert body["window"]["crps_naive"] == 0.015
