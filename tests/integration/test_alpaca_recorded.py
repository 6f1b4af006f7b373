"""The Alpaca emulator's answers held field by field to Alpaca's own recorded answers
(tests/data/alpaca/recorded/, each file's source in its README): every recorded field is
answered, with the recorded JSON type (a decimal stays a string, null stays null where the
order is in the recorded state), and a field Alpaca's answer lacks is a failure unless it is
listed below with the reason it is there.

To hold another endpoint to a recorded answer, add a `Case` to the list its state belongs to
(`_cases_in_session`, `_cases_while_closed`, ...), or a (path, file, key) to `HISTORY`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest

from tests.integration.alpaca_paper import NEW_YORK, TUESDAY, Paper, paper

pytestmark = pytest.mark.integration
RECORDED = Path(__file__).resolve().parents[1] / "data" / "alpaca" / "recorded"
SATURDAY = TUESDAY.replace(day=8, hour=12)
WEDNESDAY_PRE_MARKET = TUESDAY.replace(day=5, hour=7)

# Fields the emulator answers that a recorded answer lacks, each with why.
INTENT = "position_intent: Alpaca's orders carry it (alpaca-py's recorded order_market.json)"
EXTRA = {
    "account.json": {
        "crypto_status": "in Alpaca's OpenAPI account example (docs.alpaca.markets/us/v1.1/"
        "openapi/trading-api.json); the adapter's doctor reads it",
    },
    "asset_crypto.json": {
        "attributes": "alpaca-py's Asset model reads it for every class; Alpaca's stock "
        "example (asset_stock.json) carries it",
    },
    "order_limit.json": {"position_intent": INTENT},
    "order_limit_crypto.json": {"position_intent": INTENT},
    "order_extended_hours.json": {
        "legs": "in every other recorded order (order_market.json, Alpaca's sample order)",
        "position_intent": INTENT,
        "subtag": "in alpaca-py's recorded order_market.json and Alpaca's OpenAPI examples",
        "source": "in alpaca-py's recorded order_market.json and Alpaca's OpenAPI examples",
    },
}
# Recorded answers whose values are placeholders, held by their field names only.
NAMES_ONLY = {
    "order_extended_hours.json": "alpaca-py's fixture writes OpenAPI placeholders as values "
    '("hwm": "string", numbers for decimals); its field names are the recorded part',
}
# The hook for the clock, calendar and market data answers: (path, file, key in the file).
HISTORY = [
    ("/v2/clock", "clock.json", None),
    ("/v2/calendar?start=2025-03-04&end=2025-03-04", "calendar.json", "trading_api_docs"),
]


def recorded(name: str, key: str | None = None) -> Any:
    loaded = json.loads((RECORDED / name).read_text())
    return loaded if key is None else loaded[key]


def kind(value: Any) -> str:
    """The JSON type, with a decimal written as text told apart from other text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | dict):
        return type(value).__name__
    try:
        Decimal(value)
        return "decimal text"
    except InvalidOperation:
        return "text"


def differences(
    recorded_answer: dict[str, Any],
    answer: dict[str, Any],
    extra: dict[str, str] | None = None,
    names_only: bool = False,
) -> list[str]:
    found = []
    for name, value in recorded_answer.items():
        if name not in answer:
            found.append(f"{name}: recorded, not answered")
        elif not names_only and kind(value) != kind(answer[name]):
            found.append(f"{name}: recorded {kind(value)}, answered {kind(answer[name])}")
    for name in sorted(answer.keys() - recorded_answer.keys() - (extra or {}).keys()):
        found.append(f"{name}: answered, not in Alpaca's answer")
    return found


@dataclass
class Case:
    file: str
    answer: dict[str, Any]
    key: str | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # field -> value it must have


def check(case: Case) -> list[str]:
    found = differences(
        recorded(case.file, case.key), case.answer, EXTRA.get(case.file),
        case.file in NAMES_ONLY,
    )  # fmt: skip
    found += [
        f"{name}: {case.answer.get(name)!r}, not {value!r}"
        for name, value in case.checks.items()
        if case.answer.get(name) != value
    ]
    return [f"{case.file}: {problem}" for problem in found]


def checked(cases: list[Case]) -> list[str]:
    return [problem for case in cases for problem in check(case)]


async def _cases_in_session(p: Paper) -> list[Case]:
    """Tuesday in the session: a stock bought, a crypto limit resting far below."""
    status, bought = await p.order("MSFT", "buy", "10")
    assert status == 200, bought
    below = p.limit("BTC/USD", "0.5")
    status, resting = await p.order("BTC/USD", "buy", "1", limit=below, tif="gtc")
    assert status == 200, resting
    _, account = await p.get("/v2/account")
    _, positions = await p.get("/v2/positions")
    _, stock = await p.get("/v2/assets/MSFT")
    _, crypto = await p.get("/v2/assets?asset_class=crypto")
    return [
        Case("account.json", account, checks={"multiplier": "4", "shorting_enabled": True}),
        Case("asset_stock.json", stock),
        Case("asset_crypto.json", crypto[0], checks={"marginable": False, "shortable": False}),
        Case("order_limit_crypto.json", resting, checks={"status": "new"}),
        Case("position_long.json", positions[0], checks={"side": "long", "qty": "10"}),
    ]


