"""A strategy that made no trade is named first in "Read this first", with why, counted from the
reasons its decisions gave (the ledger's `decisions`), the orders it sent that never filled,
the orders the risk checks refused and the ticks it skipped. It does not fail the run by
itself: not trading may be right. Real recorded bars: tests/data (SOL/USDT 1h)."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.recorded import SOLUSDT_1H, SOLUSDT_1H_2022
from trader.backtest.findings import findings
from trader.backtest.prepare import WHOLE, Period
from trader.backtest.run import Backtest, run_backtest
from trader.config.schema import Settings
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration

ROWS = 1500  # of SOLUSDT_1H: 989 ticks after the default 512 bars of context


def settings(tmp_path: Path, **sections: dict[str, object]) -> Settings:
    values: dict[str, dict[str, object]] = {
        "forecast": {"model": "baseline"},  # the rest as `trader backtest` has them
        "backtest": {"cache_dir": tmp_path / "cache"},
    }
    for name, section in sections.items():
        values[name] = values.get(name, {}) | section
    return Settings(**values)


def backtest(
    s: Settings, path: Path, strategies: list[str], ledgers: Path, period: Period = WHOLE
) -> Backtest:
    recording = read_recording(path, "SOL/USDT")
    if path == SOLUSDT_1H:
        recording = replace(recording, rows=recording.rows[:ROWS])
    return asyncio.run(
        run_backtest(
            s, {"SOL/USDT": recording}, strategies=strategies, period=period, ledgers=ledgers
        )
    )


def decisions(ledger: Path, like: str) -> int:
    with sqlite3.connect(ledger) as c:
        return c.execute("SELECT count(*) FROM decisions WHERE reason LIKE ?", (like,)).fetchone()[
            0
        ]


def counted(text: str, what: str) -> int:
    """The count a finding gives for `what`: `what at 1,234 of ...` or `what at all 1,234 ...`."""
    found = re.search(re.escape(what) + r" at (?:all )?([\d,]+)", text)
    assert found, f"{what!r} not in {text!r}"
    return int(found.group(1).replace(",", ""))


def test_a_strategy_whose_band_is_never_cleared_is_named_first_with_its_counts(tmp_path):
    # A band twenty times as wide as ci_guard's default: the forecast never clears it.
    s = settings(tmp_path, strategy={"ci_multiplier": 20.0})
    ledgers = tmp_path / "ledgers"
    result = backtest(s, SOLUSDT_1H, ["simple", "ci_guard", "maxdiff"], ledgers)
    ticks = len(result.ticks_ms)
    found = findings(result)
    traded = {st for st, run in result.runs.items() if run.fills}
    assert "maxdiff" in traded  # the one that trades is not named
    named = [f for f in found if ": 0 trades: " in f.text]
    assert [f.text.split(":")[0] for f in named] == [s for s in result.runs if s not in traded]
    assert found[: len(named)] == named  # the first thing said
    assert not any(f.fails for f in named)  # not trading may be right: the run still passes

    (guard,) = [f.text for f in named if f.text.startswith("ci_guard")]
    inside = decisions(
        ledgers / "ledger-ci_guard.sqlite3", "no trade: forecast % inside its band %"
    )
    assert inside == ticks  # every tick, by the ledger's own rows
    assert (
        guard == f"ci_guard: 0 trades: the forecast stayed inside its band at all {ticks:,} ticks"
    )

    # simple: no band, but the risk checks' minimum edge and its long-only stance; every tick
    # is one of these, and each count is the ledger's.
    (simple,) = [f.text for f in named if f.text.startswith("simple")]
    ledger = ledgers / "ledger-simple.sqlite3"
    down = decisions(ledger, "no trade: median forecast return % (long only)")
    flat = decisions(ledger, "no trade: median forecast return % (no move)")
    wanted = decisions(ledger, "median forecast return % > %")
    assert counted(simple, "the forecast was down and shorting is off") == down
    assert counted(simple, "it wanted a position") == wanted
    assert f"refused the orders it wanted, by min_edge {wanted:,}" in simple
    if flat:
        assert counted(simple, "the forecast had no move") == flat
    assert down + flat + wanted == ticks
    assert "'" not in simple  # every reason it gave is one the table knows, said in words


def test_limits_that_rest_and_are_never_reached_are_said_as_such(tmp_path):
    # maxdiff with its limits at the forecast's 0.1% and 99.9% levels, over four calm weeks of
    # early 2023 (SOLUSDT_1h_2022): it rests a buy every tick, and none is reached.
    levels = [0.001, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.999]
    s = settings(
        tmp_path,
        forecast={"quantiles": levels},
        strategy={"maxdiff_entry_quantile": 0.001, "maxdiff_exit_quantile": 0.999},
    )
    ledgers = tmp_path / "ledgers"
    # `--from 2023-01-25 --to 2023-02-08`: the whole of the last day.
    period = Period(datetime(2023, 1, 25, tzinfo=UTC), datetime(2023, 2, 9, tzinfo=UTC))
    period = replace(period, end=period.end - timedelta(milliseconds=1))
    result = backtest(s, SOLUSDT_1H_2022, ["maxdiff"], ledgers, period)
    ticks = len(result.ticks_ms)
    (first, *_) = findings(result)
    with sqlite3.connect(ledgers / "ledger-maxdiff.sqlite3") as c:
        statuses = dict(c.execute("SELECT status, count(*) FROM orders GROUP BY status"))
    assert "filled" not in statuses
    orders = sum(statuses.values())
    assert orders == ticks  # a buy rested at every tick, placed afresh
    said = ", ".join(f"{k} {v:,}" for k, v in sorted(statuses.items(), key=lambda kv: -kv[1]))
    assert first.text == (
        f"maxdiff: 0 trades: it wanted a position at all {ticks:,} ticks, but no fill: its "
        f"limits were never reached ({orders:,} orders: {said})"
    )
    assert not first.fails
