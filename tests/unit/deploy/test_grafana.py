"""The dashboard is what its generator builds, and valid for Grafana's file provisioning: the
provider finds it, every panel and query points at the provisioned datasource, ids are unique,
panels fit the grid without overlapping, and every variable a query uses is defined."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from types import ModuleType

import pytest
import yaml

from tests.deploy_queries import (
    AGREED_METRICS,
    DEPLOY,
    agreed_name,
    dashboard_queries,
    rule_queries,
    selectors,
)

GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "trader.json"
PANEL_TYPES = {"row", "stat", "timeseries", "table", "state-timeline"}
BUILT_IN_VARIABLES = {"__rate_interval", "__interval", "__range"}


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grafana_dashboard", GRAFANA / "dashboard.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


@pytest.fixture(scope="module")
def datasource() -> dict:
    config = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yaml").read_text())
    assert config["apiVersion"] == 1
    [source] = config["datasources"]
    return source


def panels(dashboard: dict) -> list[dict]:
    return [
        *dashboard["panels"],
        *(p for row in dashboard["panels"] for p in row.get("panels", [])),
    ]


def test_the_json_is_what_the_generator_builds():
    generator = load_generator()
    assert DASHBOARD.read_text() == generator.render(), "run python deploy/grafana/dashboard.py"
    assert generator.main(["--check"]) == 0


def test_the_datasource_is_prometheus_in_the_compose_stack(datasource):
    assert datasource["type"] == "prometheus"
    assert datasource["uid"]
    assert datasource["url"] == "http://prometheus:9090"
    assert datasource["access"] == "proxy"


def test_the_provider_loads_the_folder_the_dashboard_is_mounted_in():
    config = yaml.safe_load((GRAFANA / "provisioning/dashboards/trader.yaml").read_text())
    assert config["apiVersion"] == 1
    [provider] = config["providers"]
    assert provider["type"] == "file"
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    mounts = dict(volume.split(":")[:2] for volume in compose["services"]["grafana"]["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"


def test_dashboard_top_level(dashboard):
    assert dashboard["uid"]
    assert dashboard["title"]
    assert dashboard.get("id") is None  # provisioning assigns it
    assert isinstance(dashboard["schemaVersion"], int)
    assert dashboard["schemaVersion"] >= 36
    assert dashboard["panels"]


def test_panel_ids_are_unique_positive_integers(dashboard):
    ids = [panel["id"] for panel in panels(dashboard)]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(ids) == len(set(ids))


def test_every_panel_and_target_uses_the_provisioned_datasource(dashboard, datasource):
    expected = {"type": "prometheus", "uid": datasource["uid"]}
    for panel in panels(dashboard):
        assert panel["type"] in PANEL_TYPES, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == expected, panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == expected, panel["title"]
            assert target["expr"].strip(), panel["title"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == expected


def test_panels_fit_the_grid_and_do_not_overlap(dashboard):
    taken: set[tuple[int, int]] = set()
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["w"] > 0
        assert grid["h"] > 0
        assert grid["x"] >= 0
        assert grid["y"] >= 0
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_no_query_matches_a_label_the_daemon_renamed(dashboard):
    # trader_jobs_missed_total's `job` label became `task`: Prometheus would have renamed it
    # exported_job, and `job` is the scrape job's.
    for query in dashboard_queries():
        for selector in selectors(query.expr):
            labels = {m.label for m in selector.matchers}
            assert "exported_job" not in labels, query.where
            if selector.metric == "trader_jobs_missed_total":
                assert [m.value for m in selector.matchers if m.label == "job"] == ["trader"]


def test_every_variable_a_query_uses_is_defined(dashboard):
    defined = {variable["name"] for variable in dashboard["templating"]["list"]}
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            used = set(re.findall(r"\$(\w+)", target["expr"]))
            assert used <= defined | BUILT_IN_VARIABLES, (panel["title"], used - defined)


def test_value_mappings_and_thresholds_are_well_formed(dashboard):
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        defaults = panel["fieldConfig"]["defaults"]
        steps = defaults["thresholds"]["steps"]
        assert steps[0]["value"] is None  # the base step
        values = [step["value"] for step in steps[1:]]
        assert values == sorted(values), panel["title"]
        for mapping in defaults["mappings"]:
            assert mapping["type"] == "value"
            assert all({"text", "color"} <= set(m) for m in mapping["options"].values())


def test_the_operator_sees_every_topic_the_issue_lists(dashboard):
    # Every agreed metric has a panel: tick health, latency, compiles, GPU memory, quotes,
    # orders, fills, positions, P&L, equity, drawdown, state, skips, errors, MQTT.
    read = [s for q in dashboard_queries() for s in selectors(q.expr)]
    assert {agreed_name(s.metric) for s in read} >= AGREED_METRICS
    assert any(
        s.metric == "trader_ticks_total"
        and ("outcome", "=", "missed") in [(m.label, m.op, m.value) for m in s.matchers]
        for s in read
    )
    # Ticks that ran but were not ok (degraded, failed) have a stat of their own.
    assert any(
        s.metric == "trader_ticks_total"
        and any(
            m.label == "outcome"
            and m.op == "=~"
            and {"degraded", "failed"} <= set(m.value.split("|"))
            for m in s.matchers
        )
        for s in read
    )
    # Both risk limits are drawn against what they limit.
    limits = {
        m.value
        for s in read
        if s.metric == "trader_risk_limit_ratio"
        for m in s.matchers
        if m.label == "limit"
    }
    assert limits == {"max_drawdown", "daily_loss"}
    latency = [
        t["expr"]
        for p in panels(dashboard)
        for t in p.get("targets", [])
        if "trader_inference_latency_seconds" in t["expr"]
    ]
    assert any("0.5," in e and "model, device" in e for e in latency)
    assert any("0.99," in e and "model, device" in e for e in latency)


def test_no_query_judges_the_daemon_by_prometheus_time(dashboard):
    # A sandbox's accelerated clock and a replay's simulated one run in their own time: ages
    # and delays are measured against trader_clock_timestamp_seconds, never time().
    for query in dashboard_queries():
        assert not re.search(r"\btime\(\)", query.expr), query.where


def test_per_symbol_signals_follow_the_symbol_variable(dashboard):
    per_symbol = {
        "trader_market_in_session",
        "trader_symbol_skips_in_a_row",
        "trader_bars_missing_total",
        "trader_window_contiguous_bars",
        "trader_feed_no_trade_bars_total",
    }
    read = [
        (q, s.metric)
        for q in dashboard_queries()
        for s in selectors(q.expr)
        if s.metric in per_symbol
    ]
    assert {metric for _, metric in read} == per_symbol
    for query, metric in read:  # as written, before the variables get values
        assert re.search(rf'{metric}{{[^}}]*symbol=~"\$symbol"', query.expr), query.where


def test_inference_latency_is_drawn_last_hour_against_last_week(dashboard):
    # The slowdown alert's comparison: the daemon's p50 over 1h over its own p50 over 7d.
    [ratio] = [
        t["expr"]
        for p in panels(dashboard)
        for t in p.get("targets", [])
        if "trader_inference_latency_seconds" in t["expr"] and "[7d]" in t["expr"]
    ]
    last_hour, last_week = ratio.split(" / ")
    assert last_hour.startswith("histogram_quantile(0.5,")
    assert last_hour.endswith("[1h])))")
    assert last_week == last_hour.replace("[1h]", "[7d]")
    # The panel's red line is the alert's factor.
    [panel] = [p for p in panels(dashboard) if ratio in [t["expr"] for t in p.get("targets", [])]]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    [alert] = [q.expr for q in rule_queries() if "[7d]" in q.expr and "latency" in q.expr]
    factor = re.search(r"> (\d+) \* histogram_quantile\(0\.5,", alert)
    assert factor, alert
    assert (float(factor[1]), "red") in [(s["value"], s["color"]) for s in steps[1:]]


def test_stats_colour_the_calendars_end_red_when_near(dashboard):
    # A figure that is bad when low: red below a week, amber below 30 days (the alert's lead).
    [ends] = [p for p in panels(dashboard) if p["title"] == "Calendar ends in"]
    steps = ends["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["value"], s["color"]) for s in steps] == [
        (None, "red"),
        (7 * 86400, "orange"),
        (30 * 86400, "green"),
    ]
