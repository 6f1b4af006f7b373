"""A grid of backtests: `--grid KEY=V1,V2` axes over the settings, every combination checked
against the settings' own schema before any run starts.

A key is a setting's dotted name (`strategy.position_fraction`, `risk.min_edge_bps`,
`forecast.baseline_lookback`, ...) or a strategy's short name for one of its parameters
(`ci_guard.k` is `strategy.ci_multiplier`). Only what changes a backtest can vary: the files
decide the symbols and the timeframe, `--strategy` the strategies, and nothing of the daemon's
own (its ledger, metrics, exchange account) means anything here.

A trial is one run: a strategy on a symbol with one combination's values. A `TrialJob` is
what a worker needs to run it (picklable: it travels to worker processes and Ray tasks).
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from trader.backtest.prepare import WHOLE, Period
from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.market.files.options import ReadOptions

# A strategy's own name for its parameters.
ALIASES = {
    "ci_guard.k": "strategy.ci_multiplier",
    "ci_guard.lower": "strategy.ci_lower_quantile",
    "ci_guard.upper": "strategy.ci_upper_quantile",
    "maxdiff.entry": "strategy.maxdiff_entry_quantile",
    "maxdiff.exit": "strategy.maxdiff_exit_quantile",
}
SECTIONS = ("market", "forecast", "strategy", "risk", "broker", "backtest")
FIXED = {
    "market.symbols": "the files decide the symbols (--data, --symbol)",
    "market.timeframe": "the files decide the timeframe",
    "market.calendars": "name each symbol's calendar in the settings",
    "strategy.name": "give the strategies with --strategy",
    "strategy.per_symbol": "give the strategies with --strategy",
    "backtest.strategies": "give the strategies with --strategy",
    "backtest.cache_dir": "the forecast cache is one for every run",
    "backtest.max_trials": "it limits the grid itself",
    "backtest.batch_windows": "it is part of the forecast cache's key, not of a strategy",
    "broker.mode": "a backtest trades on paper",
    "forecast.device": "every run forecasts on the device the grid chose",
}


class GridError(ValueError):
    """A grid that cannot run as given; the message says which key or value and why."""


@dataclass(frozen=True)
class Axis:
    key: str  # the setting's dotted name
    values: tuple[str, ...]  # as given, each valid on its own


def grid_keys(settings: Settings) -> list[str]:
    """Every key a grid may vary (aliases aside)."""
    return sorted(k for k in _scalar_keys(settings) if k not in FIXED)


def parse_axes(specs: Sequence[str], base: Settings) -> list[Axis]:
    """The axes of `--grid KEY=V1,V2 ...`; GridError for an unknown or fixed key, a key
    given twice, an empty list or a value the setting refuses."""
    axes: list[Axis] = []
    known = _scalar_keys(base)
    for spec in specs:
        name, sep, listed = spec.partition("=")
        name = name.strip()
        if not sep or not name:
            raise GridError(
                f"--grid {spec!r}: give KEY=V1,V2 (e.g. strategy.position_fraction=0.1,0.2)"
            )
        key = ALIASES.get(name, name)
        if key in FIXED:
            raise GridError(f"--grid {name}: cannot vary in a grid: {FIXED[key]}")
        if key not in known:
            near = difflib.get_close_matches(name, [*grid_keys(base), *ALIASES], n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise GridError(f"--grid {name}: no such setting{hint}; `trader config` lists them")
        if any(axis.key == key for axis in axes):
            raise GridError(f"--grid {name}: given twice (one --grid per setting)")
        values = tuple(v.strip() for v in listed.split(",")) if listed.strip() else ()
        if not values or any(not v for v in values):
            raise GridError(f"--grid {name}: an empty value in {listed!r}: give V1,V2,...")
        if len(set(values)) != len(values):
            raise GridError(f"--grid {name}: a value given twice in {listed!r}")
        for value in values:
            with_value(base, {key: value}, what=f"--grid {name}={value}")
        axes.append(Axis(key, values))
    return axes


def combinations(axes: Sequence[Axis]) -> list[dict[str, str]]:
    """Every combination of the axes' values, the last axis varying fastest."""
    return [
        dict(zip((a.key for a in axes), chosen, strict=True))
        for chosen in itertools.product(*(a.values for a in axes))
    ]


def with_value(base: Settings, params: Mapping[str, str], *, what: str = "") -> Settings:
    """`base` with `params` (dotted keys, values as text), checked by the settings' schema;
    GridError saying which value it refused and why."""
    values: dict[str, Any] = base.model_dump()
    for key, value in params.items():
        *path, last = key.split(".")
        table = values
        for part in path:
            table = table[part]
        table[last] = value
    try:
        return Settings.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise GridError(f"{what or _describe(params)}: {problems}") from None


def _describe(params: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _scalar_keys(settings: Settings) -> set[str]:
    """Dotted names of every setting in the grid's sections that holds one value."""
    keys: set[str] = set()

    def walk(model: BaseModel, prefix: str) -> None:
        for name in type(model).model_fields:
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                walk(value, f"{prefix}{name}.")
            elif not isinstance(value, dict | list | tuple | set):
                keys.add(f"{prefix}{name}")

    for section in SECTIONS:
        walk(getattr(settings, section), f"{section}.")
    return keys


@dataclass(frozen=True)
class Trial:
    number: int  # 1-based, in the grid's order
    symbol: str
    strategy: str
    params: tuple[tuple[str, str], ...]  # the grid's values: dotted key, value as given
    period: Period = WHOLE
    fold: int | None = None  # walk-forward: the fold it trains or tests
    role: str = "run"  # "run"; walk-forward: "train" or "test"

    @property
    def name(self) -> str:
        return f"{self.number:03d}"

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params) or "as configured"


@dataclass(frozen=True)
class TrialJob:
    trial: Trial
    settings: Settings  # the trial's own, without secrets (it may leave this machine)
    file: Path
    reading: ReadOptions
    out: Path | None  # its report's folder, when the grid writes reports
    log: LogSettings


def without_secrets(settings: Settings) -> Settings:
    """`settings` with no credential in them: a backtest needs none."""
    exchange = settings.exchange.model_copy(
        update={"api_key": None, "api_secret": None, "api_password": None}
    )
    forecast = settings.forecast.model_copy(update={"hf_token": None})
    return settings.model_copy(update={"exchange": exchange, "forecast": forecast})


def trial_settings(base: Settings, trial: Trial, params: Mapping[str, str]) -> Settings:
    """The settings a trial runs with: the grid's values on `base` (checked when the grid
    was read), its strategy, nothing secret."""
    settings = with_value(base, params) if params else base
    strategy = settings.strategy.model_copy(update={"name": trial.strategy, "per_symbol": {}})
    return without_secrets(settings.model_copy(update={"strategy": strategy}))
