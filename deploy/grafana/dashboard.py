"""The operator's Grafana dashboard, built with Grafana's typed builder (grafana-foundation-sdk).

    python deploy/grafana/dashboard.py           # rewrite dashboards/trader.json
    python deploy/grafana/dashboard.py --check   # exit 1 when the JSON is not what this builds

`panels()` declares the panels in order, with the helpers of panel_kit.py beside this file;
rows of their own live in the modules beside it (session_panels.py: the clock, sessions,
schedule and calendars; feed_panels.py: the bars; cost_panels.py: fills' costs against the
model; perp_panels.py: perpetual positions and funding; skill_panels.py; process_panels.py).
The SDK lays them out left to right and starts a new line when one is full: keep each line 24
wide.
Every query reads only metrics the daemon exports (tests check each name against a running
daemon's /metrics) plus Prometheus's own `up`, and every metric the daemon exports is on the
dashboard or the rules unless tests/deploy_queries.py's LEFT_OFF says why not (process_panels.py
says which). Only this generator needs grafana-foundation-sdk (the dev extra); the daemon never
imports it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # as a script it is; loaded by file (the tests) it is not
    sys.path.insert(0, str(HERE))

from cost_panels import cost_panels  # noqa: E402
from feed_panels import bar_panels  # noqa: E402
from panel_kit import (  # noqa: E402
    AMBER,
    DATASOURCE,
    GREEN,
    RED,
    SYMBOLS,
    match,
    on_right_axis,
    per_hour,
    quantile,
    query,
    sel,
    stat,
    state_timeline,
    table,
    timeseries,
    to_json,
    value_map,
)
from perp_panels import perp_panels  # noqa: E402
from process_panels import process_panels  # noqa: E402
from session_panels import CLOCK, clock_stat, session_panels, status_stats, venue_table  # noqa: E402
from skill_panels import skill_panels  # noqa: E402

OUTPUT = HERE / "dashboards" / "trader.json"
SCHEMA_VERSION = 39  # Grafana 11.0; newer Grafana migrates it on load

# Trading state as one number: 0 ACTIVE, 1 REDUCING, 2 HALTED; no data when the daemon is gone.
TRADING_STATE = " or ".join(
    f"({sel('trader_trading_state', match('state', state))} > 0) * {code}"
    for code, state in enumerate(("active", "reducing", "halted"))
)
TRADING_STATE_MAP = value_map(
    ("0", "ACTIVE", GREEN), ("1", "REDUCING", AMBER), ("2", "HALTED", RED)
)
LATENCY = "trader_inference_latency_seconds"
# What TraderInferenceSlowerThanUsual compares: the last hour's p50 with the last week's.
LATENCY_P50_1H = quantile(0.5, LATENCY, "model, device, mode", window="1h")
LATENCY_P50_7D = quantile(0.5, LATENCY, "model, device, mode", window="7d")


def panels() -> list[Builder[dm.Panel] | db.Row]:
    return [
        db.Row("Status"),
        stat(
            "Daemon",
            "Whether Prometheus can scrape the daemon's /metrics.",
            f"max({sel('up')})",
        ).mappings(value_map(("0", "DOWN", RED), ("1", "UP", GREEN))),
        stat(
            "Trading state",
            "ACTIVE; REDUCING (drawdown limit: reduce-only until resumed); HALTED "
            "(daily loss or reconciliation: until resumed; a ledger write refused: until a "
            "tick's writes succeed again).",
            f"max({TRADING_STATE})",
        ).mappings(TRADING_STATE_MAP),
        stat(
            "Ledger",
            "Whether the last write to the ledger succeeded. A refused write (disk full, "
            "read-only, I/O error) halts trading at once, the ledger untouched; trading resumes "
            "by itself at the first tick whose writes succeed.",
            f"min({sel('trader_ledger_writable')})",
        ).mappings(value_map(("0", "WRITES FAILING", RED), ("1", "WRITABLE", GREEN))),
        stat(
            "Since last tick",
            "Time on the daemon's clock since the scheduled time of the last tick that ran "
            "(a night or a weekend included: Tick overdue says whether one is late).",
            f"{CLOCK} - max({sel('trader_last_tick_timestamp_seconds')} > 0)",
        ).unit("s"),
        stat(
            "Equity",
            "Cash plus positions at the latest prices, in the account currency.",
            f"sum({sel('trader_equity')})",
        ).decimals(2),
        stat(
            "Drawdown",
            "Drawdown from the running equity peak; risk.max_drawdown (default 10%) switches to "
            "REDUCING.",
            f"max({sel('trader_drawdown_ratio')})",
            thresholds=[(0.08, AMBER), (0.1, RED)],
        )
        .unit("percentunit")
        .decimals(2),
        stat(
            "Device fallback",
            "Whether forecast.device = auto fell back from the GPU to the CPU.",
            f"count({sel('trader_device_info', match('fallback', '', '!='))}) or vector(0)",
            thresholds=[(1, RED)],
        ).mappings(value_map(("0", "none", GREEN), ("1", "CPU FALLBACK", RED))),
        stat(
            "Synthetic quotes",
            "Symbols trading on a synthetic quote (ADD_LATEST=0: bid = ask = last close).",
            f"count({sel('trader_quote_source', match('source', 'synthetic'))} > 0) or vector(0)",
            thresholds=[(1, RED)],
        ),
        stat(
            "MQTT",
            "Connection to the MQTT broker (stays DOWN when mqtt.enabled = false).",
            f"max({sel('trader_mqtt_connected')})",
        ).mappings(value_map(("0", "DOWN", AMBER), ("1", "CONNECTED", GREEN))),
        stat(
            "Exchange",
            "Whether the exchange answers: 0 from the first failed call (quotes or bars, after "
            "retries) until one succeeds again.",
            f"min({sel('trader_exchange_reachable')})",
        ).mappings(value_map(("0", "UNREACHABLE", RED), ("1", "REACHABLE", GREEN))),
        stat(
            "Ready",
            "What /readyz says: started, model loaded, reconciled, exchange reachable, data "
            "fresh and not HALTED.",
            f"min({sel('trader_ready')})",
        ).mappings(value_map(("0", "NOT READY", AMBER), ("1", "READY", GREEN))),
        stat(
            "Since last OK tick",
            "Time on the daemon's clock since the last tick that traded every symbol "
            "(scheduled time). Ticks that run but skip a symbol (exchange away, stale quotes, a "
            "gap) do not reset it: Not OK in a row counts them.",
            f"{CLOCK} - max({sel('trader_last_ok_tick_timestamp_seconds')} > 0)",
        ).unit("s"),
        stat(
            "Ticks not OK (1h)",
            "Ticks in the last hour that were degraded (a symbol skipped), failed (a stage "
            "failed) or missed (too late to run).",
            per_hour("trader_ticks_total", match("outcome", "degraded|failed|missed", "=~")),
            thresholds=[(1, AMBER)],
        ),
        stat(
            "Daily loss of limit",
            "Loss since the risk day began as a share of risk.max_daily_loss: at 100% trading "
            "is HALTED until resumed.",
            f"max({sel('trader_daily_loss_ratio')}) / "
            f"max({sel('trader_risk_limit_ratio', match('limit', 'daily_loss'))})",
            thresholds=[(0.5, AMBER), (0.8, RED)],
        ).unit("percentunit"),
        stat(
            "Forced eager",
            "Models the compile guard switched to eager (too many recompiles, or a compiled "
            "call that failed): slower forecasts until a restart.",
            f"sum({sel('trader_model_forced_eager')}) or vector(0)",
            thresholds=[(1, RED)],
        ),
        stat(
            "Missed tasks (1h)",
            "Periodic tasks (quotes, reconcile, equity, heartbeat) skipped in the last hour: "
            "still running when due, or too late.",
            per_hour("trader_jobs_missed_total"),
            thresholds=[(1, AMBER)],
        ),
        clock_stat(),
        *status_stats(),
        table(
            "Device",
            "The device the model runs on, and why (trader_device_info).",
            sel("trader_device_info"),
        )
        .span(8)
        .height(4),
        table(
            "Build",
            "Versions of the running daemon (trader_build_info).",
            sel("trader_build_info"),
        )
        .span(8)
        .height(4),
        venue_table().span(5).height(4),
        table(
            "Model weights",
            "Where each model's weights came from (trader_model_info): origin finetuned, "
            "random, published, unknown or none (the baseline has no weights); the base, the "
            "fine-tuning verdict (helped, did not help, not judged), the digest of the data "
            "and the steps. Random weights or a verdict of did not help: the forecasts are "
            "not to be traded on.",
            sel("trader_model_info"),
        )
        .span(24)
        .height(4),
        db.Row("Ticks"),
        timeseries(
            "Ticks by outcome",
            "Ticks per hour by outcome: ok (every symbol traded), degraded (a symbol skipped: "
            "see data skips), failed (a stage failed), missed (too late to start).",
            query(per_hour("trader_ticks_total", by="outcome"), "{{outcome}}"),
            bars=True,
        ),
        timeseries(
            "Missed and late ticks",
            "Ticks per hour given up as too late (missed), and those that started more than a "
            "second after their scheduled time (late).",
            query(per_hour("trader_ticks_total", match("outcome", "missed")), "missed"),
            query(per_hour("trader_ticks_late_total"), "late"),
            bars=True,
            thresholds=[(1, RED)],
        ).span(6),
        timeseries(
            "Tick lateness",
            "How long after its scheduled time (bar close + settle delay) a tick started.",
            query(quantile(0.5, "trader_tick_lateness_seconds"), "p50"),
            query(quantile(0.99, "trader_tick_lateness_seconds"), "p99"),
        )
        .unit("s")
        .span(6),
        timeseries(
            "Tick duration by stage (p99)",
            "Time spent per stage of the tick pipeline (data, fills, forecast, strategy, "
            "orders, ledger, telemetry).",
            query(quantile(0.99, "trader_tick_duration_seconds", "stage"), "{{stage}}"),
        )
        .unit("s")
        .span(8),
        timeseries(
            "Event loop lag",
            "How late the asyncio loop runs its callbacks; model inference must not block it.",
            query(f"max({sel('trader_event_loop_lag_seconds')})", "lag"),
            thresholds=[(0.1, AMBER)],
        )
        .unit("s")
        .span(8),
        timeseries(
            "Missed periodic tasks",
            "Periodic tasks skipped per hour, by task: still running when due, or too late.",
            query(per_hour("trader_jobs_missed_total", by="task"), "{{task}}"),
            bars=True,
            thresholds=[(1, AMBER)],
        ).span(8),
        *session_panels(),
        db.Row("Model"),
        timeseries(
            "Forecast latency by model and device",
            "p50 and p99 of one batched model call, by model, device and mode (eager/compile).",
            query(
                quantile(0.5, "trader_inference_latency_seconds", "model, device, mode"),
                "p50 {{model}} {{device}} {{mode}}",
            ),
            query(
                quantile(0.99, "trader_inference_latency_seconds", "model, device, mode"),
                "p99 {{model}} {{device}} {{mode}}",
            ),
            thresholds=[(10, RED)],
        ).unit("s"),
        timeseries(
            "Forecast latency: last hour against last week",
            "p50 of one batched model call over the last hour over its p50 over the last 7 "
            "days, by model, device and mode: the daemon against itself. Above 3 for 15 "
            "minutes raises TraderInferenceSlowerThanUsual (a slowdown the absolute 10 s "
            "budget would not see); an hour without forecasts has no ratio.",
            query(f"{LATENCY_P50_1H} / {LATENCY_P50_7D}", "{{model}} {{device}} {{mode}}"),
            thresholds=[(3, RED)],
        ).min(0),
        timeseries(
            "Recompiles, graph breaks, CUDA-graph skips",
            "torch.compile events after warm-up, per hour; any recompile raises an alert.",
            query(per_hour("trader_torch_recompiles_total", by="model"), "recompiles {{model}}"),
            query(
                per_hour("trader_torch_graph_breaks_total", by="model"), "graph breaks {{model}}"
            ),
            query(
                per_hour("trader_torch_cudagraph_skips_total", by="model"),
                "CUDA-graph skips {{model}}",
            ),
            bars=True,
        ),
        timeseries(
            "GPU memory",
            "GPU memory by kind, as torch reports it.",
            query(f"max by (kind) ({sel('trader_gpu_memory_bytes')})", "{{kind}}"),
        )
        .unit("bytes")
        .min(0),
        db.Row("Market data"),
        timeseries(
            "Quote age",
            "Age of each symbol's newest bid/ask at each scrape, on the daemon's clock: it grows "
            "while nothing new comes (the exchange away, a book that stopped, a market out of "
            "session). Real quotes come every schedule.quote_poll_interval_s (10s); past the "
            "limit drawn beside them (market.max_quote_age_s in force) the symbol skips its "
            "tick. Synthetic quotes (ADD_LATEST=0) date from the last bar's close.",
            query(f"max by (symbol) ({sel('trader_quote_age_seconds', SYMBOLS)})", "{{symbol}}"),
            query(f"max({sel('trader_quote_max_age_seconds')})", "limit (max_quote_age_s)"),
        )
        .unit("s")
        .min(0),
        timeseries(
            "Spread",
            "Bid/ask spread per symbol in basis points (synthetic quotes have none).",
            query(f"max by (symbol) ({sel('trader_quote_spread_bps', SYMBOLS)})", "{{symbol}}"),
        ).min(0),
        table(
            "Quote source",
            "Where each symbol's quote comes from: real (the exchange's book), modelled "
            "(replay) or synthetic (ADD_LATEST=0, never a price to trade on).",
            f"max by (symbol, source) ({sel('trader_quote_source', SYMBOLS)}) > 0",
        )
        .mappings(
            value_map(
                ("real", "real", GREEN),
                ("modelled", "modelled", "blue"),
                ("synthetic", "synthetic", RED),
            )
        )
        .span(8)
        .height(8),
        timeseries(
            "Data skips by reason",
            "Symbols that skipped a tick, per hour, by reason (bad bar, gap, stale or crossed "
            "quote, unreachable exchange, ...).",
            query(per_hour("trader_data_skips_total", by="reason"), "{{reason}}"),
            bars=True,
        ).span(8),
        timeseries(
            "Exchange errors by kind",
            "Exchange errors per hour, by kind (retried ones included; authentication: check "
            "the venue's keys, see Venue).",
            query(per_hour("trader_exchange_errors_total", by="kind"), "{{kind}}"),
            bars=True,
        ).span(8),
        *bar_panels(),
        db.Row("Trading"),
        timeseries(
            "Orders",
            "Orders per hour by symbol, side and status.",
            query(
                per_hour("trader_orders_total", SYMBOLS, by="symbol, side, status"),
                "{{symbol}} {{side}} {{status}}",
            ),
            bars=True,
        ),
        timeseries(
            "Fills",
            "Fills per hour by symbol and side.",
            query(
                per_hour("trader_fills_total", SYMBOLS, by="symbol, side"), "{{symbol}} {{side}}"
            ),
            bars=True,
        ),
        timeseries(
            "Positions",
            "Position per symbol, in the base currency (negative: short).",
            query(f"sum by (symbol) ({sel('trader_position', SYMBOLS)})", "{{symbol}}"),
        ).span(8),
        timeseries(
            "P&L",
            "Realised and unrealised profit and loss per symbol, in the account currency.",
            query(
                f"sum by (symbol) ({sel('trader_pnl_realized', SYMBOLS)})", "realised {{symbol}}"
            ),
            query(
                f"sum by (symbol) ({sel('trader_pnl_unrealized', SYMBOLS)})",
                "unrealised {{symbol}}",
            ),
        ).span(8),
        timeseries(
            "Fees paid",
            "Fees paid per hour, in the account currency.",
            query(per_hour("trader_fees_paid_total"), "fees"),
            bars=True,
        ).span(8),
        timeseries(
            "Equity and drawdown",
            "Equity (left axis) and drawdown from the running peak (right axis).",
            query(f"sum({sel('trader_equity')})", "equity"),
            query(f"max({sel('trader_drawdown_ratio')})", "drawdown"),
        )
        .override_by_query("B", on_right_axis("percentunit"))
        .span(16),
        state_timeline(
            "Trading state",
            "ACTIVE, REDUCING or HALTED over time.",
            query(f"max({TRADING_STATE})", "state"),
        ).mappings(TRADING_STATE_MAP),
        timeseries(
            "Risk against its limits",
            "Drawdown from the running peak against risk.max_drawdown (REDUCING past it), and the "
            "loss since the risk day began against risk.max_daily_loss (HALTED past it).",
            query(f"max({sel('trader_drawdown_ratio')})", "drawdown"),
            query(
                f"max({sel('trader_risk_limit_ratio', match('limit', 'max_drawdown'))})",
                "drawdown limit",
            ),
            query(f"max({sel('trader_daily_loss_ratio')})", "daily loss"),
            query(
                f"max({sel('trader_risk_limit_ratio', match('limit', 'daily_loss'))})",
                "daily loss limit",
            ),
        )
        .unit("percentunit")
        .min(0)
        .span(24),
        *cost_panels(),
        *perp_panels(),
        *skill_panels(),
        db.Row("MQTT"),
        timeseries(
            "MQTT connection",
            "1 while connected to the broker.",
            query(f"max({sel('trader_mqtt_connected')})", "connected"),
        )
        .min(0)
        .span(8),
        timeseries(
            "MQTT events dropped",
            "Events dropped per hour by queue (a full queue never slows a tick; it drops "
            "instead). Trading events (orders, fills, state) have a queue of their own that a "
            "flood of commands cannot fill.",
            query(per_hour("trader_mqtt_dropped_total", by="queue"), "{{queue}}"),
            bars=True,
            thresholds=[(1, AMBER)],
        ).span(8),
        timeseries(
            "MQTT commands",
            "Commands received on the cmd topic per hour, by command and result: anything but "
            "accepted was refused (bad signature, replayed, stale, malformed, rate limited) or "
            "failed.",
            query(
                per_hour("trader_mqtt_commands_total", by="command, result"),
                "{{command}} {{result}}",
            ),
            bars=True,
        ).span(8),
        db.Row("Trade stream (Alpaca)"),
        timeseries(
            "Trade-updates stream",
            "1 while connected to Alpaca's trade-updates stream (fills heard at once); 0 on "
            "other venues, or while polling alone books fills.",
            query(f"max({sel('trader_trade_stream_connected')})", "connected"),
        ).min(0),
        timeseries(
            "Trade stream drops",
            "Times per hour the stream dropped (it is tried again after a back-off).",
            query(per_hour("trader_trade_stream_drops_total"), "drops"),
            bars=True,
            thresholds=[(1, AMBER)],
        ),
        *process_panels(),
    ]


def label_values(name: str, label: str, expr: str, *, multi: bool) -> db.QueryVariable:
    """A variable whose values are a label's values, refreshed when the time range changes."""
    variable = (
        db.QueryVariable(name)
        .id(name)  # what Grafana keys a variable by; the SDK's default is one uid for all
        .label(label)
        .datasource(DATASOURCE)
        .query(expr)  # the classic string form, which every Grafana since 7 reads
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .include_all(multi)
        .multi(multi)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .hide(dm.VariableHide.DONT_HIDE)
    )
    return variable.all_value(".*") if multi else variable


