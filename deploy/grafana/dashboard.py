"""The operator's Grafana dashboard, built from code so that every panel follows one pattern.

    python deploy/grafana/dashboard.py           # rewrite dashboards/trader.json
    python deploy/grafana/dashboard.py --check   # exit 1 when the JSON is not what this builds

Every query reads only metrics the daemon exports (tests check each name against a running
daemon's /metrics) plus Prometheus's own `up`. Panels reference the datasource that
provisioning/datasources/prometheus.yaml creates, by its fixed uid.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parent / "dashboards" / "trader.json"
DATASOURCE = {"type": "prometheus", "uid": "trader-prometheus"}
GRID_WIDTH = 24
SCHEMA_VERSION = 39  # Grafana 11.0; newer Grafana migrates it on load

Json = dict[str, Any]

# Every selector is scoped to the trader job and the chosen instance.
SCOPE = 'job="trader", instance=~"$instance"'
SYMBOLS = 'symbol=~"$symbol"'


def sel(metric: str, *matchers: str) -> str:
    return f"{metric}{{{', '.join((SCOPE, *matchers))}}}"


def match(label: str, value: str, op: str = "=") -> str:
    return f'{label}{op}"{value}"'


def quantile(q: float, histogram: str, by: str = "") -> str:
    """The q-quantile of a histogram over the dashboard's window (ticks are sparse: one per bar,
    so a short rate window would mostly be empty)."""
    labels = f"{by}, le" if by else "le"
    return (
        f"histogram_quantile({q}, sum by ({labels}) (rate({sel(histogram + '_bucket')}[$window])))"
    )


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass
class Panel:
    kind: str  # stat | timeseries | table | state-timeline
    title: str
    description: str
    queries: list[Query]
    width: int
    height: int
    unit: str = "short"
    thresholds: list[tuple[float | None, str]] = field(default_factory=lambda: [(None, "green")])
    mappings: list[Json] = field(default_factory=list)
    overrides: list[Json] = field(default_factory=list)
    options: Json = field(default_factory=dict)
    custom: Json = field(default_factory=dict)
    transformations: list[Json] = field(default_factory=list)
    decimals: int | None = None
    min: float | None = None


@dataclass(frozen=True)
class Row:
    title: str


def value_map(*entries: tuple[str, str, str]) -> list[Json]:
    """Value mappings: (value, text, colour)."""
    return [
        {
            "type": "value",
            "options": {
                value: {"text": text, "color": color, "index": i}
                for i, (value, text, color) in enumerate(entries)
            },
        }
    ]


def stat(
    title: str,
    description: str,
    expr: str,
    *,
    unit: str = "short",
    legend: str = "",
    thresholds: list[tuple[float | None, str]] | None = None,
    mappings: list[Json] | None = None,
    decimals: int | None = None,
    width: int = 4,
) -> Panel:
    return Panel(
        "stat",
        title,
        description,
        [Query(expr, legend, instant=True)],
        width,
        4,
        unit=unit,
        thresholds=thresholds or [(None, "green")],
        mappings=mappings or [],
        decimals=decimals,
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "justifyMode": "center",
            "orientation": "auto",
            "textMode": "value",
            "wideLayout": True,
        },
    )


def timeseries(
    title: str,
    description: str,
    *queries: Query,
    unit: str = "short",
    bars: bool = False,
    thresholds: list[tuple[float | None, str]] | None = None,
    overrides: list[Json] | None = None,
    width: int = 12,
    min: float | None = None,
) -> Panel:
    custom: Json = {
        "drawStyle": "bars" if bars else "line",
        "lineWidth": 1,
        "fillOpacity": 60 if bars else 10,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if bars else "none", "group": "A"},
    }
    if thresholds:
        custom["thresholdsStyle"] = {"mode": "line+area"}
    return Panel(
        "timeseries",
        title,
        description,
        list(queries),
        width,
        8,
        unit=unit,
        thresholds=thresholds or [(None, "green")],
        overrides=overrides or [],
        custom=custom,
        min=min,
        options={
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    )


def table(
    title: str,
    description: str,
    expr: str,
    *,
    hide: tuple[str, ...] = (),
    mappings: list[Json] | None = None,
    width: int = 12,
    height: int = 5,
) -> Panel:
    hidden = {
        "Time": True,
        "Value": True,
        "__name__": True,
        "job": True,
        **dict.fromkeys(hide, True),
    }
    return Panel(
        "table",
        title,
        description,
        [Query(expr, instant=True)],
        width,
        height,
        mappings=mappings or [],
        custom={"align": "auto", "cellOptions": {"type": "color-text"}},
        transformations=[{"id": "organize", "options": {"excludeByName": hidden}}],
        options={"showHeader": True, "cellHeight": "sm"},
    )


def on_right_axis(ref_id: str, unit: str) -> Json:
    return {
        "matcher": {"id": "byFrameRefID", "options": ref_id},
        "properties": [
            {"id": "unit", "value": unit},
            {"id": "custom.axisPlacement", "value": "right"},
        ],
    }


# Trading state as one number: 0 ACTIVE, 1 REDUCING, 2 HALTED; no data when the daemon is gone.
TRADING_STATE = " or ".join(
    f"({sel('trader_trading_state', match('state', state))} > 0) * {code}"
    for code, state in enumerate(("active", "reducing", "halted"))
)
TRADING_STATE_MAP = value_map(
    ("0", "ACTIVE", "green"), ("1", "REDUCING", "orange"), ("2", "HALTED", "red")
)
RED = "red"
AMBER = "orange"
GREEN = "green"


def layout() -> list[Panel | Row]:
    return [
        Row("Status"),
        stat(
            "Daemon",
            "Whether Prometheus can scrape the daemon's /metrics.",
            f"max({sel('up')})",
            mappings=value_map(("0", "DOWN", RED), ("1", "UP", GREEN)),
            width=3,
        ),
        stat(
            "Trading state",
            "ACTIVE; REDUCING (drawdown limit: reduce-only until the next UTC day); HALTED "
            "(daily loss, reconciliation or ledger failure: until resumed).",
            f"max({TRADING_STATE})",
            mappings=TRADING_STATE_MAP,
            width=3,
        ),
        stat(
            "Since last tick",
            "Time since the last completed tick; more than two bar periods raises an alert.",
            f"time() - max({sel('trader_last_tick_timestamp_seconds')} > 0)",
            unit="s",
            thresholds=[(None, GREEN), (3900, AMBER), (7200, RED)],
            width=3,
        ),
        stat(
            "Equity",
            "Cash plus positions at the latest prices, in the account currency.",
            f"sum({sel('trader_equity')})",
            decimals=2,
            width=3,
        ),
        stat(
            "Drawdown",
            "Drawdown from today's peak equity; risk.max_drawdown (default 10%) switches to "
            "REDUCING.",
            f"max({sel('trader_drawdown_ratio')})",
            unit="percentunit",
            thresholds=[(None, GREEN), (0.08, AMBER), (0.1, RED)],
            decimals=2,
            width=3,
        ),
        stat(
            "Device fallback",
            "Whether forecast.device = auto fell back from the GPU to the CPU.",
            f"count({sel('trader_device_info', match('fallback', '', '!='))}) or vector(0)",
            mappings=value_map(("0", "none", GREEN), ("1", "CPU FALLBACK", RED)),
            thresholds=[(None, GREEN), (1, RED)],
            width=3,
        ),
        stat(
            "Synthetic quotes",
            "Symbols trading on a synthetic quote (ADD_LATEST=0: bid = ask = last close).",
            f"count({sel('trader_quote_source', match('source', 'synthetic'))} > 0) or vector(0)",
            thresholds=[(None, GREEN), (1, RED)],
            width=3,
        ),
        stat(
            "MQTT",
            "Connection to the MQTT broker (stays DOWN when mqtt.enabled = false).",
            f"max({sel('trader_mqtt_connected')})",
            mappings=value_map(("0", "DOWN", AMBER), ("1", "CONNECTED", GREEN)),
            width=3,
        ),
        table(
            "Device",
            "The device the model runs on, and why (trader_device_info).",
            sel("trader_device_info"),
            width=14,
            height=4,
        ),
        table(
            "Build",
            "Versions of the running daemon (trader_build_info).",
            sel("trader_build_info"),
            width=10,
            height=4,
        ),
        Row("Ticks"),
        timeseries(
            "Ticks by outcome",
            "Ticks per hour by outcome; missed ticks are ones the scheduler could not start in "
            "time.",
            Query(
                f"sum by (outcome) (increase({sel('trader_ticks_total')}[1h]))",
                "{{outcome}}",
            ),
            bars=True,
        ),
        timeseries(
            "Missed ticks",
            "Missed ticks per hour.",
            Query(
                f"sum(increase({sel('trader_ticks_total', match('outcome', 'missed'))}[1h]))",
                "missed",
            ),
            bars=True,
            thresholds=[(None, GREEN), (1, RED)],
            width=6,
        ),
        timeseries(
            "Tick lateness",
            "How long after its scheduled time (bar close + settle delay) a tick started.",
            Query(quantile(0.5, "trader_tick_lateness_seconds"), "p50"),
            Query(quantile(0.99, "trader_tick_lateness_seconds"), "p99"),
            unit="s",
            width=6,
        ),
        timeseries(
            "Tick duration by stage (p99)",
            "Time spent per stage of the tick pipeline (data, fills, forecast, strategy, "
            "orders, ledger, telemetry).",
            Query(quantile(0.99, "trader_tick_duration_seconds", "stage"), "{{stage}}"),
            unit="s",
        ),
        timeseries(
            "Event loop lag",
            "How late the asyncio loop runs its callbacks; model inference must not block it.",
            Query(f"max({sel('trader_event_loop_lag_seconds')})", "lag"),
            unit="s",
            thresholds=[(None, GREEN), (0.1, AMBER)],
        ),
        Row("Model"),
        timeseries(
            "Forecast latency by model and device",
            "p50 and p99 of one batched model call, by model, device and mode (eager/compile).",
            Query(
                quantile(0.5, "trader_inference_latency_seconds", "model, device, mode"),
                "p50 {{model}} {{device}} {{mode}}",
            ),
            Query(
                quantile(0.99, "trader_inference_latency_seconds", "model, device, mode"),
                "p99 {{model}} {{device}} {{mode}}",
            ),
            unit="s",
            thresholds=[(None, GREEN), (10, RED)],
        ),
        timeseries(
            "Recompiles, graph breaks, CUDA-graph skips",
            "torch.compile events after warm-up, per hour; any recompile raises an alert.",
            Query(
                f"sum by (model) (increase({sel('trader_torch_recompiles_total')}[1h]))",
                "recompiles {{model}}",
            ),
            Query(
                f"sum by (model) (increase({sel('trader_torch_graph_breaks_total')}[1h]))",
                "graph breaks {{model}}",
            ),
            Query(
                f"sum by (model) (increase({sel('trader_torch_cudagraph_skips_total')}[1h]))",
                "CUDA-graph skips {{model}}",
            ),
            bars=True,
        ),
        timeseries(
            "GPU memory",
            "GPU memory by kind, as torch reports it.",
            Query(f"max by (kind) ({sel('trader_gpu_memory_bytes')})", "{{kind}}"),
            unit="bytes",
            min=0,
            width=24,
        ),
        Row("Market data"),
        timeseries(
            "Quote age",
            "Age of the latest bid/ask per symbol; past market.max_quote_age_s (30s) the "
            "symbol skips its tick.",
            Query(
                f"max by (symbol) ({sel('trader_quote_age_seconds', SYMBOLS)})",
                "{{symbol}}",
            ),
            unit="s",
            thresholds=[(None, GREEN), (30, RED)],
            min=0,
        ),
        timeseries(
            "Spread",
            "Bid/ask spread per symbol in basis points (synthetic quotes have none).",
            Query(
                f"max by (symbol) ({sel('trader_quote_spread_bps', SYMBOLS)})",
                "{{symbol}}",
            ),
            min=0,
        ),
        table(
            "Quote source",
            "Where each symbol's quote comes from: real (the exchange's book), modelled "
            "(replay) or synthetic (ADD_LATEST=0, never a price to trade on).",
            f"max by (symbol, source) ({sel('trader_quote_source', SYMBOLS)}) > 0",
            mappings=value_map(
                ("real", "real", GREEN),
                ("modelled", "modelled", "blue"),
                ("synthetic", "synthetic", RED),
            ),
            width=8,
            height=8,
        ),
        timeseries(
            "Data skips by reason",
            "Symbols that skipped a tick, per hour, by reason (bad bar, gap, stale or crossed "
            "quote, unreachable exchange, ...).",
            Query(
                f"sum by (reason) (increase({sel('trader_data_skips_total')}[1h]))",
                "{{reason}}",
            ),
            bars=True,
            width=8,
        ),
        timeseries(
            "Exchange errors by kind",
            "Exchange errors per hour, by kind (retried ones included).",
            Query(
                f"sum by (kind) (increase({sel('trader_exchange_errors_total')}[1h]))",
                "{{kind}}",
            ),
            bars=True,
            width=8,
        ),
        Row("Trading"),
        timeseries(
            "Orders",
            "Orders per hour by symbol, side and status.",
            Query(
                f"sum by (symbol, side, status) "
                f"(increase({sel('trader_orders_total', SYMBOLS)}[1h]))",
                "{{symbol}} {{side}} {{status}}",
            ),
            bars=True,
        ),
        timeseries(
            "Fills",
            "Fills per hour by symbol and side.",
            Query(
                f"sum by (symbol, side) (increase({sel('trader_fills_total', SYMBOLS)}[1h]))",
                "{{symbol}} {{side}}",
            ),
            bars=True,
        ),
        timeseries(
            "Positions",
            "Position per symbol, in the base currency (negative: short).",
            Query(f"sum by (symbol) ({sel('trader_position', SYMBOLS)})", "{{symbol}}"),
            width=8,
        ),
        timeseries(
            "P&L",
            "Realised and unrealised profit and loss per symbol, in the account currency.",
            Query(
                f"sum by (symbol) ({sel('trader_pnl_realized', SYMBOLS)})",
                "realised {{symbol}}",
            ),
            Query(
                f"sum by (symbol) ({sel('trader_pnl_unrealized', SYMBOLS)})",
                "unrealised {{symbol}}",
            ),
            width=8,
        ),
        timeseries(
            "Fees paid",
            "Fees paid per hour, in the account currency.",
            Query(f"sum(increase({sel('trader_fees_paid_total')}[1h]))", "fees"),
            bars=True,
            width=8,
        ),
        timeseries(
            "Equity and drawdown",
            "Equity (left axis) and drawdown from today's peak (right axis).",
            Query(f"sum({sel('trader_equity')})", "equity"),
            Query(f"max({sel('trader_drawdown_ratio')})", "drawdown"),
            overrides=[on_right_axis("B", "percentunit")],
            width=16,
        ),
        Panel(
            "state-timeline",
            "Trading state",
            "ACTIVE, REDUCING or HALTED over time.",
            [Query(f"max({TRADING_STATE})", "state")],
            8,
            8,
            mappings=TRADING_STATE_MAP,
            options={
                "showValue": "auto",
                "mergeValues": True,
                "rowHeight": 0.9,
                "alignValue": "left",
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                "tooltip": {"mode": "single", "sort": "none"},
            },
            custom={"fillOpacity": 80, "lineWidth": 0},
        ),
        Row("MQTT"),
        timeseries(
            "MQTT connection",
            "1 while connected to the broker.",
            Query(f"max({sel('trader_mqtt_connected')})", "connected"),
            min=0,
        ),
        timeseries(
            "MQTT events dropped",
            "Events dropped per hour (the publish queue never slows a tick; it drops instead).",
            Query(f"sum(increase({sel('trader_mqtt_dropped_total')}[1h]))", "dropped"),
            bars=True,
            thresholds=[(None, GREEN), (1, AMBER)],
        ),
    ]


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> Json:
    targets = []
    for ref, query in zip("ABCDEFGH", panel.queries, strict=False):
        targets.append(
            {
                "refId": ref,
                "datasource": DATASOURCE,
                "expr": query.expr,
                "legendFormat": query.legend or "__auto",
                "range": not query.instant,
                "instant": query.instant,
                **({"format": "table"} if panel.kind == "table" else {}),
            }
        )
    defaults: Json = {
        "unit": panel.unit,
        "color": {"mode": "thresholds" if panel.kind in {"stat", "table"} else "palette-classic"},
        "thresholds": {
            "mode": "absolute",
            "steps": [{"color": color, "value": value} for value, color in panel.thresholds],
        },
        "mappings": panel.mappings,
        "custom": panel.custom,
    }
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.min is not None:
        defaults["min"] = panel.min
    result: Json = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": panel.overrides},
        "options": panel.options,
    }
    if panel.transformations:
        result["transformations"] = panel.transformations
    return result


def place(items: list[Panel | Row]) -> list[Json]:
    """Lay panels out left to right, wrapping at the grid's width; rows take a line each."""
    panels: list[Json] = []
    x = y = line_height = 0
    for panel_id, item in enumerate(items, start=1):
        if isinstance(item, Row):
            y += line_height
            x = line_height = 0
            panels.append(
                {
                    "id": panel_id,
                    "type": "row",
                    "title": item.title,
                    "collapsed": False,
                    "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                    "panels": [],
                }
            )
            y += 1
            continue
        if x + item.width > GRID_WIDTH:
            y += line_height
            x = line_height = 0
        panels.append(panel_json(item, panel_id, x, y))
        x += item.width
        line_height = max(line_height, item.height)
    return panels


