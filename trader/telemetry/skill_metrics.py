"""The live forecast skill and inference-stability metrics (a module of their own: `Metrics`
holds the daemon's others).

Per model and symbol, over the last `forecast.skill_window` scored forecasts, the naive
reference scored beside them as model "naive" (the random walk with the empirical quantiles of
the moves over the last `forecast.naive_window` bars: the baseline's construction):
trader_forecast_crps (mean CRPS of the return per step), trader_forecast_mase (against the
no-change point forecast), trader_forecast_coverage{interval}, trader_forecast_skill_vs_naive
(1 - CRPS / CRPS of the naive reference: the headline, and the alert's) and
trader_forecast_skill_vs_no_change (1 - CRPS / CRPS of the no-change point forecast, which
any spread beats: shown, never alerted on). NaN until a first forecast is scored. Stability
per model: forecasts asked for and those unusable (non-finite or failed, clipped), the
predicted spread over the realised volatility, median jumps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from trader.skill.live import NAIVE, OUTCOMES, SCORED, RollingSkill, SkillUpdate
from trader.skill.rules import INTERVALS, interval_name

UNUSABLE = ("non_finite", "clipped")
NAN = float("nan")


class SkillMetrics:
    def __init__(
        self, registry: CollectorRegistry, symbols: Sequence[str], models: Sequence[str]
    ) -> None:
        r = registry
        self.symbols, self.models = list(symbols), [*models, NAIVE]
        labels = ["model", "symbol"]
        self.crps = Gauge(
            "trader_forecast_crps", "Mean CRPS of the forecast return per step over the skill "
            "window (quantile approximation; NaN until one is scored)", labels, registry=r,
        )  # fmt: skip
        self.mase = Gauge(
            "trader_forecast_mase", "MAE of the median return / MAE of no change over the "
            "skill window (naive = 1)", labels, registry=r,
        )  # fmt: skip
        self.coverage = Gauge(
            "trader_forecast_coverage", "Share of outcomes inside the central interval over "
            "the skill window (NaN: the forecast has no such interval)",
            [*labels, "interval"], registry=r,
        )  # fmt: skip
        self.skill = Gauge(
            "trader_forecast_skill_vs_naive", "1 - CRPS / CRPS of the naive reference (the "
            "random walk with the empirical quantiles of the last forecast.naive_window bars' "
            "moves) over the skill window (0 or less: no better than naive)", labels, registry=r,
        )  # fmt: skip
        self.skill_no_change = Gauge(
            "trader_forecast_skill_vs_no_change", "1 - CRPS / CRPS of the no-change point "
            "forecast over the skill window (any spread earns some: not the headline)",
            labels, registry=r,
        )  # fmt: skip
        self.window = Gauge(
            "trader_forecast_skill_window_forecasts", "Scored forecasts the skill figures "
            "cover now", labels, registry=r,
        )  # fmt: skip
        self.scored = Counter(
            "trader_forecast_scores_total", "Forecasts whose horizon closed, by outcome "
            "(scored; gap: a bar missing within it; expired: its origin left the window)",
            [*labels, "outcome"], registry=r,
        )  # fmt: skip
        self.forecasts = Counter(
            "trader_forecasts_total", "Forecasts asked of a model (one per ready symbol)",
            ["model"], registry=r,
        )  # fmt: skip
        self.unusable = Counter(
            "trader_forecasts_unusable_total", "Forecasts a model gave nothing usable for "
            "(non_finite: non-finite output or an error) or that sat at a clip bound (clipped)",
            ["model", "reason"], registry=r,
        )  # fmt: skip
        self.spread_ratio = Gauge(
            "trader_forecast_spread_ratio", "Predicted one-bar spread (as a standard "
            "deviation) over the window's realised volatility (1: matched)", labels, registry=r,
        )  # fmt: skip
        self.jumps = Counter(
            "trader_forecast_median_jumps_total", "Tick-to-tick moves of the median forecast "
            "beyond forecast.stability_jump_sigmas realised sigmas", labels, registry=r,
        )  # fmt: skip
        for model in self.models:
            for symbol in self.symbols:
                self._initialise(model, symbol)
            if model != NAIVE:
                self.forecasts.labels(model)
                for reason in UNUSABLE:
                    self.unusable.labels(model, reason)

    def _initialise(self, model: str, symbol: str) -> None:
        for gauge in (self.crps, self.mase, self.skill, self.skill_no_change):
            gauge.labels(model, symbol).set(NAN)
        for width in INTERVALS:
            self.coverage.labels(model, symbol, interval_name(width)).set(NAN)
        self.window.labels(model, symbol).set(0)
        for outcome in OUTCOMES:
            if model != NAIVE:
                self.scored.labels(model, symbol, outcome)
        if model != NAIVE:
            self.spread_ratio.labels(model, symbol).set(NAN)
            self.jumps.labels(model, symbol)

    def resume(self, counts: Iterable[tuple[tuple[str, str, str], int]]) -> None:
        """Counters start at what the ledger kept: a restart is no reset to Prometheus."""
        for (model, symbol, outcome), n in counts:
            if n > 0:
                self.scored.labels(model, symbol, outcome).inc(n)

    def observe(self, update: SkillUpdate, rolling: RollingSkill) -> None:
        for score in update.scores:
            self.scored.labels(score.model, score.symbol, SCORED).inc()
        for model, symbol, outcome in update.unscored:
            self.scored.labels(model, symbol, outcome).inc()
        for model, symbol in update.touched:
            figures = rolling.figures(model, symbol)
            self.window.labels(model, symbol).set(figures.forecasts)
            for gauge, value in (
                (self.crps, figures.crps),
                (self.mase, figures.mase),
                (self.skill, figures.skill_vs_naive),
                (self.skill_no_change, figures.skill_vs_no_change),
            ):
                gauge.labels(model, symbol).set(NAN if value is None else value)
            for name, share in figures.coverage.items():
                self.coverage.labels(model, symbol, name).set(NAN if share is None else share)
        for s in update.stability:
            self.forecasts.labels(s.model).inc(s.asked)
            if s.failed:
                self.unusable.labels(s.model, "non_finite").inc(s.failed)
            if s.clipped:
                self.unusable.labels(s.model, "clipped").inc(len(s.clipped))
            for symbol, ratio in s.spread_ratio.items():
                self.spread_ratio.labels(s.model, symbol).set(ratio)
            for symbol in s.jumps:
                self.jumps.labels(s.model, symbol).inc()
