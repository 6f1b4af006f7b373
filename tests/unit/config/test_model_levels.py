"""A model that forecasts fewer quantile levels (Toto 2.0: the deciles 0.1 .. 0.9) gets the
default levels it can forecast, and levels it cannot forecast are refused by name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trader.config.forecast_settings import DEFAULT_LEVELS, ForecastSettings, default_levels


def test_toto2_defaults_to_the_levels_it_forecasts() -> None:
    levels = ForecastSettings.model_validate({"model": "toto2"}).quantiles
    assert levels == [q for q in DEFAULT_LEVELS if 0.1 <= q <= 0.9]
    assert ForecastSettings().quantiles == list(DEFAULT_LEVELS)


def test_levels_toto2_cannot_forecast_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"quantiles \[0.05\]: toto2 forecasts"):
        ForecastSettings.model_validate({"model": "toto2", "quantiles": [0.05, 0.5]})


def test_switching_model_keeps_given_levels_and_adapts_default_ones() -> None:
    assert ForecastSettings().with_model("toto2").quantiles == default_levels(["toto2"])
    given = ForecastSettings.model_validate({"quantiles": [0.2, 0.5, 0.8]})
    assert given.with_model("toto2").quantiles == [0.2, 0.5, 0.8]
    with pytest.raises(ValidationError):
        ForecastSettings.model_validate({"quantiles": [0.05, 0.5]}).with_model("toto2")


def test_several_models_share_the_levels_all_of_them_forecast() -> None:
    assert default_levels(["baseline", "toto2"]) == default_levels(["toto2"])
    assert default_levels(["baseline", "kronos"]) == list(DEFAULT_LEVELS)