def variable_query(name: str, label: str, query: str, *, multi: bool) -> Json:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": query,  # the classic string form, which every Grafana since 7 reads
        "definition": query,
        "refresh": 2,  # on time range change
        "includeAll": multi,
        "multi": multi,
        "allValue": ".*" if multi else None,
        "current": {},
        "sort": 1,
        "hide": 0,
    }


def dashboard() -> Json:
    windows = ["1h", "6h", "24h"]
    return {
        "uid": "trader-overview",
        "title": "trader",
        "description": "The trader daemon: ticks, model, market data, trading, MQTT.",
        "tags": ["trader"],
        "timezone": "utc",
        "editable": False,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": "now-24h", "to": "now"},
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {
            "list": [
                variable_query(
                    "instance",
                    "Instance",
                    'label_values(trader_build_info{job="trader"}, instance)',
                    multi=False,
                ),
                variable_query(
                    "symbol",
                    "Symbol",
                    'label_values(trader_quote_age_seconds{job="trader", instance=~"$instance"}, '
                    "symbol)",
                    multi=True,
                ),
                {
                    "name": "window",
                    "label": "Quantile window",
                    "type": "custom",
                    "query": ",".join(windows),
                    "current": {"text": "6h", "value": "6h"},
                    "options": [{"text": w, "value": w, "selected": w == "6h"} for w in windows],
                    "includeAll": False,
                    "multi": False,
                    "hide": 0,
                },
            ]
        },
        "panels": place(layout()),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail when the JSON is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{OUTPUT} is stale: run python deploy/grafana/dashboard.py\n")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
