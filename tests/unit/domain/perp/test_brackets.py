"""Leverage brackets parsed from /fapi/v1/leverageBracket rows and checked.

Sources: the row shape from Binance's "Notional and Leverage Brackets (USER_DATA)"
(https://developers.binance.com/docs/derivatives/usds-margined-futures/account/rest-api/Notional-and-Leverage-Brackets);
the cum rule and its example from Binance's FAQ "How to Calculate Liquidation Price of USDⓈ-M
Futures Contracts" (https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93).
"""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from tests.unit.domain.perp.tables import BTCUSDT_FAQ_ERA, BTCUSDT_NOW
from trader.domain.errors import DomainError
from trader.domain.perp import LeverageBrackets


def test_parses_binance_rows_given_as_strings() -> None:
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_NOW)
    assert len(table.brackets) == 12
    second = table.brackets[1]
    assert (second.number, second.initial_leverage) == (2, 100)
    assert second.notional_floor == Decimal(50000)
    assert second.maint_margin_ratio == Decimal("0.005")
    assert table.max_notional == Decimal(1800000000)


def test_parses_binance_rows_given_as_json_numbers() -> None:
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_FAQ_ERA)
    assert table.brackets[0].maint_margin_ratio == Decimal("0.004")  # not 0.00400000000000000008


def test_faq_examples_of_rate_and_maintenance_amount() -> None:
    # FAQ: "if the position size ... is 264,000 USDT, then the maintenance margin rate would be
    # 1%"; "if ... 500,000 USDT, then the maintenance amount would be 1,300 USDT";
    # "Maintenance Amount on Level 3 = 250,000 * (1% - 0.5%) + 50 USDT = 1,300 USDT".
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_FAQ_ERA)
    assert table.bracket_for(Decimal(264000)).maint_margin_ratio == Decimal("0.01")
    assert table.bracket_for(Decimal(500000)).cum == Decimal(1300)
    assert Decimal(250000) * (Decimal("0.01") - Decimal("0.005")) + 50 == Decimal(1300)


def test_maintenance_margin_is_notional_times_rate_less_cum() -> None:
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_NOW)
    # 700,000 falls in bracket 3: 700,000 x 0.65% - 950 = 4,550 - 950 = 3,600.
    assert table.maintenance_margin(Decimal(700000)) == Decimal(3600)
    assert table.maintenance_margin(Decimal(-700000)) == Decimal(3600)  # a short's notional


@pytest.mark.parametrize(
    ("notional", "bracket"),
    [("0", 1), ("49999.99", 1), ("50000", 2), ("599999", 2), ("600000", 3), ("1800000000", 12)],
)
def test_bracket_floor_is_inclusive_and_cap_exclusive(notional: str, bracket: int) -> None:
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_NOW)
    assert table.bracket_for(Decimal(notional)).number == bracket


def test_maintenance_margin_is_continuous_at_every_boundary() -> None:
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_NOW)
    for lower, upper in zip(table.brackets, table.brackets[1:], strict=False):
        at = upper.notional_floor
        assert lower.maintenance_margin(at) == upper.maintenance_margin(at)


def test_max_leverage_by_notional() -> None:
    table = LeverageBrackets.from_binance("BTCUSDT", BTCUSDT_NOW)
    assert table.max_leverage(Decimal(10000)) == 125
    assert table.max_leverage(Decimal(600000)) == 75
    assert table.max_notional_at(20) == Decimal(100000000)
    with pytest.raises(DomainError, match="above the largest bracket cap"):
        table.max_leverage(Decimal(1800000001))
    with pytest.raises(DomainError, match="above every bracket"):
        table.max_notional_at(126)


def _broken(index: int, key: str, value: object) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = copy.deepcopy(BTCUSDT_NOW)  # type: ignore[arg-type]
    rows[index][key] = value
    return rows


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (_broken(3, "cum", "11451.0"), "bracket 4: cum 11451.0 is inconsistent"),
        (_broken(2, "notionalFloor", "600001"), "bracket 3: floor 600001 does not meet"),
        (_broken(4, "maintMarginRatio", "0.009"), "bracket 5: maintenance margin ratio must rise"),
        (_broken(1, "initialLeverage", "150"), "bracket 2: initial leverage must not rise"),
        (_broken(0, "notionalFloor", "10"), "bracket 1: the first bracket must start at"),
        (_broken(0, "cum", None), "bracket 1: cum must be a number"),
        (_broken(0, "maintMarginRatio", "abc"), "is not a decimal number"),
        (_broken(0, "maintMarginRatio", "1.5"), r"ratio must be in \[0, 1\)"),
        ([{"bracket": 1}], "bracket 1: missing initialLeverage"),
        ([], "at least one bracket"),
        ("brackets", "must be a list"),
        ([3], "is not an object"),
    ],
)
def test_inconsistent_tables_are_refused_with_the_bracket_named(rows: object, message: str) -> None:
    with pytest.raises(DomainError, match=message):
        LeverageBrackets.from_binance("BTCUSDT", rows)
