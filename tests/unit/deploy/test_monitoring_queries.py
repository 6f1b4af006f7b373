"""The alert rules and the dashboard read only the metrics agreed with the daemon, in PromQL
that parses; the rules judge the daemon in its own time and its markets' sessions, and their
promtool tests cover every market. (That the daemon exports each metric is checked against a
running daemon in tests/integration/test_deploy_metrics.py; promtool runs the rule tests in
tests/integration/test_deploy_tools.py.)"""

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
RULE_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))

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
    # Monitoring that fits every market and bar size (issue 41).
    "TraderCredentialsRefused",
    "TraderCalendarEndsSoon",
    "TraderCalendarFallback",
    "TraderInferenceSlowerThanUsual",
    # A ledger whose disk refuses writes (issue 42).
    "TraderLedgerWriteFailing",
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
        assert "unless on (job, instance) (last_over_time(trader_clock_simulated[7d]) == 1" in expr
        assert "last_over_time(trader_replay_finished[7d]) == 1)" in expr
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


def rule_tests() -> list[dict]:
    return [case for path in RULE_TESTS for case in yaml.safe_load(path.read_text())["tests"]]


def test_every_rule_test_file_tests_the_project_rules():
    # promtool runs every file in the folder; each must load the rules it tests.
    assert len(RULE_TESTS) > 1
    for path in RULE_TESTS:
        assert yaml.safe_load(path.read_text())["rule_files"] == ["../rules/trader.rules.yml"]


def test_every_alert_is_unit_tested_firing_and_quiet_in_a_replay():
    tests = rule_tests()
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


# --- the daemon judged in its own time and its markets' sessions (issue 41) -------------------


def rule_exprs() -> dict[str, str]:
    return {rule["alert"]: " ".join(str(rule["expr"]).split()) for rule in alert_rules()}


def reads(expr: str) -> set[str]:
    return {selector.metric for selector in selectors(expr)}


def test_no_rule_reads_the_clock_of_prometheus():
    # time() is Prometheus's wall clock: a sandbox's shifted or accelerated clock is judged in
    # its own time, trader_clock_timestamp_seconds.
    for alert, expr in rule_exprs().items():
        assert "time()" not in expr, alert


def test_tick_lateness_is_measured_against_the_due_tick_and_the_timeframe():
    exprs = rule_exprs()
    for alert in ("TraderTickStale", "TraderNoTickSinceStart"):
        assert reads(exprs[alert]) >= {
            "trader_clock_timestamp_seconds",
            "trader_next_tick_due_timestamp_seconds",
            "trader_timeframe_seconds",
        }, alert


def test_runs_of_bad_ticks_are_counted_in_ticks_not_hours():
    # A window of wall time would be three bars on 1h bars, a few hours of a day's one bar.
    exprs = rule_exprs()
    for alert, gauge in (
        ("TraderNoOkTick", "trader_ticks_not_ok_in_a_row"),
        ("TraderDataSkipping", "trader_symbol_skips_in_a_row"),
    ):
        assert gauge in reads(exprs[alert]), alert
        assert "[" not in exprs[alert], f"{alert} reads a range of wall time"


def test_quote_age_is_judged_by_the_daemon_maximum_and_only_in_session():
    for alert, expr in rule_exprs().items():
        if "trader_quote_age_seconds" not in reads(expr):
            continue
        assert {"trader_quote_max_age_seconds", "trader_market_in_session"} <= reads(expr), alert
        numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", expr))
        assert numbers <= {"1"}, f"{alert}: a threshold of its own {numbers}"


_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|Inf|NaN)"
_RUN = re.compile(rf"^(?P<a>{_NUMBER})(?:(?P<op>[-+])(?P<b>\d+(?:\.\d+)?))?x(?P<n>\d+)$")


def expand(values: str) -> list[float | None]:
    """promtool's series notation: "a+bxn" is a, a+b ... a+nb (n+1 samples), "axn" a n+1
    times, "_xn" n missing samples; missing samples and staleness markers read None."""
    samples: list[float | None] = []
    for token in values.split():
        if token in ("_", "stale"):
            samples.append(None)
        elif token.startswith("_x"):
            samples += [None] * int(token[2:])
        elif run := _RUN.match(token):
            a, n = float(run["a"]), int(run["n"])
            b = float(run["b"] or 0) * (-1 if run["op"] == "-" else 1)
            samples += [a + k * b for k in range(n + 1)]
        else:
            samples.append(float(token))
    return samples


def test_the_series_notation_reads_as_promtool_documents_it():
    # The examples of Prometheus's unit-testing-rules documentation.
    assert expand("-2+4x3") == [-2, 2, 6, 10]
    assert expand("1-2x4") == [1, -1, -3, -5, -7]
    assert expand("1x4") == [1, 1, 1, 1, 1]
    assert expand("1 _x3 stale") == [1, None, None, None, None]


def minutes(duration: str) -> int:
    units = {"m": 1, "h": 60, "d": 1440}
    parts = re.findall(r"(\d+)([mhd])", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


# The files of markets that close, and the alerts whose series change when a market closes:
# each file checks each of them while some daemon's markets are all closed and it is not the
# one expected to fire.
CLOSING_MARKETS = (
    "stocks.rules.test.yml",  # XNYS on 1m bars: a weekend, Thanksgiving, a half day
    "stocks_daily.rules.test.yml",  # XNYS on 1d bars: Thanksgiving and a weekend
    "fx.rules.test.yml",  # the FX weekend close
    "xshg.rules.test.yml",  # Shanghai's lunch break
)
SESSION_AWARE = {
    "TraderTickStale",
    "TraderNoTickSinceStart",
    "TraderNoOkTick",
    "TraderDataSkipping",
    "TraderQuoteStale",
    "TraderNotReady",
}


@pytest.mark.parametrize("name", CLOSING_MARKETS)
def test_each_closing_market_checks_the_session_alerts_while_closed(name):
    checked: set[str] = set()
    for case in yaml.safe_load((DEPLOY / "prometheus" / "tests" / name).read_text())["tests"]:
        step = minutes(case["interval"])
        sessions: dict[str, list[list[float | None]]] = {}
        for item in case["input_series"]:
            if item["series"].startswith("trader_market_in_session{"):
                instance = re.search(r'instance="([^"]+)"', item["series"])[1]
                sessions.setdefault(instance, []).append(expand(item["values"]))
        for check in case["alert_rule_test"]:
            i = minutes(check["eval_time"]) // step
            closed = {
                instance
                for instance, symbols in sessions.items()
                if all(i < len(values) and values[i] == 0 for values in symbols)
            }
            firing = {alert["exp_labels"]["instance"] for alert in check["exp_alerts"]}
            if closed - firing:
                checked.add(check["alertname"])
    assert checked >= SESSION_AWARE, SESSION_AWARE - checked
