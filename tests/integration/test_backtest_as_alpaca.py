"""A backtest of maxdiff run "as Alpaca" tells the truth about Alpaca's wash-trade rule (an
order opposite a resting one is refused, 422 code 42210000): its report says one side rests
at a time, and its ledger never rests a buy and a sell of the symbol at once, where the same
run on a venue that allows both does. On the recorded MSFT daily bars (tests/data/README.md:
the bokeh-sampledata Quandl WIKI prices, 2002-2004), with shorting allowed so that a flat
maxdiff wants both entries."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.integration.conftest import clean_env
from tests.recorded import MSFT_1D

pytestmark = pytest.mark.integration
NOTE = "resting both sides of a symbol is forbidden"


def opposite_pairs_resting_at_once(ledger: Path) -> int:
    """Pairs of a buy and a sell limit whose lives (created, then ended at `updated_at`)
    overlap."""
    with sqlite3.connect(ledger) as c:
        rows = c.execute(
            "SELECT side, created_at, updated_at FROM orders WHERE type = 'limit'"
        ).fetchall()
    return sum(
        1
        for i, (side, created, ended) in enumerate(rows)
        for other, created_2, ended_2 in rows[i + 1 :]
        if other != side and created_2 < ended and created < ended_2
    )


@pytest.mark.parametrize(
    ("setting", "forbidden"),
    [
        ({"TRADER_EXCHANGE__VENUE": "alpaca"}, True),
        ({"TRADER_EXCHANGE__RESTING_BOTH_SIDES": "forbidden"}, True),
        ({}, False),
    ],
)
def test_maxdiff_backtested_as_alpaca_never_rests_both_sides(cli, tmp_path, setting, forbidden):
    env = clean_env(
        TRADER_STRATEGY__ALLOW_SHORT="true",
        TRADER_BACKTEST__CACHE_DIR=str(tmp_path / "cache"),
        **setting,
    )
    out = tmp_path / "out"
    done = cli.run(
        "backtest", "--data", str(MSFT_1D), "--model", "baseline", "--strategy", "maxdiff",
        "--out", str(out), "--log-level", "ERROR", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    header = done.stdout.split("strategy ")[0]  # the notes, before the table
    assert (NOTE in header) is forbidden
    pairs = opposite_pairs_resting_at_once(out / "ledgers" / "ledger-maxdiff.sqlite3")
    if forbidden:
        assert pairs == 0
    else:
        assert pairs > 0  # the same run where both may rest does rest both
