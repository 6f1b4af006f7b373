"""The rolling window: what it will hold once bars join it, told before they do."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.engine.builders import bars
from trader.market.window import BarWindow


@given(capacity=st.integers(1, 6), held=st.integers(0, 8), added=st.integers(0, 8))
def test_bounds_after_are_those_of_the_window_once_the_bars_joined(capacity, held, added):
    series = bars(n=held + added)
    window = BarWindow("SOL/USDT", capacity, series[:held])
    bounds = window.bounds_after(series[held:])
    assert len(window) == min(held, capacity)  # nothing joined yet
    for bar in series[held:]:
        window.add(bar, after_hole=False)
    after = window.snapshot()
    assert bounds == ((after[0], after[-1], len(after)) if after else None)
