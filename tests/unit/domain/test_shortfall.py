"""The shortfall attribution: each cause lands in its own part with the size worked out by hand
(the arithmetic is in each test), identical runs give zeros, and for random runs the parts add
up exactly to the difference of the equities the real `Portfolio` books."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.domain.shortfall_cases import SOL, end_equity, order, period, record, tick
from trader.domain import DomainError, Liquidity, Side
from trader.domain.shortfall import Attribution, Part, attribute, implied_pnl
from trader.domain.shortfall_records import (
    OrderRecord,
    Period,
    RiskAction,
    RiskActionKind,
    TickRecord,
    TickStatus,
)

D = Decimal
BUY, SELL = Side.BUY, Side.SELL


def moved(attribution: Attribution) -> dict[Part, Decimal]:
    """The parts that are not zero; and a check that all parts add up to the difference."""
    assert sum(attribution.parts.values(), D(0)) == attribution.difference
    assert list(attribution.parts) == list(Part)
    return {part: value for part, value in attribution.parts.items() if value}


def buy_at_100(price: str = "100.1", fee: str = "0", amount: str = "1", n: int = 0):
    """A market buy decided on the quote 99.9/100.1 (mid 100, half-spread 0.1)."""
    return record(order(n, BUY, amount), "99.9", "100.1", [(price, amount, fee)])


def test_identical_runs_differ_in_no_part():
    runs = [
        buy_at_100(fee="0.1001"),
        record(order(1, SELL, "0.4"), "104.9", "105.1",
               [("104.9", "0.25", "0.02"), ("104.8", "0.15", "0.01")]),
    ]  # fmt: skip
    result = attribute(period(runs, runs, end={SOL: "107"}))
    assert result.difference == 0
    assert moved(result) == {}
    assert result.remainder_reason is None
    assert result.actual_pnl == result.modelled_pnl != 0


def test_a_wider_spread_is_the_spread_part():
    # Modelled: buys 1 at the ask 100.1 of 99.9/100.1, worth 110 at the end: 9.9.
    # Actual: the real quote was 99.8/100.2 (same mid 100), bought at its ask 100.2: 9.8.
    # Spread = -1 * (0.2 - 0.1) = -0.1, all of the difference.
    actual = record(order(0, BUY, "1"), "99.8", "100.2", [("100.2", "1", "0")])
    result = attribute(period([buy_at_100()], [actual], end={SOL: "110"}))
    assert result.difference == D("-0.1")
    assert moved(result) == {Part.SPREAD: D("-0.1")}


def test_higher_fees_are_the_fees_part():
    # Same fill; the venue charged 0.10 where the model charged 0.05.
    result = attribute(period([buy_at_100(fee="0.05")], [buy_at_100(fee="0.10")], end={SOL: "110"}))
    assert moved(result) == {Part.FEES: D("-0.05")}


def test_the_move_between_decision_and_fill_is_the_delay_part():
    # Decided at mid 100; by the fill the mid was 100.5 and the buy paid its ask 100.6.
    # Delay = -1 * (100.5 - 100) = -0.5; slippage = -((100.6 - 100) - 0.1 - 0.5) = 0.
    actual = record(order(0, BUY, "1"), "99.9", "100.1", [("100.6", "1", "0")], mids=["100.5"])
    result = attribute(period([buy_at_100()], [actual], end={SOL: "110"}))
    assert moved(result) == {Part.DELAY: D("-0.5")}
    # A sell decided at mid 100 filled at 99.4 when the mid had fallen to 99.5: the fall is
    # the delay, -(-1 * (99.5 - 100)) = -0.5; r = -(99.4 - 100) - 0.1 - 0.5 = 0.
    model = record(order(0, SELL, "1"), "99.9", "100.1", [("99.9", "1", "0")], mids=["100"])
    real = record(order(0, SELL, "1"), "99.9", "100.1", [("99.4", "1", "0")], mids=["99.5"])
    result = attribute(period([model], [real], end={SOL: "90"}))
    assert moved(result) == {Part.DELAY: D("-0.5")}


def test_a_price_beyond_the_touch_is_the_slippage_part_on_either_side():
    # A buy at 100.15 with the mid still 100: slippage = -((100.15 - 100) - 0.1 - 0) = -0.05.
    actual = record(order(0, BUY, "1"), "99.9", "100.1", [("100.15", "1", "0")], mids=["100"])
    result = attribute(period([buy_at_100()], [actual], end={SOL: "110"}))
    assert moved(result) == {Part.SLIPPAGE: D("-0.05")}
    # A sell of 1 at 99.85 against the model's bid 99.9: r = -(99.85 - 100) - 0.1 = 0.05,
    # so slippage = -(0.05 - 0) = -0.05; P&L: -(90 - 99.85) - -(90 - 99.9) = -0.05.
    model = record(order(0, SELL, "1"), "99.9", "100.1", [("99.9", "1", "0")])
    real = record(order(0, SELL, "1"), "99.9", "100.1", [("99.85", "1", "0")])
    result = attribute(period([model], [real], end={SOL: "90"}))
    assert moved(result) == {Part.SLIPPAGE: D("-0.05")}


def test_a_quote_the_model_did_not_see_is_the_quote_part_or_the_late_ticks_part():
    # The real quote at the decision was 100.4/100.6 (mid 100.5) where the model's was
    # 99.9/100.1: -1 * (100.5 - 100) = -0.5, paid at the real ask 100.6 (no spread change).
    actual = record(order(0, BUY, "1"), "100.4", "100.6", [("100.6", "1", "0")])
    on_time = attribute(period([buy_at_100()], [actual], end={SOL: "110"}))
    assert moved(on_time) == {Part.QUOTE: D("-0.5")}
    # The same, at a tick the daemon ran late: the later quote is the late tick's.
    late = attribute(period([buy_at_100()], [actual], end={SOL: "110"}, ticks={0: TickStatus.LATE}))
    assert moved(late) == {Part.LATE_TICKS: D("-0.5")}


def test_a_fill_the_venue_did_not_give_is_the_missed_part():
    # The model bought 1 at 100.1 with a 0.1 fee, worth 110: 9.9 - 0.1 = 9.8, all missed.
    unfilled = record(order(0, BUY, "1"), "99.9", "100.1")
    result = attribute(period([buy_at_100(fee="0.1")], [unfilled], end={SOL: "110"}))
    assert moved(result) == {Part.MISSED_FILLS: D("-9.8")}


def test_a_partial_fill_is_the_partial_part_and_its_fee_is_shared_pro_rata():
    # Model: 2 at 100.1, fee 0.2. Actual: 0.5 at 100.1, fee 0.05. The first 0.5 units of each
    # compare equal (the model's fee share 0.2 * 0.5 / 2 = 0.05); the model's other 1.5 units
    # made 1.5 * (110 - 100.1) - 0.15 = 14.70, which the actual run did not.
    model = buy_at_100(amount="2", fee="0.2")
    actual = record(order(0, BUY, "2"), "99.9", "100.1", [("100.1", "0.5", "0.05")])
    result = attribute(period([model], [actual], end={SOL: "110"}))
    assert moved(result) == {Part.PARTIAL_FILLS: D("-14.70")}


def test_an_order_cut_by_the_risk_checks_and_then_partly_filled_splits_between_the_two():
    # Model: 2 at 100.1, fee 0.2. Actual: cut to 1, of which 0.5 filled at 100.1, fee 0.05.
    # sigma = 1 - 2 = -1 (risk), phi = 0 - 0.5 = -0.5 (partial). The model's units beyond
    # the compared 0.5 are 1.5 (fee 0.15): the first 1 (fee 0.1) is the risk part,
    # -(9.9 - 0.1) = -9.8; the next 0.5 (fee 0.05) partial, -(4.95 - 0.05) = -4.9.
    cut = RiskAction(tick(0), SOL, RiskActionKind.REDUCED, "max_position")
    actual = record(order(0, BUY, "1"), "99.9", "100.1", [("100.1", "0.5", "0.05")])
    model = buy_at_100(amount="2", fee="0.2")
    result = attribute(period([model], [actual], end={SOL: "110"}, risk=[cut]))
    assert moved(result) == {Part.RISK_ACTIONS: D("-9.8"), Part.PARTIAL_FILLS: D("-4.9")}
    # Sized up to 2 but filled only 0.5 where the model filled its 1: sigma = +1 and
    # phi = 0 - 1.5 = -1.5 pull apart; the net 0.5 units (fee 0.05) are the partial fill's.
    actual = record(order(0, BUY, "2"), "99.9", "100.1", [("100.1", "0.5", "0.05")])
    result = attribute(period([buy_at_100(fee="0.1")], [actual], end={SOL: "110"}))
    assert moved(result) == {Part.PARTIAL_FILLS: D("-4.9")}


def test_a_limit_fill_the_model_did_not_expect_is_the_extra_part():
    # The model's limit buy at 99 never filled; the venue filled it (maker fee 0.0099):
    # 1 * (110 - 99) - 0.0099 = 10.9901 more.
    model = record(order(0, BUY, "1", limit="99"), "99.9", "100.1")
    actual = record(
        order(0, BUY, "1", limit="99"), "99.9", "100.1", [("99", "1", "0.0099")],
        liquidity=Liquidity.MAKER,
    )  # fmt: skip
    result = attribute(period([model], [actual], end={SOL: "110"}))
    assert moved(result) == {Part.EXTRA_FILLS: D("10.9901")}


def test_a_skipped_tick_and_what_followed_from_it_are_the_skipped_part():
    # The daemon skipped tick 0, where the model bought 1 at 100.1; at tick 2 the model sold
    # it at 104.9 and the daemon, holding nothing, had nothing to sell. Skipped:
    # -(107 - 100.1) for the buy, +(107 - 104.9) for the sell it then did not make = -4.8,
    # the model's round trip.
    model = [buy_at_100(), record(order(2, SELL, "1"), "104.9", "105.1", [("104.9", "1", "0")])]
    result = attribute(
        period(model, [], end={SOL: "107"}, ticks={1: TickStatus.RAN, 2: TickStatus.RAN})
    )
    assert result.difference == D("-4.8")
    assert moved(result) == {Part.SKIPPED_TICKS: D("-4.8")}


def test_a_skipped_buy_caught_up_a_tick_later_costs_the_skipped_part_the_move_between():
    # Skipped at tick 0 (model bought at 100.1); the daemon bought at tick 1 at 102.1:
    # -(107 - 100.1) + (107 - 102.1) = -2.0, not an extra fill or a sizing difference.
    caught_up = record(order(1, BUY, "1", leg="catch-up"), "101.9", "102.1", [("102.1", "1", "0")])
    result = attribute(
        period([buy_at_100()], [caught_up], end={SOL: "107"}, ticks={0: TickStatus.SKIPPED})
    )
    assert moved(result) == {Part.SKIPPED_TICKS: D("-2.0")}


def test_an_order_at_a_halted_tick_is_the_halts_part():
    result = attribute(period([buy_at_100()], [], end={SOL: "110"}, ticks={0: TickStatus.HALTED}))
    assert moved(result) == {Part.HALTS: D("-9.9")}  # -(110 - 100.1)


def test_an_order_the_risk_checks_refused_or_cut_is_the_risk_part():
    refused = RiskAction(tick(0), SOL, RiskActionKind.REFUSED, "max_position")
    result = attribute(
        period([buy_at_100()], [], end={SOL: "110"}, ticks={0: TickStatus.RAN}, risk=[refused])
    )
    assert moved(result) == {Part.RISK_ACTIONS: D("-9.9")}
    # Cut from 2 to 1: the model's second unit, 110 - 100.1 = 9.9, is the risk checks'.
    cut = RiskAction(tick(0), SOL, RiskActionKind.REDUCED, "max_position")
    result = attribute(
        period([buy_at_100(amount="2")], [buy_at_100()], end={SOL: "110"}, risk=[cut])
    )
    assert moved(result) == {Part.RISK_ACTIONS: D("-9.9")}
    # The same cut with no risk action recorded is a sizing difference.
    result = attribute(period([buy_at_100(amount="2")], [buy_at_100()], end={SOL: "110"}))
    assert moved(result) == {Part.SIZING: D("-9.9")}


def test_an_order_only_the_daemon_sized_is_the_sizing_part():
    # Nothing opened a position gap: the daemon's 0.5 at 100.1 made 0.5 * 9.9 = 4.95 more.
    result = attribute(period([], [buy_at_100(amount="0.5")], end={SOL: "110"}))
    assert moved(result) == {Part.SIZING: D("4.95")}


def test_different_starting_positions_and_their_unwinding_are_the_starting_part():
    # The model started with 1 SOL (mark 100), the daemon flat; the model sold it at tick 0
    # at 104.9 and the daemon had nothing to sell. -(107 - 100) + (107 - 104.9) = -4.9.
    model = [record(order(0, SELL, "1"), "104.9", "105.1", [("104.9", "1", "0")])]
    result = attribute(
        period(
            model, [], end={SOL: "107"}, ticks={0: TickStatus.RAN},
            start_positions=({SOL: D(1)}, {}), start_marks={SOL: "100"},
        )
    )  # fmt: skip
    assert result.modelled_pnl == D("4.9")
    assert moved(result) == {Part.STARTING_POSITIONS: D("-4.9")}


def test_a_fee_taken_in_the_base_asset_costs_its_amount_at_the_end_mark():
    # 0.002 SOL against 0.001 SOL, the position that much smaller at 110: -0.001 * 110.
    model = record(order(0, BUY, "1"), "99.9", "100.1", [("100.1", "1", "0.001", "SOL")])
    actual = record(order(0, BUY, "1"), "99.9", "100.1", [("100.1", "1", "0.002", "SOL")])
    result = attribute(period([model], [actual], end={SOL: "110"}))
    assert moved(result) == {Part.FEES: D("-0.11")}


def test_equity_the_fills_do_not_explain_is_the_remainder_and_says_so():
    actual = record(order(0, BUY, "1"), "99.8", "100.2", [("100.2", "1", "0")])
    result = attribute(period([buy_at_100()], [actual], end={SOL: "110"}, drift=D("1.23")))
    assert moved(result) == {Part.SPREAD: D("-0.1"), Part.REMAINDER: D("1.23")}
    assert result.remainder_reason is not None
    assert "actual run's equity moved 1.23 USDT" in result.remainder_reason
    assert "modelled" not in result.remainder_reason.split("(")[0]
    written = json.loads(json.dumps(result.as_dict()))
    assert written["parts"]["remainder"] == "1.23"
    assert written["difference"] == str(result.difference) == "1.13"
    assert written["orders"][0]["parts"] == {"spread": "-0.1"}


def test_each_order_says_what_it_added_and_the_orders_add_up_to_the_parts():
    model = [buy_at_100(), record(order(2, SELL, "1"), "104.9", "105.1", [("104.9", "1", "0")])]
    actual = [record(order(2, SELL, "1"), "104.8", "105.2", [("104.8", "1", "0.1")])]
    result = attribute(period(model, actual, end={SOL: "107"}, ticks={0: TickStatus.SKIPPED}))
    by_key = {share.key: share for share in result.orders}
    assert [share.decided_at for share in result.orders] == [tick(0), tick(2)]
    # Tick 0: skipped, -(107 - 100.1). Tick 2: the model sold what it had; the daemon sold
    # short 1 at 104.8 (half-spread 0.2 against 0.1: -0.1; fee -0.1) and, compared unit
    # for unit, that is all the second order adds: the skip left the daemon flat, which is a
    # position difference the short did not close (both sold 1).
    assert by_key[model[0].key].parts == {Part.SKIPPED_TICKS: D("-6.9")}
    assert by_key[actual[0].key].parts == {Part.SPREAD: D("-0.1"), Part.FEES: D("-0.1")}
    total = {part: D(0) for part in Part}
    for share in result.orders:
        for part, value in share.parts.items():
            total[part] += value
    assert total == dict(result.parts)


def test_the_implied_pnl_of_a_run_is_its_booked_equity_change():
    runs = [
        buy_at_100(fee="0.3"),
        record(order(1, SELL, "0.5"), "101", "102", [("101", "0.5", "0.1")]),
    ]
    start, end = end_equity(runs, D(10_000), {SOL: D("103")})
    built = period(runs, [], end={SOL: "103"})
    # 1 * (103 - 100.1) - 0.3 - 0.5 * (103 - 101) - 0.1 = 2.9 - 0.3 - 1.0 - 0.1 = 1.5
    assert implied_pnl(built.modelled, built) == end - start == D("1.5")


@pytest.mark.parametrize(
    ("problem", "make"),
    [
        (
            "not the same decision",
            lambda: period(
                [buy_at_100()], [record(order(0, SELL, "1"), "99.9", "100.1")], end={SOL: "110"}
            ),
        ),
        (
            "no record of running",
            lambda: period([], [buy_at_100()], end={SOL: "110"}, ticks={0: TickStatus.SKIPPED}),
        ),
    ],
)  # fmt: skip
def test_runs_that_cannot_be_compared_are_refused_with_the_reason(problem, make):
    with pytest.raises(DomainError, match=problem):
        attribute(make())


# --- random runs: the parts always add up to the booked difference -------------------------

BTC = "BTC/USDT"
money = st.decimals(min_value=D("0.01"), max_value=D(1000), places=2)
units = st.decimals(min_value=D("0.001"), max_value=D(5), places=3)
fees = st.decimals(min_value=D(0), max_value=D("0.5"), places=6)
sides = st.sampled_from(list(Side))
NO_DRIFT = D(0)


@st.composite
def fill_records(draw: st.DrawFn, n: int, at: int, symbol: str, side: Side) -> OrderRecord:
    """One order of a run: a quote around a mid, up to 3 fills at any prices, any fees (in
    cash or in the base asset), a mid measured at some fills, some of the amount unfilled."""
    filled = draw(st.lists(st.tuples(money, units, fees, st.booleans()), max_size=3))
    unfilled = draw(st.sampled_from([D(0), D("0.5"), D(2)]))
    amount = sum((q for _, q, _, _ in filled), D(0)) + unfilled or D(1)
    limit = draw(st.one_of(st.none(), money))
    mid, half = draw(money) + 1, draw(st.decimals(min_value=D(0), max_value=D(1), places=3))
    return record(
        order(at, side, str(amount), symbol=symbol, leg=f"leg{n}",
              limit=None if limit is None else str(limit)),
        str(mid - half), str(mid + half),
        [(str(p), str(q), str(f), symbol.split("/", maxsplit=1)[0] if base else "USDT")
         for p, q, f, base in filled],
        mids=[str(draw(money)) if draw(st.booleans()) else None for _ in filled],
    )  # fmt: skip


@st.composite
def random_periods(draw: st.DrawFn, drift: Decimal = NO_DRIFT) -> Period:
    statuses = {t: draw(st.sampled_from(list(TickStatus))) for t in range(4)}
    modelled: list[OrderRecord] = []
    actual: list[OrderRecord] = []
    risk: list[RiskAction] = []
    for n in range(draw(st.integers(0, 7))):
        at, symbol, side = draw(st.integers(0, 3)), draw(st.sampled_from([SOL, BTC])), draw(sides)
        ran = statuses[at] is not TickStatus.SKIPPED
        presence = draw(st.sampled_from(["both", "modelled", "actual"] if ran else ["modelled"]))
        if presence != "actual":
            modelled.append(draw(fill_records(n, at, symbol, side)))
        if presence != "modelled":
            actual.append(draw(fill_records(n, at, symbol, side)))
        if draw(st.booleans()):
            risk.append(RiskAction(tick(at), symbol, RiskActionKind.REFUSED, "max_position"))
    start = {s: draw(st.sampled_from([D(0), D(1), D("-0.5")])) for s in (SOL, BTC)}
    return period(
        modelled, actual,
        end={SOL: str(draw(money)), BTC: str(draw(money))}, ticks=statuses, risk=risk,
        start_positions=({SOL: start[SOL]}, {BTC: start[BTC]}),
        start_marks={SOL: str(draw(money)), BTC: str(draw(money))}, drift=drift,
    )  # fmt: skip


@given(random_periods())
def test_for_random_runs_the_parts_add_up_exactly_to_the_booked_difference(built):
    result = attribute(built)
    booked = (built.actual.end_equity - built.actual.start_equity) - (
        built.modelled.end_equity - built.modelled.start_equity
    )
    assert result.difference == booked
    assert sum(result.parts.values(), D(0)) == booked
    # Nothing is left over: the equities are the portfolio's, which the fills explain.
    assert result.parts[Part.REMAINDER] == 0
    assert result.remainder_reason is None
    total = dict.fromkeys(Part, D(0))
    for share in result.orders:
        for part, value in share.parts.items():
            total[part] += value
    total[Part.STARTING_POSITIONS] = result.parts[Part.STARTING_POSITIONS]  # of no order
    assert total == dict(result.parts)


@given(random_periods(drift=D("0.01")))
def test_for_random_runs_money_the_fills_do_not_explain_is_the_remainder_to_the_cent(built):
    result = attribute(built)
    assert result.parts[Part.REMAINDER] == D("0.01")
    assert sum(result.parts.values(), D(0)) == result.difference


@given(random_periods())
def test_for_random_runs_compared_with_themselves_every_part_is_zero(built):
    # `random_periods` records every tick of the actual run; here each one ran on time.
    ran = tuple(TickRecord(t.at, TickStatus.RAN, t.at) for t in built.actual_ticks)
    itself = Period(
        built.currency, built.start_marks, built.end_marks, built.modelled, built.modelled, ran
    )
    result = attribute(itself)
    assert result.difference == 0
    assert all(value == 0 for value in result.parts.values())
