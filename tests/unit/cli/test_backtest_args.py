"""`trader backtest --strategy`: several strategies, written either way a user writes them."""

from __future__ import annotations

import pytest

from trader.cli import build_parser


@pytest.mark.parametrize(
    "words",
    [["--strategy", "simple", "maxdiff"], ["--strategy", "simple", "--strategy", "maxdiff"]],
    ids=["listed", "repeated"],
)
def test_every_strategy_named_is_run(words):
    args = build_parser().parse_args(["backtest", "--data", "bars.csv", *words])
    assert args.strategy == ["simple", "maxdiff"]


def test_no_strategy_named_leaves_the_settings_to_decide():
    assert build_parser().parse_args(["backtest", "--data", "bars.csv"]).strategy is None
