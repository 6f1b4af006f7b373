"""The daemon's Prometheus metrics, on a registry passed in (never the global default one).

Base units, `_total` counters, and labels drawn only from bounded sets (symbols from the
settings, stages, outcomes, statuses, skip reasons, error kinds: `labels.py`, which also says
what a tick's outcome is). Every metric appears from the first scrape: gauges start at 0 and
labelled series are created for every known label value, so a dashboard or an alert never
meets a missing series for something that simply has not happened yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trader.clock import Clock
from trader.config.trading_settings import RiskSettings
from trader.domain import DomainError, Fill, OrderStatus, Portfolio, Quote, QuoteSource, Side
from trader.engine.report import STAGES, TickReport
from trader.market.calendars.calendar import TradingCalendar
from trader.market.hygiene import SkipCounter, SkipReason
from trader.risk.state import TradingState, TradingStatus
from trader.telemetry.daemon_metrics import DaemonMetrics
from trader.telemetry.feed_metrics import FeedMetrics
from trader.telemetry.fill_cost_metrics import FillCostMetrics
from trader.telemetry.labels import (
    GPU_MEMORY_KINDS,
    INFERENCE_SECONDS,
    RISK_LIMITS,
    STAGE_SECONDS,
    TICK_OUTCOMES,
    tick_outcome,
)
from trader.telemetry.perp_metrics import PerpMetrics
from trader.telemetry.quote_age import QuoteAges
from trader.telemetry.schedule_metrics import ScheduleMetrics


def count_fills(metrics: Metrics, fills: Sequence[Fill]) -> None:
    """Fills booked by a tick, or between ticks (a venue's trade-updates stream)."""
    metrics.fill_costs.booked(fills)
    for fill in fills:
        metrics.fills.labels(fill.symbol, fill.side.value).inc()
        if fill.quote_fee > 0:  # a fee in the base asset counts at the fill's price
            metrics.fees.inc(_number(fill.quote_fee))


def _number(value: Decimal) -> float:
    return float(value)


class Metrics(DaemonMetrics):
    """Every metric of the daemon: its own (`DaemonMetrics`), and the ticks, the models, the
    market data and the book."""

    def __init__(
        self,
        registry: CollectorRegistry,
        symbols: Sequence[str],
        *,
        broker_mode: str = "paper",
        clock: Clock | None = None,
        simulated_clock: bool = False,
    ) -> None:
        super().__init__(registry, broker_mode=broker_mode, simulated_clock=simulated_clock)
        self.symbols = list(symbols)
        self._missing_seen: dict[str, int] = {}
        r = registry
        self.tick_duration = Histogram(
            "trader_tick_duration_seconds", "Time spent in each stage of a tick ('total': all)",
            ["stage"], registry=r, buckets=STAGE_SECONDS,
        )  # fmt: skip
        self.inference_latency = Histogram(
            "trader_inference_latency_seconds", "One batched model call, all symbols",
            ["model", "device", "mode"], registry=r, buckets=INFERENCE_SECONDS,
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
        self.quote_age = Gauge(
            "trader_quote_age_seconds", "Age of the newest quote now, on the daemon's clock "
            "(NaN before the first)", ["symbol"], registry=r,
        )  # fmt: skip
        self.quote_ages = QuoteAges(self.quote_age, clock)
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
            "trader_drawdown_ratio",
            "Drawdown from the running equity peak, re-based when "
            "trading last resumed (what risk.max_drawdown limits)",
            registry=r,
        )
        self.daily_loss = Gauge(
            "trader_daily_loss_ratio", "Loss since the risk day began (risk.day_zone), as a "
            "share of the equity before it (0 when up)", registry=r,
        )  # fmt: skip
        self.risk_limit = Gauge(
            "trader_risk_limit_ratio", "The configured risk limits: max_drawdown (compare "
            "trader_drawdown_ratio), daily_loss (compare trader_daily_loss_ratio)", ["limit"],
            registry=r,
        )  # fmt: skip
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
        self.feed = FeedMetrics(r)
        self.fill_costs = FillCostMetrics(r, self.symbols)
        self.perp = PerpMetrics(r, self.symbols)  # a spot account's symbols stay flat
        self.schedule = ScheduleMetrics(r, self.symbols)
        self.contiguous_bars = Gauge(
            "trader_window_contiguous_bars",
            "Newest bars of a symbol's window in a row, nothing missing between them",
            ["symbol"], registry=r,
        )  # fmt: skip
        self.last_tick = Gauge(
            "trader_last_tick_timestamp_seconds", "Scheduled time of the last tick that ran",
            registry=r,
        )  # fmt: skip
        self.last_ok_tick = Gauge(
            "trader_last_ok_tick_timestamp_seconds", "Scheduled time of the last tick with "
            "outcome ok (0 until one)", registry=r,
        )  # fmt: skip
        self.forced_eager = Gauge(
            "trader_model_forced_eager", "1 when the compile guard switched a model to eager",
            ["model"], registry=r,
        )  # fmt: skip
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
        for limit in RISK_LIMITS:
            self.risk_limit.labels(limit)

    def _initialise_symbol(self, symbol: str) -> None:
        self.quote_ages.track(symbol)
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

    def prepare_models(self, models: Iterable[tuple[str, str, str]]) -> None:
        """(model, device, mode) of each loaded forecaster: their series exist from now."""
        for model, device, mode in models:
            self.inference_latency.labels(model, device, mode)
            self.recompiles.labels(model)
            self.graph_breaks.labels(model)
            self.cudagraph_skips.labels(model)
            self.forced_eager.labels(model)

    def start_from_ledger(self, fees_paid: Decimal, status: TradingStatus) -> None:
        """Counters that the ledger keeps across restarts start at its figure: a restart then
        never looks like a reset to Prometheus, and increase() stays right."""
        if fees_paid > 0:
            self.fees.inc(_number(fees_paid))
        self.set_state(status)

    def use_clock(
        self, clock: Clock, calendars: Mapping[str, TradingCalendar] | None = None
    ) -> None:
        """The daemon's clock (the venue's) and each symbol's calendar, once start-up has made
        them: quote ages, the clock's own series and the sessions are measured on them."""
        self.quote_ages.clock = clock
        self.schedule.use_venue(clock, calendars or {})

    def set_risk_limits(self, risk: RiskSettings) -> None:
        """The limits in force (at start-up, and after each reload)."""
        self.risk_limit.labels("max_drawdown").set(risk.max_drawdown)
        self.risk_limit.labels("daily_loss").set(risk.max_daily_loss)
        self.perp.set_limits(risk)

    # --- ticks ------------------------------------------------------------------------------

    def observe_tick(self, report: TickReport) -> None:
        for stage, seconds in report.timings.items():
            self.tick_duration.labels(stage).observe(seconds)
        self.tick_duration.labels("total").observe(sum(report.timings.values()))
        outcome = tick_outcome(report)
        self.ticks.labels(outcome).inc()
        if outcome == "ok":  # first: a scrape between the two never sees a degraded tick
            self.last_ok_tick.set(report.at.timestamp())
        self.last_tick.set(report.at.timestamp())
        self.schedule.tick(report)
        for symbol, at in report.quote_times.items():
            self.quote_ages.saw(symbol, at)
        for order in report.orders:
            self.orders.labels(order.symbol, order.side.value, order.status.value).inc()
        self.fill_costs.decided(report.at, report.orders, report.quotes)
        count_fills(self, report.fills)
        self.fill_costs.settled(report.orders)
        for symbol, quote in report.quotes.items():
            self.observe_quote(symbol, quote)
        if report.portfolio is not None:
            self.observe_book(
                report.portfolio, report.marks, report.equity, report.drawdown, report.daily_loss
            )
        if report.status is not None:
            self.set_state(report.status)
        self.perp.after_tick(report.at, report.stale_marks)

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
        daily_loss: float | None = None,
    ) -> None:
        self.equity.set(_number(equity))
        if drawdown is not None:
            self.drawdown.set(drawdown)
        if daily_loss is not None:
            self.daily_loss.set(daily_loss)
        for symbol in set(self.symbols) | set(portfolio.positions):
            self.position.labels(symbol).set(_number(portfolio.amount(symbol)))
            self.pnl_realized.labels(symbol).set(
                _number(portfolio.realized_pnl.get(symbol, Decimal(0)))
            )
        self.perp.observe_portfolio(portfolio, marks)
        try:
            unrealized = portfolio.unrealized_pnl(marks)
        except DomainError:
            return  # a position without a mark: leave the last value rather than guess
        for symbol in self.symbols:
            self.pnl_unrealized.labels(symbol).set(_number(unrealized.get(symbol, Decimal(0))))

    def quote_seen(self, symbol: str, at: datetime) -> None:
        """A quote stamped `at` arrived, usable or not (too old, crossed): its age counts."""
        self.quote_ages.saw(symbol, at)

    def observe_quote(self, symbol: str, quote: Quote) -> None:
        """A quote the daemon may trade on: its time, spread and source."""
        self.quote_ages.saw(symbol, quote.at)
        spread = quote.spread_bps
        self.quote_spread.labels(symbol).set(float("nan") if spread is None else spread)
        for source in QuoteSource:
            self.quote_source.labels(symbol, source.value).set(source is quote.source)

    def set_state(self, status: TradingStatus) -> None:
        for state in TradingState:
            self.trading_state.labels(state.value).set(state is status.state)

    def observe_lateness(self, seconds: float, *, missed: bool = False) -> None:
        self.schedule.lateness(seconds, missed=missed)
        if missed:
            self.ticks.labels("missed").inc()

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

    def set_forced_eager(self, model: str, forced: bool) -> None:
        self.forced_eager.labels(model).set(forced)

    def set_gpu_memory(self, allocated: int, reserved: int, peak: int) -> None:
        for kind, value in zip(GPU_MEMORY_KINDS, (allocated, reserved, peak), strict=True):
            self.gpu_memory.labels(kind).set(value)

    def data_skip(self, reason: SkipReason, n: int) -> None:
        if n > 0:
            self.data_skips.labels(reason.value).inc(n)


@dataclass
class CountedSkips(SkipCounter):
    """The market step's skip counter, which also counts each skip in the metrics."""

    metrics: Metrics | None = None

    def add(self, reason: SkipReason, n: int = 1) -> None:
        super().add(reason, n)
        if self.metrics is not None:
            self.metrics.data_skip(reason, n)
