from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal

from trader.domain import Bar, QuoteSource, Timeframe
from trader.market.quotes import FixedSpread, HighLowSpread, modelled_quote, synthetic_quote

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def bar(high: float, low: float, close: float, hour: int = 0) -> Bar:
    return Bar("SOL/USDT", Timeframe("1h"), T0.replace(hour=hour), close, high, low, close, 1.0)


def test_a_fixed_spread_quote_straddles_the_close_and_says_it_is_modelled():
    last = bar(110, 90, 100)
    quote = modelled_quote([last], FixedSpread(10))
    assert quote.source is QuoteSource.MODELLED
    assert (quote.bid, quote.ask) == (Decimal("99.95"), Decimal("100.05"))
    assert quote.exchange_time == last.end


def test_the_high_low_estimate_matches_corwin_schultz_by_hand():
    first, second = bar(105, 95, 100, 0), bar(105, 95, 101, 1)
    beta = 2 * math.log(105 / 95) ** 2
    gamma = math.log(105 / 95) ** 2
    k = 3 - 2 * math.sqrt(2)
    alpha = (math.sqrt(2 * beta) - math.sqrt(beta)) / k - math.sqrt(gamma / k)
    expected = 2 * (math.exp(alpha) - 1) / (1 + math.exp(alpha)) * 10_000
    assert expected > 0
    assert HighLowSpread(floor_bps=1).spread_bps([first, second]) == expected
    # A negative estimate (common) falls back to the floor, as does a single bar.
    assert (
        HighLowSpread(floor_bps=3).spread_bps([bar(100.1, 99.9, 100, 0), bar(130, 120, 125, 1)])
        == 3
    )
    assert HighLowSpread(floor_bps=3).spread_bps([first]) == 3


def test_a_synthetic_quote_is_the_last_close_on_both_sides():
    quote = synthetic_quote(bar(110, 90, 100.25))
    assert quote.source is QuoteSource.SYNTHETIC
    assert quote.bid == quote.ask == Decimal("100.25")
