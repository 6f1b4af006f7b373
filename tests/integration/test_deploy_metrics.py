"""The dashboard and the alert rules against a running daemon: every metric they read is on its
/metrics page with the labels (and label values) they match on; a real Prometheus loaded with the
rules scrapes it and evaluates every rule and every dashboard query without an error; and the
image's health check calls the daemon healthy. The daemon is `trader run --replay` on recorded
bars with the baseline model, so no weights or network are needed."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy_queries import (
    DEPLOY,
    LEFT_OFF,
    PROMETHEUS_SERIES,
    TARGET_LABELS,
    VENUE_ONLY,
    Query,
    agreed_name,
    dashboard_queries,
    exported_metrics,
    exposed_series,
    plain,
    rule_queries,
    selectors,
)
from tests.integration.conftest import TRADER, clean_env
from tests.integration.loopback import free_port, http_get
from tests.integration.prometheus import RunningPrometheus
from tests.integration.prometheus import prometheus as running_prometheus
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration

RECORDING = SOLUSDT_1H  # the daemon replays the compressed excerpt as it is
SYMBOL = "SOL/USDT"
# Simulated seconds per second: ten 1h bars a second, so ticks happen within the test but the
# recording (4,000 bars, ticks from bar 512 on: about six minutes) outlasts it.
SPEED = "36000"
START_TIMEOUT_S = 90.0
# Label values a replay run cannot show, because they depend on settings: the rules match them
# (a live-mode alert), so only the label's presence can be checked here.
VALUES_FROM_SETTINGS = {("trader_build_info", "broker_mode")}


@dataclass
class RunningDaemon:
    process: subprocess.Popen[str]
    port: int
    log: Path

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def scrape(self) -> str:
        status, text = http_get(self.metrics_url)
        assert status == 200, text
        return text

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:]


def wait_until(condition, what: str, timeout: float, daemon: RunningDaemon | None = None):
    deadline = time.monotonic() + timeout
    while True:
        if daemon is not None and daemon.process.poll() is not None:
            pytest.fail(f"the daemon exited ({daemon.process.returncode}): {daemon.log_tail()}")
        try:
            result = condition()
        except (OSError, ValueError, AssertionError):  # not up yet, or not ready
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            tail = daemon.log_tail() if daemon else ""
            pytest.fail(f"timed out waiting for {what}\n{tail}")
        time.sleep(0.2)


def last_tick(metrics: str) -> float:
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "trader_last_tick_timestamp_seconds":
                return float(sample.value)
    return 0.0


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    workdir = tmp_path_factory.mktemp("daemon")
    port = free_port()
    env = clean_env(
        TRADER_METRICS__ENABLED="true",
        TRADER_METRICS__HOST="127.0.0.1",
        TRADER_METRICS__PORT=str(port),
        TRADER_FORECAST__MODEL="baseline",
        TRADER_MARKET__SYMBOLS=SYMBOL,
        TRADER_LEDGER__PATH=str(workdir / "ledger.sqlite3"),
        TRADER_MQTT__ENABLED="false",
    )
    log = workdir / "daemon.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [TRADER, "run", "--replay", str(RECORDING), "--symbol", SYMBOL, "--speed", SPEED],
            cwd=workdir,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    running = RunningDaemon(process, port, log)
    try:
        # The daemon must serve /metrics (a replay run is the same daemon, metrics included);
        # until it does, these tests fail rather than skip.
        wait_until(running.scrape, f"{running.metrics_url}", START_TIMEOUT_S, running)
        wait_until(
            lambda: last_tick(running.scrape()) > 0, "a first tick", START_TIMEOUT_S, running
        )
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def exposed(daemon: RunningDaemon) -> dict[str, list[dict[str, str]]]:
    return exposed_series(daemon.scrape())


QUERIES = rule_queries() + dashboard_queries()


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_every_metric_a_query_reads_is_exported_with_its_labels(query: Query, exposed):
    for selector in selectors(query.expr):
        if selector.metric in PROMETHEUS_SERIES:
            continue
        assert selector.metric in exposed, f"{query.where}: /metrics has no {selector.metric}"
        if selector.metric in VENUE_ONLY:
            continue  # on the page, with no series on this venue: no labels to check
        samples = exposed[selector.metric]
        assert samples, f"{query.where}: {selector.metric} has no series yet (not pre-initialised)"
        for matcher in selector.matchers:
            if matcher.label in TARGET_LABELS:
                continue
            values = {labels[matcher.label] for labels in samples if matcher.label in labels}
            assert values, (
                f"{query.where}: {selector.metric} has no label {matcher.label!r} "
                f"(it has {sorted({k for labels in samples for k in labels})})"
            )
            config_dependent = (selector.metric, matcher.label) in VALUES_FROM_SETTINGS
            if matcher.op == "=" and matcher.value and not config_dependent:
                assert matcher.value in values, (
                    f"{query.where}: {selector.metric}{{{matcher.label}={matcher.value!r}}} "
                    f"never appears; values seen: {sorted(values)}"
                )


def test_every_metric_the_daemon_exports_is_shown_or_left_off_with_a_reason(
    daemon: RunningDaemon,
):
    exported = exported_metrics(daemon.scrape())
    read = {agreed_name(s.metric) for q in QUERIES for s in selectors(q.expr)}
    unread = exported - read - set(LEFT_OFF)
    assert not unread, f"neither on the dashboard nor in the rules, nor in LEFT_OFF: {unread}"
    assert set(LEFT_OFF) <= exported, (
        f"LEFT_OFF names what is not exported: {set(LEFT_OFF) - exported}"
    )
    assert set(VENUE_ONLY) <= exported


def test_the_health_check_calls_the_daemon_healthy(daemon: RunningDaemon, tmp_path):
    result = subprocess.run(
        [sys.executable, str(DEPLOY / "docker" / "healthcheck.py")],
        cwd=tmp_path,
        env=clean_env(TRADER_METRICS__PORT=str(daemon.port)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "answered 200" in result.stdout


# --- a real Prometheus with the stack's configuration ----------------------------------------


@pytest.fixture(scope="module")
def prometheus(daemon: RunningDaemon, tmp_path_factory) -> Iterator[RunningPrometheus]:
    with running_prometheus(
        [f"127.0.0.1:{daemon.port}"], tmp_path_factory.mktemp("prometheus")
    ) as running:
        wait_until(lambda: running.query('up{job="trader"} == 1')["result"], "the first scrape", 60)
        # Every rule evaluated at least twice since the first scrape.
        time.sleep(2.5)
        yield running


def test_prometheus_evaluates_every_rule_without_an_error(prometheus: RunningPrometheus):
    rules = prometheus.rules()
    assert {rule["name"] for rule in rules} >= {q.where.split(": ")[1] for q in rule_queries()}
    for rule in rules:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
    firing = {
        rule["name"]
        for rule in rules
        for alert in rule.get("alerts", [])
        if alert["state"] == "firing"
    }
    assert "TraderDown" not in firing
    assert "TraderScrapeTargetMissing" not in firing


@pytest.mark.parametrize("query", dashboard_queries(), ids=[q.where for q in dashboard_queries()])
def test_prometheus_answers_every_dashboard_query(prometheus: RunningPrometheus, query: Query):
    # A short quantile window: this Prometheus has seconds of data, not hours.
    prometheus.query(plain(query.expr.replace("$window", "1m")))


@pytest.mark.parametrize(
    "title",
    [
        "Daemon",
        "Trading state",
        "Equity",
        "Drawdown",
        "Device",
        "Build",
        "Quote source",
        "Exchange",
        "Ready",
        "Since last OK tick",
        "Daily loss of limit",
        "Forced eager",
        "Clock",
        "Tick overdue",
        "Timeframe",
        "Clock speed",
        "Symbols in session",
        "Calendar ends in",
        "Calendar fallback",
        "Not OK in a row",
        "Skips in a row",
        "Venue",
    ],
)
def test_the_status_panels_show_data(prometheus: RunningPrometheus, title: str):
    # The first panel of that title: the status row at the top.
    query = next(q for q in dashboard_queries() if q.where.split("panel ")[-1] == f"{title!r} A")
    assert prometheus.query(plain(query.expr))["result"], query.expr


def panel_values(prometheus: RunningPrometheus, title: str) -> list[float]:
    """The instant values of the first panel of that title's query A (the status row's)."""
    query = next(q for q in dashboard_queries() if q.where.split("panel ")[-1] == f"{title!r} A")
    result = prometheus.query(plain(query.expr))["result"]
    return [float(series["value"][1]) for series in result]


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Clock", 1.0),  # SIMULATED: a replay still running
        ("Clock speed", float(SPEED)),
        ("Timeframe", 3600.0),  # the recording's 1h bars
        ("Symbols in session", 1.0),  # SOL/USDT trades around the clock
        ("Calendar fallback", 0.0),  # a continuous calendar never runs out
    ],
)
def test_the_session_stats_say_what_the_replay_is(
    prometheus: RunningPrometheus, title: str, expected: float
):
    assert panel_values(prometheus, title) == [expected]


def test_the_schedule_stats_are_judged_on_the_replay_clock(prometheus: RunningPrometheus):
    # The replay's clock runs in 2020, ten bars a second: measured with Prometheus's time()
    # the last tick would be six years old. On the daemon's clock it is a few bars old at most
    # (a loaded machine may hold one 0.1 s tick back by a bar or two) and the calendar's known
    # span lies ahead.
    [overdue] = panel_values(prometheus, "Tick overdue")
    assert 0 <= overdue < 10
    [since] = panel_values(prometheus, "Since last tick")
    assert 0 <= since < 10 * 3600
    [ends_in] = panel_values(prometheus, "Calendar ends in")
    assert ends_in > 0


@pytest.mark.parametrize(
    "title",
    [
        "Skill against the naive random walk",
        "CRPS of the forecast return",
        "MASE of the median",
        "Interval coverage",
        "Unusable forecasts",
        "Predicted spread over realised volatility",
        "Forecasts scored",
    ],
)
def test_the_forecast_skill_panels_show_numbers(prometheus: RunningPrometheus, title: str):
    # The replay scores its forecasts as their one-bar horizon closes: within a few ticks each
    # panel's query has a number (not only the NaN a metric starts at).
    query = next(q for q in dashboard_queries() if q.where.split("panel ")[-1] == f"{title!r} A")

    def numbers() -> list[float]:
        result = prometheus.query(plain(query.expr.replace("$window", "1m")))["result"]
        values = [float(series["value"][1]) for series in result]
        return [v for v in values if not math.isnan(v)]  # NaN is no number to show

    assert wait_until(numbers, f"numbers in panel {title!r}", 60), query.expr
