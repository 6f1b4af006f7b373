"""Hand-built inputs for strategy, risk, planner and broker tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from trader.domain import Bar, Forecast, Quote, QuoteSource, Timeframe
from trader.strategy.base import Costs, DecisionContext

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
TF = Timeframe("1h")
LEVELS = (0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9)


def bars(close: float = 100.0, n: int = 32, symbol: str = "SOL/USDT") -> list[Bar]:
    return [
        Bar(symbol, TF, T0 - TF.duration * (n - i), close, close * 1.01, close * 0.99, close, 10.0)
        for i in range(n)
    ]


def forecast(
    median: float,
    width: float = 1.0,
    *,
    high: float | None = None,
    low: float | None = None,
    model: str = "toto",
    symbol: str = "SOL/USDT",
    steps: int = 1,
) -> Forecast:
    """Close quantiles around `median`, spaced `width` apart per level step of 0.1."""
    close = {q: [median + (q - 0.5) * 10 * width] * steps for q in LEVELS}
    hi = {q: [(high or median * 1.02) + (q - 0.5) * width] * steps for q in LEVELS}
    lo = {q: [(low or median * 0.98) + (q - 0.5) * width] * steps for q in LEVELS}
    mean = {
        "close": [median] * steps,
        "high": [high or median] * steps,
        "low": [low or median] * steps,
    }
    return Forecast(symbol, model, T0, TF, steps, {"close": close, "high": hi, "low": lo}, mean)


def quote(bid: str = "99.99", ask: str = "100.01", source: QuoteSource = QuoteSource.REAL) -> Quote:
    if source is QuoteSource.SYNTHETIC:
        return Quote.synthetic("SOL/USDT", Decimal(bid), T0)
    return Quote("SOL/USDT", Decimal(bid), Decimal(ask), T0, source)


def context(
    f: Forecast,
    *,
    position: str = "0",
    q: Quote | None = None,
    allow_short: bool = False,
    others: dict[str, Forecast] | None = None,
    close: float = 100.0,
) -> DecisionContext:
    return DecisionContext(
        "SOL/USDT", T0 + timedelta(seconds=5), bars(close), q or quote(), f,
        {f.model: f, **(others or {})}, Decimal(position), Costs(10.0, 2.0), allow_short,
    )  # fmt: skip
