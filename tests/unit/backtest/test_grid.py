"""A grid's input is checked before any run: unknown keys (with a suggestion), keys a grid
cannot vary, values their setting refuses, empty lists, a key twice, a combination the
settings refuse as a whole; and the folds of a walk-forward."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from trader.backtest.grid import (
    GridError,
    Trial,
    combinations,
    grid_keys,
    parse_axes,
    trial_settings,
    with_value,
)
from trader.backtest.walk_forward import WalkForwardError, folds, parse_spec
from trader.config.schema import Settings

BASE = Settings(exchange={"api_key": "k3y", "api_secret": "s3cret"})


def test_axes_are_settings_or_a_strategys_own_name_and_combine_in_order():
    axes = parse_axes(["strategy.position_fraction=0.1,0.2", "ci_guard.k=1,2,3"], BASE)
    assert [(a.key, a.values) for a in axes] == [
        ("strategy.position_fraction", ("0.1", "0.2")),
        ("strategy.ci_multiplier", ("1", "2", "3")),
    ]
    combos = combinations(axes)
    assert len(combos) == 6
    assert combos[1] == {"strategy.position_fraction": "0.1", "strategy.ci_multiplier": "2"}
    settings = trial_settings(BASE, Trial(1, "SOL/USDT", "maxdiff", ()), combos[1])
    assert (settings.strategy.position_fraction, settings.strategy.ci_multiplier) == (0.1, 2.0)
    assert settings.strategy.name == "maxdiff"
    assert settings.exchange.api_secret is None  # a trial may leave this machine: no secrets
    assert "forecast.toto.num_samples" in grid_keys(BASE)
    assert "market.symbols" not in grid_keys(BASE)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "strategy.postion_fraction=0.1",
            "no such setting (did you mean strategy.position_fraction",
        ),
        ("risk.min_edge_bps=abc", "risk.min_edge_bps=abc: risk.min_edge_bps: Input should be a"),
        ("strategy.position_fraction=1.5", "less than or equal to 1"),
        ("strategy.position_fraction=", "an empty value"),
        ("strategy.position_fraction=0.1,,0.2", "an empty value"),
        ("strategy.position_fraction=0.1,0.1", "a value given twice"),
        ("strategy.position_fraction", "give KEY=V1,V2"),
        ("market.symbols=A,B", "the files decide the symbols"),
        ("strategy.name=simple", "--strategy"),
        ("ledger.path=x", "no such setting"),
    ],
)
def test_bad_grid_input_is_refused_with_its_reason(spec, says):
    with pytest.raises(GridError) as refused:
        parse_axes([spec], BASE)
    assert says in str(refused.value)


def test_a_key_twice_and_a_value_another_setting_refuses():
    with pytest.raises(GridError, match="given twice"):
        parse_axes(["ci_guard.k=1", "strategy.ci_multiplier=2"], BASE)
    # A level the band reads must be one the forecasts have: checked across settings.
    with pytest.raises(GridError, match=r"ci_guard.lower=0.42: .*forecast.quantiles lacks"):
        parse_axes(["ci_guard.lower=0.4,0.42"], BASE)
    assert with_value(BASE, {"strategy.ci_lower_quantile": "0.2"}).strategy.ci_lower_quantile


def test_walk_forward_folds_train_then_test_and_move_on_by_a_test():
    start = datetime(2024, 1, 1, tzinfo=UTC)
    times = [start + timedelta(hours=h) for h in range(100)]
    cut = folds(times, *parse_spec("40/20"))
    assert [(f.train.begin, f.train.end, f.test.begin, f.test.end) for f in cut] == [
        (times[0], times[39], times[40], times[59]),
        (times[20], times[59], times[60], times[79]),
        (times[40], times[79], times[80], times[99]),
    ]
    by_time = folds(times, *parse_spec("1d/12h"))
    assert (by_time[0].train.end, by_time[0].test.end) == (times[23], times[35])
    assert by_time[1].train.begin == times[12]
    for bad in ("40", "40/0", "x/20", "40/20q"):
        with pytest.raises(WalkForwardError):
            parse_spec(bad)
    with pytest.raises(WalkForwardError, match="hold no training window"):
        folds(times, *parse_spec("99/20"))
