"""The dashboard's forecast-skill row: live forecast skill and inference stability, per model
and symbol (issue 18)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm
from panel_kit import AMBER, RED, SYMBOLS, match, per_hour, query, sel, timeseries


def skill_panels() -> list[Builder[dm.Panel] | db.Row]:
    """Live forecast skill (each forecast scored as its horizon closes, over the last
    forecast.skill_window of them) and inference stability, per model and symbol."""

    def by_model(metric: str, extra: str = "") -> str:
        return f"max by (model, symbol{extra}) ({sel(metric, SYMBOLS)})"

    unusable = (
        f"sum by (model, reason) (increase({sel('trader_forecasts_unusable_total')}[1h])) "
        f"/ ignoring (reason) group_left "
        f"sum by (model) (increase({sel('trader_forecasts_total')}[1h]))"
    )
    return [
        db.Row("Forecast skill"),
        timeseries(
            "Skill against the naive random walk",
            "1 - CRPS / CRPS of the naive reference (the random walk with the empirical "
            "quantiles of the moves over the last forecast.naive_window bars: the baseline's "
            "construction) over the skill window: above 0 the model's distribution beats it; "
            "at or below 0 for hours raises an alert. The series marked vs no-change point: "
            "against the no-change point forecast, which any spread beats (about 0.2 for "
            "nothing): shown, never alerted on.",
            query(by_model("trader_forecast_skill_vs_naive"), "{{model}} {{symbol}}"),
            query(
                by_model("trader_forecast_skill_vs_no_change"),
                "{{model}} {{symbol}} vs no-change point",
            ),
            thresholds=[(0, RED)],
        ),
        timeseries(
            "CRPS of the forecast return",
            "Mean CRPS per step over the skill window (quantile approximation), the naive "
            "reference's (model naive) beside each model's.",
            query(by_model("trader_forecast_crps"), "{{model}} {{symbol}}"),
        )
        .unit("percentunit")
        .min(0),
        timeseries(
            "MASE of the median",
            "MAE of the median return over that of the no-change point forecast.",
            query(by_model("trader_forecast_mase"), "{{model}} {{symbol}}"),
            thresholds=[(1, AMBER)],
        ).min(0),
        timeseries(
            "Interval coverage",
            "Share of outcomes inside the 50/80/90% central intervals over the skill window; "
            "a calibrated model's sit at 0.5, 0.8 and 0.9.",
            query(
                f"max by (model, symbol, interval) "
                f"({sel('trader_forecast_coverage', SYMBOLS, match('model', 'naive', '!='))})",
                "{{model}} {{symbol}} {{interval}}%",
            ),
        )
        .unit("percentunit")
        .min(0)
        .max(1),
        timeseries(
            "Unusable forecasts",
            "Share of forecasts in the last hour a model gave nothing usable for (non_finite: "
            "non-finite output or an error) or that sat at a clip bound (clipped).",
            query(unusable, "{{model}} {{reason}}"),
            thresholds=[(0.05, RED)],
        )
        .unit("percentunit")
        .min(0),
        timeseries(
            "Predicted spread over realised volatility",
            "The first step's predicted spread (as a standard deviation) over the window's "
            "realised one-bar volatility: 1 matches the market's recent moves.",
            query(by_model("trader_forecast_spread_ratio"), "{{model}} {{symbol}}"),
        ).min(0),
        timeseries(
            "Median jumps",
            "Tick-to-tick moves of the median forecast beyond forecast.stability_jump_sigmas "
            "realised sigmas, per hour.",
            query(
                per_hour("trader_forecast_median_jumps_total", SYMBOLS, by="model, symbol"),
                "{{model}} {{symbol}}",
            ),
            bars=True,
            thresholds=[(1, AMBER)],
        ),
        timeseries(
            "Forecasts scored",
            "Forecasts whose horizon closed, per hour, by outcome (scored; gap: a bar missing "
            "within it; expired: its origin left the window), and how many the skill window "
            "holds now.",
            query(
                per_hour("trader_forecast_scores_total", SYMBOLS, by="model, outcome"),
                "{{model}} {{outcome}}",
            ),
            query(by_model("trader_forecast_skill_window_forecasts"), "in the window {{model}}"),
        ).min(0),
    ]
