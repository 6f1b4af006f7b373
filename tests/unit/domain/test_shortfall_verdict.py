"""The one-line verdict: largest parts first, as percentages of the actual run's starting
equity, in the line's sense."""

from __future__ import annotations

from decimal import Decimal

from trader.domain.shortfall import Attribution, Part
from trader.domain.shortfall_verdict import MEANING, verdict

D = Decimal


def attribution(start: str = "10000", **moved: str) -> Attribution:
    parts = {part: D(moved.get(part.value, "0")) for part in Part}
    modelled = D(500)
    return Attribution("USDT", D(start), modelled + sum(parts.values(), D(0)), modelled, parts, ())


def test_a_shortfall_names_its_largest_parts_first():
    # -110 - 50 - 20 = -180, 1.8% of 10000.
    found = verdict(attribution(fees="-50", spread="-110", delay="-20"))
    assert found == "live made 1.8% less than its backtest: 1.1% spread, 0.5% fees, 0.2% delay"


def test_a_part_that_worked_the_other_way_is_shown_negative():
    found = verdict(attribution(spread="-110", slippage="30"))
    assert found == "live made 0.8% less than its backtest: 1.1% spread, -0.3% slippage"


def test_a_run_that_made_more_says_more():
    found = verdict(attribution(extra_fills="40"), actual="paper")
    assert found == "paper made 0.4% more than its backtest: 0.4% extra fills"


def test_equal_runs_say_so_and_show_parts_that_offset_as_signed_effects():
    assert verdict(attribution()) == "live made exactly what its backtest made"
    found = verdict(attribution(spread="-10", extra_fills="10"))
    assert found == (
        "live made exactly what its backtest made; its parts offset: -0.1% spread, "
        "+0.1% extra fills"
    )


def test_beyond_four_parts_the_rest_are_counted():
    found = verdict(
        attribution(spread="-50", fees="-40", delay="-30", slippage="-20", quote="-10", halts="-5")
    )
    assert found.endswith("0.2% slippage, and 2 smaller")


def test_without_a_starting_equity_amounts_are_in_cash_and_tiny_parts_still_show():
    assert verdict(attribution(start="0", fees="-12.50")) == (
        "live made 12.5 USDT less than its backtest: 12.5 USDT fees"
    )
    assert verdict(attribution(fees="-0.04")) == (
        "live made <0.001% less than its backtest: <0.001% fees"
    )
    assert verdict(attribution(fees="-0.04", spread="0.04")).endswith(
        "offset: +<0.001% spread, >-0.001% fees"  # equal sizes: in the parts' order
    )


def test_every_part_says_what_it_measures():
    assert set(MEANING) == set(Part)
