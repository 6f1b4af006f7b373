"""The PromQL that the deployment files hold (alert rules, Grafana dashboards), parsed into the
metric selectors it reads, and the series a daemon's /metrics exposes, for comparing the two."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
RULE_FILES = sorted((DEPLOY / "prometheus" / "rules").glob("*.yml"))
DASHBOARD_FILES = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))

# Series Prometheus makes itself for every target, not the daemon.
PROMETHEUS_SERIES = frozenset({"up"})
# Labels Prometheus attaches to every scraped series (the target's).
TARGET_LABELS = frozenset({"job", "instance"})
# Grafana's dashboard variables, given values that make the queries plain PromQL.
VARIABLES = {"$window": "6h", "$instance": ".*", "$symbol": ".*", "$__rate_interval": "1m"}
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")

# The metric names agreed with the daemon (issue 9's list, and the monitoring issue's); the
# files may use no others.
AGREED_METRICS = frozenset(
    {
        "trader_tick_duration_seconds",
        "trader_inference_latency_seconds",
        "trader_torch_recompiles_total",
        "trader_torch_graph_breaks_total",
        "trader_torch_cudagraph_skips_total",
        "trader_gpu_memory_bytes",
        "trader_ticks_total",
        "trader_tick_lateness_seconds",
        "trader_event_loop_lag_seconds",
        "trader_quote_age_seconds",
        "trader_quote_spread_bps",
        "trader_quote_source",
        "trader_orders_total",
        "trader_fills_total",
        "trader_fill_cost_bps_total",
        "trader_fill_cost_fills_total",
        "trader_fill_cost_unpriced_total",
        "trader_fees_paid_total",
        "trader_position",
        "trader_pnl_realized",
        "trader_pnl_unrealized",
        "trader_equity",
        "trader_drawdown_ratio",
        "trader_trading_state",
        "trader_data_skips_total",
        "trader_exchange_errors_total",
        "trader_mqtt_connected",
        "trader_mqtt_dropped_total",
        "trader_last_tick_timestamp_seconds",
        "trader_device_info",
        "trader_build_info",
        # The monitoring issue's additions: what pages when it matters.
        "trader_last_ok_tick_timestamp_seconds",
        "trader_clock_simulated",
        "trader_exchange_reachable",
        "trader_ready",
        "trader_jobs_missed_total",
        "trader_daily_loss_ratio",
        "trader_risk_limit_ratio",
        "trader_model_forced_eager",
        # Forecast skill and inference stability (issue 18).
        "trader_forecast_crps",
        "trader_forecast_mase",
        "trader_forecast_coverage",
        "trader_forecast_skill_vs_naive",
        "trader_forecast_skill_vs_no_change",
        "trader_forecast_skill_window_forecasts",
        "trader_forecast_scores_total",
        "trader_forecasts_total",
        "trader_forecasts_unusable_total",
        "trader_forecast_spread_ratio",
        "trader_forecast_median_jumps_total",
        # Alpaca's trade-updates stream (issue 40).
        "trader_trade_stream_connected",
        "trader_trade_stream_drops_total",
        # Real-world data (issue 22) and Alpaca's sparse feeds (issue 40).
        "trader_bars_missing_total",
        "trader_window_contiguous_bars",
        "trader_feed_no_trade_bars_total",
        "trader_ticks_late_total",
        "trader_mqtt_commands_total",
        # Monitoring that fits every market and bar size (issue 41): the daemon judged in its
        # own time and its markets' sessions.
        "trader_clock_timestamp_seconds",
        "trader_clock_speed",
        "trader_replay_finished",
        "trader_timeframe_seconds",
        "trader_next_tick_due_timestamp_seconds",
        "trader_market_in_session",
        "trader_quote_max_age_seconds",
        "trader_ticks_not_ok_in_a_row",
        "trader_symbol_skips_in_a_row",
        "trader_calendar_last_session_timestamp_seconds",
        "trader_calendar_fallback",
        "trader_exchange_info",
        # A ledger whose disk refuses writes (issue 42).
        "trader_ledger_writable",
        # Where each model's weights came from (issue 45).
        "trader_model_info",
        # Perpetual futures: positions, liquidation and funding (issue 44).
        "trader_perp_position_side",
        "trader_perp_position_size",
        "trader_perp_leverage",
        "trader_perp_margin",
        "trader_perp_liquidation_price",
        "trader_perp_liquidation_distance_ratio",
        "trader_perp_unrealized_pnl",
        "trader_perp_funding_paid_total",
        "trader_perp_funding_received_total",
        "trader_perp_buffer_reductions_total",
        "trader_perp_liquidation_buffer_ratio",
        "trader_perp_max_leverage",
        "trader_perp_account_leverage_ratio",
        "trader_perp_mark_age_seconds",
        # prometheus_client's process collector (Linux).
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
    }
)
# What a running daemon exports that neither the dashboard nor the rules read, and why. The
# `*_created` series beside every counter and histogram (when each began) are left off too:
# Prometheus sees a counter's reset without them.
LEFT_OFF = {
    "process_virtual_memory_bytes": "CUDA and torch map address ranges they never touch: "
    "resident memory is the figure of memory in use",
    "process_start_time_seconds": "a restart shows as the Daemon stat DOWN and as counters' resets",
    "python_info": "the Python version is a label of trader_build_info (the Build table)",
    "trader_ledger_write_failures_total": "how many writes were refused; the alert reads "
    "trader_ledger_writable, a state that holds between ticks of any bar size",
}
# Metrics with a series only on some venues: the family is on every daemon's page, but a
# replay has no child of it, so its labels cannot be checked there.
VENUE_ONLY = {
    "trader_feed_no_trade_bars_total": "one series per symbol on a sparse feed (Alpaca's IEX)",
}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class Query:
    where: str  # file and rule or panel, for messages
    expr: str  # as written, Grafana variables included


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str  # =, !=, =~, !~
    value: str


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[Matcher, ...]


def rule_queries() -> list[Query]:
    queries = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("alert") or rule.get("record")
                queries.append(Query(f"{path.name}: {name}", str(rule["expr"])))
    return queries


def _panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries() -> list[Query]:
    """Every panel target's expression, and the selector inside each variable's
    label_values(...) query."""
    queries = []
    for path in DASHBOARD_FILES:
        dashboard = json.loads(path.read_text())
        for panel in _panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                where = f"{path.name}: panel {panel['title']!r} {target['refId']}"
                queries.append(Query(where, target["expr"]))
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = _LABEL_VALUES.match(variable["definition"])
            assert match, f"{path.name}: variable {variable['name']} is not label_values(...)"
            where = f"{path.name}: variable {variable['name']}"
            queries.append(Query(where, match["selector"]))
    return queries


def plain(expr: str) -> str:
    """The expression with Grafana's variables replaced, as Prometheus would receive it."""
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


