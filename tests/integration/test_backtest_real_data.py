"""Backtests on the data people have: a stock on trading days, FX on weekdays, an A-share
market with a lunch break, and crypto with a candle missing, bad bars, rows reversed or
shuffled. Each is checked for its ticks, trades, annualisation and what the summary says
first, not only that it runs. Real recorded bars: tests/data and the files the `backtesting`
package ships."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import random
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import backtesting
import numpy as np
import pytest

from tests.integration.conftest import clean_env
from tests.recorded import SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.backtest.findings import findings
from trader.backtest.prepare import Period
from trader.backtest.run import BUY_AND_HOLD, Backtest, run_backtest
from trader.config.schema import Settings
from trader.market.replay import Recording, read_recording

pytestmark = pytest.mark.integration

PACKAGED = Path(backtesting.__file__).parent / "test"
CONTEXT = 64


def settings(tmp_path: Path, **sections: dict[str, object]) -> Settings:
    values: dict[str, dict[str, object]] = {
        "market": {"context_bars": CONTEXT, "min_contiguous_bars": 16},
        "forecast": {"model": "baseline", "baseline_lookback": 32},
        "backtest": {"cache_dir": tmp_path / "cache"},
    }
    for name, section in sections.items():
        values[name] = values.get(name, {}) | section
    return Settings(**values)


WHOLE = Period()


def run(
    s: Settings,
    recording: Recording,
    strategies: list[str],
    period: Period = WHOLE,
    ledgers: Path | None = None,
) -> Backtest:
    return asyncio.run(
        run_backtest(
            s, {recording.symbol: recording}, strategies=strategies, period=period,
            ledgers=ledgers,
        )
    )  # fmt: skip


def line(result: Backtest, strategy: str) -> object:
    (found,) = [x for x in result.lines if x.strategy == strategy]
    return found


def skipped(result: Backtest, strategy: str) -> dict[str, int]:
    run_ = result.runs[strategy]
    return dict(run_.skipped_by_symbol[result.symbols[0]])


def test_a_stock_trades_on_its_exchanges_days_and_is_annualised_by_them(tmp_path):
    goog = read_recording(PACKAGED / "GOOG.csv", "GOOG/USD")
    result = run(settings(tmp_path), goog, ["maxdiff"], ledgers=tmp_path / "ledgers")
    assert result.settings.broker.currency == "USD"  # the account follows the symbol's quote
    assert result.annualisation.calendar == "XNYS"
    # 2,517 sessions in 2004-2013 over 10 years: weekends and holidays are no bars at all.
    assert result.annualisation.periods_per_year == pytest.approx(251.7)
    # A tick at every trading day's close once the first window is full: 2,148 - 64 + 1.
    assert len(result.ticks_ms) == len(goog.rows) - CONTEXT + 1
    days = {datetime.fromtimestamp(t / 1000, UTC).weekday() for t in result.ticks_ms}
    assert days == {1, 2, 3, 4, 5}  # the close of Monday's bar .. Friday's (00:00 next day)
    assert skipped(result, "maxdiff") == {}
    assert [f.text for f in findings(result)] == []
    maxdiff = line(result, "maxdiff")
    assert maxdiff.trades.trades > 50
    assert maxdiff.performance.years == pytest.approx(len(result.ticks_ms) / 251.7)
    hold = line(result, BUY_AND_HOLD)
    assert hold.performance.periods == len(result.ticks_ms)
    assert result.held_from == {"GOOG/USD": int(result.ticks_ms[0])}
    # maxdiff's orders are valid for the forecast's one bar of trading time: Friday's order
    # expires with Monday's bar (not on Saturday), and no bar that opened after an order
    # expired ever filled it.
    with sqlite3.connect(result.runs["maxdiff"].ledger) as c:
        expiry = dict(c.execute("SELECT client_order_id, expires_at FROM orders"))
    fills = [f for f in result.runs["maxdiff"].fills if expiry.get(f.client_order_id)]
    assert len(fills) > 50
    for fill in fills:
        bar_start = fill.at - timedelta(days=1)  # a bar's fill is booked at its close
        assert bar_start < datetime.fromisoformat(expiry[fill.client_order_id])
    weekdays = {datetime.fromisoformat(e).weekday() for e in expiry.values() if e}
    assert weekdays == {1, 2, 3, 4, 5}  # the close of Monday's .. Friday's bar: never Sunday


def test_fx_trades_sunday_evening_to_friday_evening_new_york(tmp_path):
    eurusd = read_recording(PACKAGED / "EURUSD.csv")
    assert eurusd.symbol == "EUR/USD"
    whole = run(settings(tmp_path), eurusd, [])  # buy-and-hold alone: every tick, cheaply
    assert whole.annualisation.calendar == "fx"
    assert whole.annualisation.periods_per_year == pytest.approx(259 * 24)
    # Every bar of the file is a tick but two stray Friday 21:00 bars outside the sessions.
    strays = [
        datetime(2017, 10, 6, 21, tzinfo=UTC).timestamp(),
        datetime(2017, 10, 20, 21, tzinfo=UTC).timestamp(),
    ]
    ends = [row[0] + 3_600_000 for row in eurusd.rows if row[0] / 1000 not in strays]
    assert whole.ticks_ms.tolist() == ends[CONTEXT - 1 :]
    result = run(
        settings(tmp_path),
        eurusd,
        ["maxdiff"],
        Period(datetime(2017, 11, 1, tzinfo=UTC), datetime(2017, 12, 31, tzinfo=UTC)),
    )
    assert skipped(result, "maxdiff") == {}  # no weekend, no Christmas Day is a gap
    assert line(result, "maxdiff").trades.trades > 0
    assert result.settings.broker.currency == "USD"


def test_an_a_share_market_with_a_lunch_break_ticks_only_in_its_sessions(tmp_path):
    recording = read_recording(XSHG_600977_5MIN, "600977/CNY")
    result = run(settings(tmp_path), recording, ["maxdiff"])
    assert result.annualisation.calendar == "XSHG"
    assert result.annualisation.periods_per_year == pytest.approx(242 * 48)
    assert result.settings.broker.currency == "CNY"
    assert len(result.ticks_ms) == len(recording.rows) - CONTEXT + 1
    assert skipped(result, "maxdiff") == {}  # the lunch break and the nights are no gaps
    shanghai = ZoneInfo("Asia/Shanghai")
    closes = {datetime.fromtimestamp(t / 1000, shanghai).time() for t in result.ticks_ms}
    morning = {c for c in closes if c <= time(11, 30)}
    assert min(morning) == time(9, 35)
    assert max(morning) == time(11, 30)
    assert min(closes - morning) == time(13, 5)
    assert max(closes) == time(15, 0)
    assert line(result, "maxdiff").trades.trades > 0
    notes = " ".join(result.notes)
    assert "XSHG inferred" in notes
    assert "Asia/Shanghai" in notes


def corrupted(recording: Recording) -> tuple[Recording, dict[str, int]]:
    """A candle removed, a NaN close and a bar whose high is below its low."""
    rows = list(recording.rows)
    rows[700] = (*rows[700][:4], math.nan, *rows[700][5:])
    t, o, h, lo, c, v, q = rows[1200]
    rows[1200] = (t, o, lo * 0.99, h, c, v, q)
    del rows[1000]
    return replace(recording, rows=rows), {"invalid_bar": 1, "inconsistent_bar": 1}


def test_a_missing_candle_and_bad_bars_cost_a_few_ticks_each_and_say_so(tmp_path):
    sol = read_recording(SOLUSDT_1H_2022)
    bad, reasons = corrupted(sol)
    result = run(settings(tmp_path), bad, ["simple"])
    # The missing candle's close is still a tick (the market had that hour).
    assert len(result.ticks_ms) == len(sol.rows) - CONTEXT + 1
    # Each hole skips its own tick, then the 15 ticks before 16 bars are in a row again.
    assert skipped(result, "simple") == {"stale_bars": 1, **reasons, "gap": 45}
    (first, *_) = findings(result)
    assert first.text.startswith(
        f"SOL/USDT: 48 of {len(result.ticks_ms):,} ticks skipped (2.5%) in every strategy"
    )
    assert not first.fails
    strict = run(settings(tmp_path, backtest={"max_skipped_share": 0.01}), bad, ["simple"])
    assert findings(strict)[0].fails
    assert "more than backtest.max_skipped_share (1%)" in findings(strict)[0].text
    # Bridging the holes trades at once after each.
    bridged = run(settings(tmp_path, market={"gap_policy": "bridge"}), bad, ["simple"])
    assert skipped(bridged, "simple") == {"stale_bars": 1, **reasons}


def test_reversed_and_shuffled_files_give_the_same_run_and_the_shuffle_is_told(tmp_path):
    source = SOLUSDT_1H_2022
    header, *rows = gzip.decompress(source.read_bytes()).decode().splitlines()
    ordered = rows[:600]
    shuffled = list(ordered)
    random.Random(7).shuffle(shuffled)  # noqa: S311 - a fixed shuffle, not a secret
    files = {}
    for name, body in (("in_order", ordered), ("reversed", ordered[::-1]), ("shuffled", shuffled)):
        path = tmp_path / name / "SOLUSDT_1h.csv"
        path.parent.mkdir()
        path.write_text("\n".join([header, *body]) + "\n")
        files[name] = read_recording(path)
    results = {name: run(settings(tmp_path), r, ["simple"]) for name, r in files.items()}
    base = results["in_order"]
    for name in ("reversed", "shuffled"):
        np.testing.assert_array_equal(results[name].ticks_ms, base.ticks_ms)
        np.testing.assert_array_equal(
            results[name].runs["simple"].equity, base.runs["simple"].equity
        )
    assert "newest-first rows reversed" in " ".join(results["reversed"].notes)
    told = [f.text for f in findings(results["shuffled"])]
    assert any("rows out of time order moved into place" in text for text in told)


@pytest.mark.parametrize("policy", ["stop", "reduce_only", "resume_next_day"])
def test_a_loss_limit_halt_in_a_backtest_does_what_on_halt_says(tmp_path, policy):
    sol = read_recording(SOLUSDT_1H_2022)
    s = settings(
        tmp_path,
        risk={"max_daily_loss": 0.002, "max_drawdown": 1.0, "min_edge_bps": 0.0},
        strategy={"position_fraction": 1.0},
        backtest={"on_halt": policy},
    )
    result = run(s, sol, ["simple"])
    states = result.runs["simple"].states
    stops = [c for c in states if c.reason.startswith("daily loss")]
    assert stops, "the limit must be hit for this test to mean anything"
    first = stops[0]
    fills = result.runs["simple"].fills
    later = [f for f in fills if f.at.date() > first.at.date()]
    said = [f.text for f in findings(result) if f.text.startswith("simple: ")]
    assert any(f"backtest.on_halt = {policy}" in text for text in said)
    if policy == "stop":
        assert [c.state for c in states if c.at > first.at] == []
        assert later == []  # halted for good: nothing more traded
        assert any("no order for the rest of the run" in text for text in said)
    else:
        assert first.state == ("reducing" if policy == "reduce_only" else "halted")
        assert any(c.state == "active" and c.reason == "a new trading day" for c in states)
        assert later  # trading went on the next day


def test_the_cli_exits_1_when_most_ticks_skipped_unless_told_and_follows_the_files_currency(
    cli, tmp_path
):
    sol = read_recording(SOLUSDT_1H_2022)
    header = "timestamps,open,high,low,close,volume"
    rows = [
        f"{datetime.fromtimestamp(r[0] / 1000, UTC):%Y-%m-%d %H:%M:%S},{r[1]},{r[2]},{r[3]},"
        f"{'nan' if i % 10 == 0 else r[4]},{r[5]}"
        for i, r in enumerate(sol.rows[:400])
    ]
    path = tmp_path / "SOLUSDT_1h.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    env = clean_env(
        TRADER_BACKTEST__CACHE_DIR=str(tmp_path / "cache"),
        TRADER_MARKET__CONTEXT_BARS="32",
        TRADER_MARKET__MIN_CONTIGUOUS_BARS="4",
        # An account in USD with the default symbols would be refused; the files decide.
        TRADER_BROKER__CURRENCY="USD",
    )
    args = ("backtest", "--data", str(path), "--model", "baseline", "--strategy", "simple")
    done = cli.run(*args, env=env)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("READ THIS FIRST (the run did not do what was asked")
    assert "ticks skipped" in done.stdout.splitlines()[1]
    assert "--allow-skips" in done.stderr
    accepted = cli.run(*args, "--allow-skips", "--out", str(tmp_path / "report"), env=env)
    assert accepted.returncode == 0, accepted.stderr
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.index("## Read this first") < report.index("## Comparison")
    stats = json.loads((tmp_path / "report" / "stats.json").read_text())
    assert stats["findings"][0]["fails"] is True
    assert accepted.stdout.startswith(
        "READ THIS FIRST (the run did not do what was asked: accepted with --allow-skips)"
    )
    goog = cli.run(
        "backtest", "--data", str(PACKAGED / "GOOG.csv"), "--symbol", "GOOG/USD", "--model",
        "baseline", "--strategy", "simple", "--to", "2006-12-31", env=env,
    )  # fmt: skip
    assert goog.returncode == 0, goog.stderr
    assert "XNYS inferred" in goog.stdout
    assert "251.7 bars a year (XNYS)" in goog.stdout
