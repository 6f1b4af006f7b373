"""The daemon's Prometheus metrics, on a registry passed in (never the global default one).

Base units, `_total` counters, and labels drawn only from bounded sets (symbols from the
settings, stages, outcomes, statuses, skip reasons, error kinds). Every metric appears from
the first scrape: gauges start at 0 and labelled series are created for every known label
value, so a dashboard or an alert never meets a missing series for something that simply has
not happened yet.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)

from trader import __version__
from trader.domain import DomainError, OrderStatus, Portfolio, Quote, QuoteSource, Side
from trader.engine.report import STAGES, TickReport
from trader.market.hygiene import SkipCounter, SkipReason
from trader.risk.state import TradingState, TradingStatus

TICK_OUTCOMES = ("ok", "degraded", "failed", "missed")
EXCHANGE_ERROR_KINDS = (
    "rate_limited", "ddos_protection", "timeout", "unavailable", "network", "bad_response",
    "operation_failed", "exchange_error",
)  # fmt: skip
GPU_MEMORY_KINDS = ("allocated", "reserved", "peak_allocated")
COMMANDS = ("pause", "resume", "flatten", "reload", "invalid")
COMMAND_RESULTS = (
    "accepted", "bad_signature", "replayed", "stale", "malformed", "unknown_command",
    "rate_limited", "failed",
)  # fmt: skip
JOBS = ("quotes", "reconcile", "equity", "heartbeat")
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_LATENESS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0)
_DEVICE_KEYS = ("device", "precision", "reason", "fallback", "name", "capability", "torch",
                "cuda", "bf16")  # fmt: skip


def _number(value: Decimal) -> float:
    return float(value)


class Metrics:
    def __init__(
        self, registry: CollectorRegistry, symbols: Sequence[str], *, broker_mode: str = "paper"
    ) -> None:
        self.registry = registry
        self.symbols = list(symbols)
        self._missing_seen: dict[str, int] = {}
        self.broker_mode = broker_mode
        r = registry
        ProcessCollector(registry=r)  # process_resident_memory_bytes and friends
        PlatformCollector(registry=r)
        self.tick_duration = Histogram(
            "trader_tick_duration_seconds", "Time spent in each stage of a tick ('total': all)",
            ["stage"], registry=r, buckets=_SECONDS,
        )  # fmt: skip
        self.inference_latency = Histogram(
            "trader_inference_latency_seconds", "One batched model call, all symbols",
            ["model", "device", "mode"], registry=r, buckets=_SECONDS,
        )  # fmt: skip
        self.recompiles = Counter(
            "trader_torch_recompiles_total", "torch.compile recompiles after warm-up", ["model"],
            registry=r,
        )  # fmt: skip
        self.graph_breaks = Counter(
            "trader_torch_graph_breaks_total", "torch.compile graph breaks after warm-up",
            ["model"], registry=r,
        )  # fmt: skip
        self.cudagraph_skips = Counter(
            "trader_torch_cudagraph_skips_total", "CUDA graphs torch skipped after warm-up",
            ["model"], registry=r,
        )  # fmt: skip
        self.gpu_memory = Gauge(
            "trader_gpu_memory_bytes", "GPU memory of the model device (0 on the CPU)",
            ["kind"], registry=r,
        )  # fmt: skip
        self.ticks = Counter(
            "trader_ticks_total", "Ticks by outcome (missed: given up, too late to run)",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.ticks_late = Counter(
            "trader_ticks_late_total", "Ticks that started more than a second after their time",
            registry=r,
        )  # fmt: skip
        self.tick_lateness = Histogram(
            "trader_tick_lateness_seconds", "How long after its scheduled time a tick started "
            "(or was given up)", registry=r, buckets=_LATENESS,
        )  # fmt: skip
        self.loop_lag = Gauge(
            "trader_event_loop_lag_seconds", "Worst event-loop delay over the last few seconds",
            registry=r,
        )  # fmt: skip
        self.quote_age = Gauge(
            "trader_quote_age_seconds", "Age of the latest quote", ["symbol"], registry=r
        )
        self.quote_spread = Gauge(
            "trader_quote_spread_bps", "Spread of the latest quote (NaN: unknown, synthetic)",
            ["symbol"], registry=r,
        )  # fmt: skip
        self.quote_source = Gauge(
            "trader_quote_source", "1 for where the latest quote came from", ["symbol", "source"],
            registry=r,
        )  # fmt: skip
        self.orders = Counter(
            "trader_orders_total", "Order state changes, by the status reached",
            ["symbol", "side", "status"], registry=r,
        )  # fmt: skip
        self.fills = Counter("trader_fills_total", "Fills", ["symbol", "side"], registry=r)
        self.fees = Counter(
            "trader_fees_paid_total", "Fees paid, in the cash currency (from the ledger)",
            registry=r,
        )  # fmt: skip
        self.position = Gauge("trader_position", "Signed amount held", ["symbol"], registry=r)
        self.pnl_realized = Gauge(
            "trader_pnl_realized", "Realised P&L since the ledger began", ["symbol"], registry=r
        )
        self.pnl_unrealized = Gauge(
            "trader_pnl_unrealized", "Unrealised P&L at the latest marks", ["symbol"], registry=r
        )
        self.equity = Gauge("trader_equity", "Cash plus positions at the latest marks", registry=r)
        self.drawdown = Gauge(
            "trader_drawdown_ratio", "Drawdown from today's equity peak", registry=r
        )
        self.trading_state = Gauge(
            "trader_trading_state", "1 for the current trading state", ["state"], registry=r
        )
        self.data_skips = Counter(
            "trader_data_skips_total", "Data a symbol skipped a tick for, by reason", ["reason"],
            registry=r,
        )  # fmt: skip
        self.bars_missing = Counter(
            "trader_bars_missing_total",
            "Bars a symbol's calendar expected that the venue never had (asked twice)",
            ["symbol"], registry=r,
        )  # fmt: skip
        self.contiguous_bars = Gauge(
            "trader_window_contiguous_bars",
            "Newest bars of a symbol's window in a row, nothing missing between them",
            ["symbol"], registry=r,
        )  # fmt: skip
        self.exchange_errors = Counter(
            "trader_exchange_errors_total", "Failed exchange calls, by kind", ["kind"], registry=r
        )
        self.exchange_reachable = Gauge(
            "trader_exchange_reachable", "1 when the last exchange call succeeded", registry=r
        )
        self.mqtt_connected = Gauge(
            "trader_mqtt_connected", "1 while connected to the MQTT broker", registry=r
        )
        self.mqtt_dropped = Counter(
            "trader_mqtt_dropped_total", "Events dropped (queue full or broker away)", registry=r
        )
        self.commands = Counter(
            "trader_mqtt_commands_total", "Commands received on the cmd topic, by result",
            ["command", "result"], registry=r,
        )  # fmt: skip
        self.jobs_missed = Counter(
            "trader_jobs_missed_total", "Periodic jobs skipped (still running or too late)",
            ["job"], registry=r,
        )  # fmt: skip
        self.last_tick = Gauge(
            "trader_last_tick_timestamp_seconds", "Scheduled time of the last tick that ran",
            registry=r,
        )  # fmt: skip
        self.ready = Gauge("trader_ready", "1 when /readyz says ready to trade", registry=r)
        self.device_info = Info(
            "trader_device", "Where the models run and why (see forecast.device)", registry=r
        )
        self.build_info = Info(
            "trader_build", "Version of trader, its runtime, and paper or live", registry=r
        )
        self._initialise()

    def _initialise(self) -> None:
        for stage in (*STAGES, "rollback", "total"):
            self.tick_duration.labels(stage)
        for outcome in TICK_OUTCOMES:
            self.ticks.labels(outcome)
        for kind in GPU_MEMORY_KINDS:
            self.gpu_memory.labels(kind).set(0)
        for symbol in self.symbols:
            self._initialise_symbol(symbol)
        for state in TradingState:
            self.trading_state.labels(state.value)
        for reason in SkipReason:
            self.data_skips.labels(reason.value)
        for kind in EXCHANGE_ERROR_KINDS:
            self.exchange_errors.labels(kind)
        for command in COMMANDS:
            for result in COMMAND_RESULTS:
                self.commands.labels(command, result)
        for job in JOBS:
            self.jobs_missed.labels(job)
        self.device_info.info(dict.fromkeys(_DEVICE_KEYS, ""))
        self.build_info.info(build_labels() | {"broker_mode": self.broker_mode})

    def _initialise_symbol(self, symbol: str) -> None:
        self.quote_age.labels(symbol)
        self.quote_spread.labels(symbol).set(float("nan"))
        for source in QuoteSource:
            self.quote_source.labels(symbol, source.value)
        for side in Side:
            self.fills.labels(symbol, side.value)
            for status in OrderStatus:
                self.orders.labels(symbol, side.value, status.value)
        self.position.labels(symbol)
        self.pnl_realized.labels(symbol)
        self.pnl_unrealized.labels(symbol)
        self.bars_missing.labels(symbol)
        self.contiguous_bars.labels(symbol)

    # --- start-up ---------------------------------------------------------------------------

    def describe_device(self, description: Mapping[str, str | None]) -> None:
        """`DeviceChoice.describe()` as labels; a value that is None (no fallback) is ""."""
        labels = dict.fromkeys(_DEVICE_KEYS, "")
        labels.update({k: "" if v is None else str(v) for k, v in description.items()})
        self.device_info.info(labels)

    def prepare_models(self, models: Iterable[tuple[str, str, str]]) -> None:
        """(model, device, mode) of each loaded forecaster: their series exist from now."""
        for model, device, mode in models:
            self.inference_latency.labels(model, device, mode)
            self.recompiles.labels(model)
            self.graph_breaks.labels(model)
            self.cudagraph_skips.labels(model)

    def start_from_ledger(self, fees_paid: Decimal, status: TradingStatus) -> None:
        """Counters that the ledger keeps across restarts start at its figure: a restart then
        never looks like a reset to Prometheus, and increase() stays right."""
        if fees_paid > 0:
            self.fees.inc(_number(fees_paid))
        self.set_state(status)

    # --- ticks ------------------------------------------------------------------------------

    def observe_tick(self, report: TickReport) -> None:
        for stage, seconds in report.timings.items():
            self.tick_duration.labels(stage).observe(seconds)
        self.tick_duration.labels("total").observe(sum(report.timings.values()))
        self.ticks.labels(report.outcome).inc()
        self.last_tick.set(report.at.timestamp())
        for order in report.orders:
            self.orders.labels(order.symbol, order.side.value, order.status.value).inc()
        for fill in report.fills:
            self.fills.labels(fill.symbol, fill.side.value).inc()
            if fill.quote_fee > 0:  # a fee in the base asset counts at the fill's price
                self.fees.inc(_number(fill.quote_fee))
        for symbol, quote in report.quotes.items():
            self.observe_quote(symbol, quote, report.at)
        if report.portfolio is not None:
            self.observe_book(report.portfolio, report.marks, report.equity, report.drawdown)
        if report.status is not None:
            self.set_state(report.status)

    def observe_windows(self, missing: Mapping[str, int], contiguous: Mapping[str, int]) -> None:
        """The data step's running count of missing bars, and its windows' contiguous tails."""
        for symbol, total in missing.items():
            counted = self._missing_seen.get(symbol, 0)
            if total > counted:
                self.bars_missing.labels(symbol).inc(total - counted)
                self._missing_seen[symbol] = total
        for symbol, bars in contiguous.items():
            self.contiguous_bars.labels(symbol).set(bars)

    def observe_book(
        self,
        portfolio: Portfolio,
        marks: Mapping[str, Decimal],
        equity: Decimal,
        drawdown: float | None,
    ) -> None:
        self.equity.set(_number(equity))
        if drawdown is not None:
            self.drawdown.set(drawdown)
        for symbol in set(self.symbols) | set(portfolio.positions):
            self.position.labels(symbol).set(_number(portfolio.amount(symbol)))
            self.pnl_realized.labels(symbol).set(
                _number(portfolio.realized_pnl.get(symbol, Decimal(0)))
            )
        try:
            unrealized = portfolio.unrealized_pnl(marks)
        except DomainError:
            return  # a position without a mark: leave the last value rather than guess
        for symbol in self.symbols:
            self.pnl_unrealized.labels(symbol).set(_number(unrealized.get(symbol, Decimal(0))))

    def observe_quote(self, symbol: str, quote: Quote, now: datetime) -> None:
        self.quote_age.labels(symbol).set(max(0.0, quote.age(now).total_seconds()))
        spread = quote.spread_bps
        self.quote_spread.labels(symbol).set(float("nan") if spread is None else spread)
        for source in QuoteSource:
            self.quote_source.labels(symbol, source.value).set(source is quote.source)

    def set_state(self, status: TradingStatus) -> None:
        for state in TradingState:
            self.trading_state.labels(state.value).set(state is status.state)

    def observe_lateness(self, seconds: float, *, missed: bool = False) -> None:
        self.tick_lateness.observe(max(0.0, seconds))
        if missed:
            self.ticks.labels("missed").inc()
        elif seconds > 1.0:
            self.ticks_late.inc()

    # --- from other threads and tasks -------------------------------------------------------

    def observe_inference(self, model: str, device: str, mode: str, seconds: float) -> None:
        self.inference_latency.labels(model, device, mode).observe(seconds)

    def add_compile_counts(
        self, model: str, recompiles: int, graph_breaks: int, cudagraph_skips: int
    ) -> None:
        for counter, n in (
            (self.recompiles, recompiles),
            (self.graph_breaks, graph_breaks),
            (self.cudagraph_skips, cudagraph_skips),
        ):
            if n > 0:
                counter.labels(model).inc(n)

    def set_gpu_memory(self, allocated: int, reserved: int, peak: int) -> None:
        for kind, value in zip(GPU_MEMORY_KINDS, (allocated, reserved, peak), strict=True):
            self.gpu_memory.labels(kind).set(value)

    def exchange_error(self, kind: str) -> None:
        known = kind if kind in EXCHANGE_ERROR_KINDS else "exchange_error"
        self.exchange_errors.labels(known).inc()

    def data_skip(self, reason: SkipReason, n: int) -> None:
        if n > 0:
            self.data_skips.labels(reason.value).inc(n)

    def command(self, command: str, result: str) -> None:
        self.commands.labels(command if command in COMMANDS else "invalid", result).inc()


def build_labels() -> dict[str, str]:
    labels = {"version": __version__, "python": platform.python_version()}
    try:
        import torch  # noqa: PLC0415 - the daemon has it loaded already; tools may not

        labels |= {"torch": torch.__version__, "cuda": torch.version.cuda or ""}
    except ImportError:  # pragma: no cover - torch is a dependency
        labels |= {"torch": "", "cuda": ""}
    return labels


@dataclass
class CountedSkips(SkipCounter):
    """The market step's skip counter, which also counts each skip in the metrics."""

    metrics: Metrics | None = None

    def add(self, reason: SkipReason, n: int = 1) -> None:
        super().add(reason, n)
        if self.metrics is not None:
            self.metrics.data_skip(reason, n)
