"""The alert rules and the dashboard read only the metrics agreed with the daemon, in PromQL
that parses. (That the daemon exports each one is checked against a running daemon in
tests/integration/test_deploy_metrics.py.)"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.deploy_queries import (
    AGREED_METRICS,
    DEPLOY,
    PROMETHEUS_SERIES,
    RULE_FILES,
    agreed_name,
    dashboard_queries,
    rule_queries,
    selectors,
)

QUERIES = rule_queries() + dashboard_queries()
RULE_TESTS = DEPLOY / "prometheus" / "tests" / "trader.rules.test.yml"

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
    # Monitoring that pages when it matters: an outage, bad ticks, risk before the halt.
    "TraderExchangeUnreachable",
    "TraderExchangeDown",
    "TraderDataSkipping",
    "TraderTickFailed",
    "TraderTicksDegraded",
    "TraderNoOkTick",
    "TraderNotReady",
    "TraderModelForcedEager",
    "TraderDailyLossNearLimit",
}
# Rules that need no replay guard: they read no series of a running daemon.
NO_DAEMON_SERIES = {"TraderScrapeTargetMissing"}
REPLAY_GUARD = "unless on (job, instance) trader_clock_simulated == 1"


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
    # Beside it the rule may read others (trader_clock_simulated, to stay quiet in a replay).
    [selector] = [s for s in selectors(query.expr) if s.metric == "trader_device_info"]
    assert ("fallback", "!=", "") in [(m.label, m.op, m.value) for m in selector.matchers]


def alert_rules() -> list[dict]:
    return [
        rule
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]


def test_every_alert_says_how_long_in_one_for_line():
    # The live tests shorten the `for:` values of a copy of the rules: every alert has one.
    for rule in alert_rules():
        assert "for" in rule, rule["alert"]


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_a_replay_never_pages(rule):
    # A replay runs on a simulated clock: its tick times are in the past, its halts part of the
    # backtest. TraderDown looks back, as a finished replay's target has no series left.
    expr = " ".join(str(rule["expr"]).split())
    if rule["alert"] in NO_DAEMON_SERIES:
        assert "trader_clock_simulated" not in expr
    elif rule["alert"] == "TraderDown":
        assert "unless on (job, instance) last_over_time(trader_clock_simulated[" in expr
    else:
        assert expr.endswith(REPLAY_GUARD), expr


def test_risk_warnings_read_the_limits_the_daemon_exports():
    # A fraction of the configured limit, compared with what the limit is checked against;
    # never a copy of the default (0.10, 0.05) that a changed setting would leave behind.
    rules = {rule["alert"]: " ".join(str(rule["expr"]).split()) for rule in alert_rules()}
    for alert, ratio, limit in (
        ("TraderDrawdownNearLimit", "trader_drawdown_ratio", "max_drawdown"),
        ("TraderDailyLossNearLimit", "trader_daily_loss_ratio", "daily_loss"),
    ):
        expr = rules[alert]
        assert expr.startswith(f"{ratio} > on (job, instance) 0.8 * "), expr
        assert f'trader_risk_limit_ratio{{limit="{limit}"}}' in expr
        assert not re.search(r"\b0\.(05|1|10)\b", expr), expr


def test_every_alert_is_unit_tested_firing_and_quiet_in_a_replay():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired: set[str] = set()
    quiet_replay: set[str] = set()
    for case in tests:
        replays = {
            re.search(r'instance="([^"]+)"', item["series"])[1]
            for item in case["input_series"]
            if item["series"].startswith("trader_clock_simulated{")
            and item["values"].split()[0].startswith("1")
        }
        for check in case["alert_rule_test"]:
            instances = {alert["exp_labels"].get("instance") for alert in check["exp_alerts"]}
            if instances:
                fired.add(check["alertname"])
            if replays and not replays & instances:
                quiet_replay.add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names <= fired, names - fired
    assert names - NO_DAEMON_SERIES <= quiet_replay, names - NO_DAEMON_SERIES - quiet_replay