# promql_parser's MatchOp is not hashable: look it up by its name.
_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def selectors(expr: str) -> list[Selector]:
    """The metric selectors of a PromQL expression (parsed, so functions, keywords and label
    names are never mistaken for metrics)."""
    found: list[Selector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr!r}"
            matchers = tuple(
                Matcher(m.name, _OPS[str(m.op).removeprefix("MatchOp.")], m.value)
                for m in node.matchers.matchers
                if m.name != "__name__"
            )
            found.append(Selector(node.name, matchers))

    promql_parser.walk(promql_parser.parse(plain(expr)), visit)
    return found


def agreed_name(metric: str) -> str:
    """The agreed metric a series name belongs to (a histogram's _bucket/_sum/_count)."""
    for suffix in HISTOGRAM_SUFFIXES:
        base = metric.removesuffix(suffix)
        if base != metric and base in AGREED_METRICS:
            return base
    return metric


def exported_metrics(text: str) -> set[str]:
    """The metrics of a /metrics page by the names a query reads them by (a counter with its
    `_total`, a histogram by its base name, an info metric with its `_info`), without the
    `_created` series prometheus_client adds beside each counter and histogram."""
    families = {family.name: family.type for family in text_string_to_metric_families(text)}
    names = set()
    for name, kind in families.items():
        base = name.removesuffix("_created")
        if base != name and families.get(base) in {"counter", "histogram", "summary"}:
            continue
        names.add(name + {"counter": "_total", "info": "_info"}.get(kind, ""))
    return names


def exposed_series(text: str) -> dict[str, list[dict[str, str]]]:
    """Series name -> label sets, from a /metrics page. A labelled family with no child yet
    still counts, under the names its type gives its samples."""
    series: dict[str, list[dict[str, str]]] = {}
    suffixes = {
        "counter": ("_total",),
        "histogram": HISTOGRAM_SUFFIXES,
        "summary": ("", "_sum", "_count"),
        "info": ("_info",),
    }
    for family in text_string_to_metric_families(text):
        for suffix in suffixes.get(family.type, ("",)):
            series.setdefault(family.name + suffix, [])
        for sample in family.samples:
            series.setdefault(sample.name, []).append(dict(sample.labels))
    return series