def variables() -> list[Builder[dm.VariableModel]]:
    windows = ["1h", "6h", "24h"]
    return [
        label_values(
            "instance",
            "Instance",
            'label_values(trader_build_info{job="trader"}, instance)',
            multi=False,
        ),
        label_values(
            "symbol",
            "Symbol",
            'label_values(trader_quote_age_seconds{job="trader", instance=~"$instance"}, symbol)',
            multi=True,
        ),
        db.CustomVariable("window")
        .id("window")
        .label("Quantile window")
        .values(",".join(windows))
        .current(dm.VariableOption(text="6h", value="6h"))
        .options([dm.VariableOption(text=w, value=w, selected=w == "6h") for w in windows])
        .include_all(False)
        .multi(False)
        .hide(dm.VariableHide.DONT_HIDE),
    ]


def dashboard() -> dm.Dashboard:
    builder = (
        db.Dashboard("trader")
        .uid("trader-overview")
        .description("The trader daemon: ticks, model, market data, trading, forecast skill, MQTT.")
        .tags(["trader"])
        .timezone("utc")
        .readonly()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .version(1)
        .time("now-24h", "now")
        .links([])
        .variables(variables())
        .annotation(
            db.AnnotationQuery()
            .name("Annotations & Alerts")
            .datasource(dm.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
            .enable(True)
            .hide(True)
            .icon_color("rgba(0, 211, 255, 1)")
            .type("dashboard")
        )
    )
    for item in panels():
        if isinstance(item, db.Row):
            builder.with_row(item)
        else:
            builder.with_panel(item)
    model = builder.build()
    model.schema_version = SCHEMA_VERSION  # the builder has no setter (it writes 36)
    for panel_id, built in enumerate(model.panels or [], start=1):
        built.id_val = panel_id
    return model


def render() -> str:
    return to_json(dashboard())


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
