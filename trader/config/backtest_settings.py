"""The settings of `trader backtest`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from trader.config.section import Section
from trader.config.trading_settings import StrategyName


class BacktestSettings(Section):
    strategies: list[StrategyName] = Field(
        ["simple", "ci_guard", "maxdiff"],
        min_length=1,
        description="strategies `trader backtest` compares (--strategy overrides)",
    )
    cache_dir: Path = Field(
        Path("var/forecast-cache"),
        description="forecasts computed for backtests, keyed by model, weights, parameters and "
        "data: re-running strategies over the same forecasts costs only the simulation",
    )
    batch_windows: int = Field(
        32,
        ge=1,
        le=4096,
        description="windows per model call when forecasting history; part of the cache key "
        "(batches are fixed by the clock, so the sampler's seeds depend on it)",
    )
    max_skipped_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="a run whose symbols skipped more than this share of their ticks (or "
        "any tick failed) exits 1, listing why, unless --allow-skips",
    )
    on_halt: Literal["stop", "resume_next_day", "reduce_only"] = Field(
        "reduce_only",
        description="what a stop of the loss limits does in a backtest: stop (the daily "
        "loss's halt and the drawdown's reducing-only last to the end of the run), "
        "resume_next_day (halted, or reducing-only for a drawdown, until the next day), "
        "reduce_only (only orders that shrink a position until the next day); the daemon's "
        "stops always wait for a person",
    )
    risk_free_rate: float = Field(
        0.0, ge=0, lt=1, description="annual risk-free rate taken off returns in Sharpe/Sortino"
    )
    max_trials: int = Field(
        64,
        ge=1,
        description="the most runs a grid (--grid, --walk-forward) starts without --yes: each "
        "is a full backtest, and every trial more is more luck to discount",
    )