async def _short_case(p: Paper) -> list[Case]:
    """A short: Alpaca records no short position in its examples, so it is held to the
    long one's shape (position_long.json) with the signs Alpaca documents: `side` "short",
    a negative `qty` and `market_value` (its account's `short_market_value` is negative)."""
    status, sold = await p.order("MSFT", "sell", "4")
    assert status == 200, sold
    _, positions = await p.get("/v2/positions")
    short = positions[0]
    assert Decimal(short["market_value"]) < 0
    return [Case("position_long.json", short, checks={"side": "short", "qty": "-4"})]


async def _cases_while_closed(p: Paper) -> list[Case]:
    """Saturday: a market order and a limit order wait, "accepted", for Monday's open."""
    _, market = await p.order("MSFT", "buy", "3")
    _, limit = await p.order("MSFT", "buy", "2", limit=p.limit("MSFT"), tif="gtc")
    return [
        Case("order_market.json", market, checks={"status": "accepted", "type": "market"}),
        Case("order_limit.json", limit, checks={"status": "accepted", "time_in_force": "gtc"}),
    ]


async def _cases_pre_market(p: Paper) -> list[Case]:
    """Wednesday 07:00 New York time: an extended-hours limit resting in the pre-market."""
    below = p.limit("MSFT", "0.8")
    status, extended = await p.order("MSFT", "buy", "5", limit=below, extended=True)
    assert status == 200, extended
    checks = {"status": "new", "extended_hours": True, "time_in_force": "day"}
    return [Case("order_extended_hours.json", extended, checks=checks)]


async def _cases_of_errors(p: Paper) -> list[Case]:
    """Refusals with Alpaca's recorded bodies (errors.json)."""
    errors = recorded("errors.json")
    cases = []
    status, unknown = await p.get("/v2/orders/00000000-0000-4000-8000-000000009999")
    assert status == errors["order_not_found"]["status"]
    cases.append(Case("errors.json", unknown, "order_not_found"))
    status, oversold = await p.order("BTC/USD", "sell", "3")  # crypto is never shorted
    assert status == errors["insufficient_qty"]["status"], oversold
    cases.append(Case("errors.json", oversold, "insufficient_qty"))
    below = p.limit("MSFT", "0.9")
    assert (await p.order("MSFT", "buy", "1", limit=below, tif="gtc"))[0] == 200
    status, wash = await p.order("MSFT", "sell", "1")
    assert status == errors["wash_trade"]["status"], wash
    cases.append(Case("errors.json", wash, "wash_trade", checks=errors["wash_trade"]["body"]))
    return cases


def _errors_cases(cases: list[Case]) -> list[str]:
    out = []
    for case in cases:
        body = recorded("errors.json")[str(case.key)]["body"]
        found = differences(body, case.answer) + [
            f"{n}: {case.answer.get(n)!r}, not {v!r}"
            for n, v in case.checks.items()
            if case.answer.get(n) != v
        ]
        out += [f"errors.json {case.key}: {problem}" for problem in found]
    return out


async def test_the_emulators_answers_have_the_fields_and_types_of_alpacas_recorded_ones():
    """Sources: alpaca-py 0.44's fixtures (tests/trading/trading_client/test_account_routes.py,
    test_position_routes.py, test_order_routes.py), Alpaca's asset examples
    (alpaca.markets/docs/api-references/trading-api/assets/, docs.alpaca.markets/reference/
    assets), its OpenAPI order examples (docs.alpaca.markets/eu/openapi/broker-api.json),
    its position example (alpacahq/alpaca-docs data/webapi/entities/position.yaml) and the
    wash-trade refusal of github.com/Petersoj/alpaca-java issue #145."""
    problems: list[str] = []
    async with paper() as p:
        problems += checked(await _cases_in_session(p))
        p.clock.advance_to(WEDNESDAY_PRE_MARKET)
        problems += checked(await _cases_pre_market(p))
        for path, name, key in HISTORY:
            status, answer = await p.get(path)
            assert status == 200, (path, answer)
            wanted = recorded(name, key)
            one = (answer[0], wanted[0]) if isinstance(wanted, list) else (answer, wanted)
            problems += [f"{name}: {d}" for d in differences(one[1], one[0])]
    async with paper() as p:
        problems += checked(await _short_case(p))
        problems += _errors_cases(await _cases_of_errors(p))
    async with paper(account_type="cash") as p:
        status, refused = await p.order("MSFT", "sell", "1")
        assert status == 403, refused
        body = recorded("errors.json")["not_allowed_to_short"]["body"]
        problems += _errors_cases([Case("errors.json", refused, "not_allowed_to_short", body)])
    async with paper(now=SATURDAY) as p:
        assert SATURDAY.astimezone(NEW_YORK).weekday() == 5
        problems += checked(await _cases_while_closed(p))
    assert not problems, "\n".join(problems)


def test_a_missing_field_a_changed_type_and_an_unlisted_extra_are_each_found():
    """The comparison itself, on alpaca-py's recorded account (account.json): each kind of
    difference is reported, and an identical answer has none."""
    account = recorded("account.json")
    assert differences(account, dict(account)) == []
    changed = dict(account, cash=-23140.2, invented=True)
    del changed["sma"]
    assert differences(account, changed) == [
        "cash: recorded decimal text, answered number",
        "sma: recorded, not answered",
        "invented: answered, not in Alpaca's answer",
    ]
    assert differences(account, dict(account, invented=1), {"invented": "why"}) == []
