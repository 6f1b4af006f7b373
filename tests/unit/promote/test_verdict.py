"""The verdict: each measure against its `[promote]` threshold, a failed one a reason of its
own line, a measure that could not be made a failure (never a pass by default)."""

from __future__ import annotations

from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal, localcontext

import pytest

from trader.config.promote_settings import PromoteSettings
from trader.promote.verdict import Measures, Skill, judge, shortfall_allowed

DEFAULTS = PromoteSettings()
GOOD = Measures(
    days=20, sessions=False, expected_ticks=480, skipped_ticks=3, currency="USDT",
    starting_equity=Decimal(10000), paper_pnl=Decimal("310.50"), replay_pnl=Decimal("350.25"),
    paper_drawdown=0.04, replay_drawdown=0.03,
    skill=Skill("toto", 400, 0.05, 0.02, 0.08, 0.9),
)  # fmt: skip


def test_a_record_that_clears_every_threshold_is_promoted_and_each_measure_is_said():
    verdict = judge(GOOD, DEFAULTS)
    assert verdict.passed
    assert verdict.reasons == []
    assert [line.split(":")[0] for line in verdict.lines] == ["pass"] * 5
    assert verdict.lines[0] == "pass: days traded: 20 (at least 14)"
    assert verdict.lines[1] == "pass: ticks skipped: 3 of 480 (0.62%; at most 5.00%)"
    assert "39.75 USDT" in verdict.lines[2]  # 350.25 - 310.50


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"days": 13}, "days traded: 13 (at least 14)"),
        ({"days": 9, "sessions": True}, "trading sessions traded: 9 (at least 10)"),
        ({"skipped_ticks": 25}, "ticks skipped: 25 of 480 (5.21%; at most 5.00%)"),
        ({"expected_ticks": 0, "skipped_ticks": 0}, "ticks skipped: 0 of 0"),
        ({"paper_pnl": Decimal("150.24")}, "shortfall against the backtest: 200.01 USDT"),
        ({"paper_pnl": None}, "shortfall against the backtest: not measured"),
        ({"skill": Skill("toto", 400, 0.01, -0.01, 0.03, 0.9)}, "interval -0.0100 .. +0.0300"),
        ({"skill": Skill("toto", 29, 0.05, 0.02, 0.08, 0.9)}, "over 29 forecasts"),
        ({"skill": Skill("toto", 0, None, None, None, 0.9)}, "skill against the naive: not"),
        ({"paper_drawdown": 0.0451}, "drawdown: paper 4.51%, replay 3.00% (at most 4.50%"),
        ({"replay_drawdown": None}, "drawdown against the backtest: not measured"),
    ],
)
def test_each_threshold_refuses_alone_with_its_reason(change, reason):
    verdict = judge(replace(GOOD, **change), DEFAULTS)
    assert not verdict.passed
    (said,) = verdict.reasons
    assert said.startswith(reason) or reason in said, said
    assert sum(line.startswith("FAIL: ") for line in verdict.lines) == 1


def test_every_failure_is_listed_one_a_line_with_what_could_not_be_measured():
    bad = replace(GOOD, days=3, skipped_ticks=100, problems=("the replay failed: no bars",))
    verdict = judge(bad, DEFAULTS)
    assert verdict.reasons == [
        "days traded: 3 (at least 14)",
        "ticks skipped: 100 of 480 (20.83%; at most 5.00%)",
        "not measured: the replay failed: no bars",
    ]


def test_the_shortfall_allowed_is_the_larger_of_its_equity_and_profit_shares():
    # 1% of 10,000 = 100; 50% of a replay profit of 350.25 = 175.125 -> 175.12 (the larger, to
    # the cent below whatever rounding the thread's decimal context has).
    assert shortfall_allowed(GOOD, DEFAULTS) == Decimal("175.12")
    with localcontext(rounding=ROUND_HALF_UP):  # as ccxt leaves the thread's context
        assert shortfall_allowed(GOOD, DEFAULTS) == Decimal("175.12")
    assert shortfall_allowed(replace(GOOD, replay_pnl=Decimal(-50)), DEFAULTS) == Decimal(100)
    at_limit = replace(GOOD, paper_pnl=GOOD.replay_pnl - Decimal("175.12"))
    assert judge(at_limit, DEFAULTS).passed
    over = replace(GOOD, paper_pnl=GOOD.replay_pnl - Decimal("175.13"))
    assert not judge(over, DEFAULTS).passed
    # Paper beating its replay is no shortfall.
    assert judge(replace(GOOD, paper_pnl=Decimal(900)), DEFAULTS).passed


def test_a_replay_that_barely_drew_down_allows_its_drawdown_plus_the_allowance():
    shallow = replace(GOOD, replay_drawdown=0.001, paper_drawdown=0.006)
    assert judge(shallow, DEFAULTS).passed  # 0.1% + 0.5% beats 1.5 x 0.1%
    assert not judge(replace(shallow, paper_drawdown=0.0061), DEFAULTS).passed


def test_thresholds_are_settings():
    strict = PromoteSettings(min_days=30, max_skipped_share=0.001, min_skill=0.03)
    verdict = judge(GOOD, strict)
    assert len(verdict.reasons) == 3
    loose = PromoteSettings(min_days=1, min_skill=-0.5)
    assert judge(replace(GOOD, days=1, skill=Skill("t", 40, 0.0, -0.1, 0.1, 0.9)), loose).passed
