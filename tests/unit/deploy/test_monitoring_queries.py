"""The alert rules and the dashboard read only the metrics agreed with the daemon, in PromQL
that parses. (That the daemon exports each one is checked against a running daemon in
tests/integration/test_deploy_metrics.py.)"""

from __future__ import annotations

import pytest
import yaml

from tests.deploy_queries import (
    AGREED_METRICS,
    PROMETHEUS_SERIES,
    RULE_FILES,
    agreed_name,
    dashboard_queries,
    rule_queries,
    selectors,
)

QUERIES = rule_queries() + dashboard_queries()

# What the issue asks the alerts to cover, by alert name.
REQUIRED_ALERTS = {
    "TraderDown",  # daemon down
    "TraderTickStale",  # no tick for two bar periods
    "TraderNoTickSinceStart",
    "TraderTorchRecompiles",  # recompiles after warm-up
    "TraderInferenceLatencyHigh",  # p99 latency over budget
    "TraderQuoteStale",
    "TraderSyntheticQuotesLive",
    "TraderDrawdownNearLimit",
    "TraderHalted",
    "TraderDeviceFallback",
    "TraderMqttDisconnected",
}


def test_there_are_queries_from_both_the_rules_and_the_dashboard():
    assert rule_queries()
    assert dashboard_queries()


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_every_query_parses_and_reads_only_agreed_metrics(query):
    found = selectors(query.expr)
    assert found, f"{query.where}: reads no metric"
    for selector in found:
        name = agreed_name(selector.metric)
        assert name in AGREED_METRICS | PROMETHEUS_SERIES, f"{query.where}: {selector.metric}"


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_every_selector_is_scoped_to_the_trader_job(query):
    # A Prometheus that scrapes other targets must not mix their series into these.
    for selector in selectors(query.expr):
        if query.where.startswith(tuple(path.name for path in RULE_FILES)):
            continue  # rules see one job per daemon; `up` is checked below
        assert any(m.label == "job" and m.value == "trader" for m in selector.matchers), (
            f"{query.where}: {selector.metric} is not limited to job=trader"
        )


def test_up_is_only_read_for_the_trader_job():
    for query in QUERIES:
        for selector in selectors(query.expr):
            if selector.metric == "up":
                assert ("job", "=", "trader") in [
                    (m.label, m.op, m.value) for m in selector.matchers
                ]


def test_the_dashboard_and_the_rules_together_read_every_agreed_metric():
    read = {agreed_name(s.metric) for q in QUERIES for s in selectors(q.expr)}
    assert read >= AGREED_METRICS


def test_the_required_alerts_exist_with_a_severity_and_a_summary():
    rules = [
        rule
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]
    names = [rule["alert"] for rule in rules if "alert" in rule]
    assert len(names) == len(set(names))
    assert set(names) >= REQUIRED_ALERTS
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["description"]


def test_the_device_fallback_alert_matches_a_nonempty_fallback_label():
    # The daemon exports fallback="" when there was none (the agreed trader_device_info labels).
    [query] = [q for q in rule_queries() if q.where.endswith("TraderDeviceFallback")]
    [selector] = selectors(query.expr)
    assert selector.metric == "trader_device_info"
    assert ("fallback", "!=", "") in [(m.label, m.op, m.value) for m in selector.matchers]
