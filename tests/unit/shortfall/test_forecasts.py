"""`LedgerForecaster`: the daemon's stored forecasts served as they were; a symbol the daemon
forecast nothing for at a bar it decided from stays a miss (as it was for the daemon); a bar
the daemon forecast nothing at all from (down, or the exchange was) is forecast anew by the
model itself, and counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trader.domain import Bar, Timeframe
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import ForecastRequest
from trader.ledger.codec import time_text
from trader.ledger.forecast_rows import forecast_row
from trader.shortfall.forecasts import LedgerForecaster

HOUR = Timeframe("1h")
START = datetime(2021, 1, 1, tzinfo=UTC)
LEVELS = (0.1, 0.5, 0.9)


def bars(symbol: str, count: int, drift: float) -> list[Bar]:
    out = []
    for i in range(count):
        open_, close = 100 + drift * i, 100 + drift * (i + 1)
        out.append(Bar(symbol, HOUR, START + timedelta(hours=i), open_,
                       max(open_, close) + 1, min(open_, close) - 1, close, 10.0))  # fmt: skip
    return out


def request(symbol: str, count: int, drift: float = 1.0) -> ForecastRequest:
    return ForecastRequest(symbol, bars(symbol, count, drift), 4, LEVELS)


def test_stored_forecasts_are_served_misses_stay_misses_and_undecided_bars_are_computed():
    model = BaselineForecaster(16)
    # The daemon forecast SOL from the bar closing at the 40th, and nothing for BTC then.
    [stored] = model.forecast([request("SOL/USD", 40, drift=-2.0)])
    rows = [forecast_row(time_text(stored.as_of), stored)]
    built: list[int] = []

    def compute() -> BaselineForecaster:
        built.append(1)
        return model

    forecaster = LedgerForecaster("baseline", rows, HOUR, compute)
    answers = forecaster.forecast(
        [request("SOL/USD", 40), request("BTC/USD", 40), request("SOL/USD", 41)]
    )
    # SOL at the 40th: the daemon's own, not what these (other) bars would give.
    assert answers[0].as_of == stored.as_of
    assert answers[0].quantiles == stored.quantiles
    assert answers[0].quantiles != model.forecast([request("SOL/USD", 40)])[0].quantiles
    # BTC at the 40th: the daemon decided from that bar and forecast nothing for BTC.
    assert answers[1].steps == 0
    assert forecaster.missing == {"BTC/USD": 1}
    # SOL at the 41st: the daemon forecast nothing from that bar; the model does, once built.
    assert answers[2].steps == 4
    assert answers[2].quantiles == model.forecast([request("SOL/USD", 41)])[0].quantiles
    assert forecaster.computed == {"SOL/USD": 1}
    assert forecaster.served == 1
    forecaster.forecast([request("SOL/USD", 42)])
    assert built == [1]
    assert forecaster.computed == {"SOL/USD": 2}


def test_without_the_model_an_undecided_bar_is_a_counted_miss():
    forecaster = LedgerForecaster("toto", [], HOUR, lambda: None)
    [answer] = forecaster.forecast([request("SOL/USD", 40)])
    assert answer.steps == 0
    assert forecaster.missing == {"SOL/USD": 1}
    assert forecaster.computed == {}
