"""Forecasters: one protocol for the baseline, Toto and Kronos."""

from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import Forecaster, ForecastRequest

__all__ = ["BaselineForecaster", "ForecastRequest", "Forecaster"]
