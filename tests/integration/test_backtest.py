"""`trader backtest` on recorded data: buy-and-hold over a whole SOL/USDT recording against the
price ratio, the report a user opens, and the statistics read back from the engine's ledgers."""

from __future__ import annotations

import asyncio
import csv
import gzip
import json
import os
import sqlite3

import numpy as np
import pytest
from PIL import Image

from tests.integration.conftest import clean_env
from tests.recorded import SOLUSDT_1H
from trader.backtest import run as run_module
from trader.backtest.activity import trading_costs
from trader.backtest.run import BUY_AND_HOLD, PORTFOLIO, run_backtest
from trader.cli import main
from trader.config.schema import Settings
from trader.market.replay import Recording, read_recording

pytestmark = pytest.mark.integration


def test_buy_and_hold_over_a_whole_recording_is_the_price_ratio_less_costs(tmp_path):
    path = SOLUSDT_1H
    settings = Settings(
        market={"symbols": ["SOL/USDT"]}, backtest={"cache_dir": tmp_path / "cache"}
    )
    result = asyncio.run(run_backtest(settings, {"SOL/USDT": read_recording(path)}, strategies=[]))
    (line,) = result.lines
    assert line.strategy == BUY_AND_HOLD
    # Straight from the file: the first tick is the close of the 512th bar (the first full
    # window), the last the file's last close.
    with gzip.open(path, "rt", newline="") as f:
        closes = [float(row["close"]) for row in csv.DictReader(f)]
    first, last = closes[settings.market.context_bars - 1], closes[-1]
    fee, half, slip = 10 / 10_000, 5 / 20_000, 2 / 10_000  # the paper broker's defaults
    expected = (
        last * (1 - half) * (1 - slip) * (1 - fee) / (first * (1 + half) * (1 + slip) * (1 + fee))
    )
    assert line.performance.total_return == pytest.approx(expected - 1, rel=1e-12)
    assert len(result.ticks_ms) == len(closes) - settings.market.context_bars + 1
    assert line.performance.periods == len(result.ticks_ms)
    # Marked at every close in between: its worst fall is the file's.
    peaks = np.maximum.accumulate(closes[511:])
    assert line.performance.max_drawdown == pytest.approx(
        float(np.max(1 - np.array(closes[511:]) / peaks)), abs=2e-3
    )


def test_the_cli_compares_every_strategy_and_writes_a_report_people_open(cli):
    out = cli.cwd / "report"
    done = cli.run(
        "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline",
        "--from", "2020-12-01", "--to", "2020-12-20", "--out", str(out),
        env=clean_env(TRADER_BACKTEST__CACHE_DIR=str(cli.cwd / "cache")),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = done.stdout
    for name in ("simple", "ci_guard", "maxdiff", "buy & hold", "Sharpe", "max DD"):
        assert name in table
    assert "2020-12-01 00:00 .. 2020-12-20 23:00" in table  # a date as --to: all of that day
    stats = json.loads((out / "stats.json").read_text())
    assert [line["strategy"] for line in stats["lines"]] == [
        "simple", "ci_guard", "maxdiff", BUY_AND_HOLD,
    ]  # fmt: skip
    assert stats["bars"] == 20 * 24
    assert stats["annualisation"]["periods_per_year"] == pytest.approx(8766)
    # Every line is the ledger's own account of the run.
    for line in stats["lines"][:3]:
        ledger = out / "ledgers" / f"ledger-{line['strategy']}.sqlite3"
        with sqlite3.connect(ledger) as c:
            (ticks,) = c.execute("SELECT count(*) FROM ticks").fetchone()
            (fills,) = c.execute("SELECT count(*) FROM fills").fetchone()
        assert ticks == stats["bars"]
        assert stats["runs"][line["strategy"]]["fills"] == fills
    report = (out / "report.html").read_text()
    assert 'src="http' not in report
    assert 'href="http' not in report
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == [
        "calibration_baseline_SOLUSDT.png", "equity_SOLUSDT.png", "forecast_baseline_SOLUSDT.png",
    ]  # fmt: skip
    for png in pngs:
        with Image.open(out / png) as image:
            assert image.size[0] >= 1000  # wide enough to read
        assert f"({png})" in (out / "report.md").read_text()
    assert report.count("data:image/png;base64,") == len(pngs)
    # A second run reuses every forecast.
    again = cli.run(
        "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline",
        "--from", "2020-12-01", "--to", "2020-12-20", "--strategy", "simple", "--out",
        str(cli.cwd / "again"), env=clean_env(TRADER_BACKTEST__CACHE_DIR=str(cli.cwd / "cache")),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    (use,) = json.loads((cli.cwd / "again" / "stats.json").read_text())["forecasts"]
    assert (use["computed"], use["reused"]) == (0, stats["bars"])


def test_the_cli_refuses_bad_input_with_a_reason(cli, tmp_path):
    missing = cli.run("backtest", "--data", str(tmp_path / "nope.csv"))
    assert missing.returncode == 65
    assert "no such file" in missing.stderr
    bad = cli.run("backtest", "--data", "x.csv", "--from", "yesterday")
    assert bad.returncode == 2
    assert "not a date" in bad.stderr


def test_a_worker_that_dies_ends_the_command_with_one_line_saying_so(tmp_path, monkeypatch, capsys):
    async def killed(*args: object, **kwargs: object) -> None:
        os._exit(3)  # in the forked worker, as the out-of-memory killer would end it

    monkeypatch.setattr(run_module, "simulate", killed)
    monkeypatch.setenv("TRADER_BACKTEST__CACHE_DIR", str(tmp_path / "cache"))
    code = main([
        "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline", "--from", "2020-12-01",
        "--to", "2020-12-03", "--strategy", "simple", "ci_guard", "--jobs", "2",
    ])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "a worker process ended with code 3, its run unfinished" in err
    assert "Traceback" not in err


def test_a_single_strategy_runs_in_a_worker_while_the_forecasts_are_scored(tmp_path, monkeypatch):
    """With workers allowed, one strategy's run goes to a forked worker too, so that this
    process scores the forecasts and draws their plots meanwhile; its figures are those of
    the run in this process."""
    simulated = tmp_path / "simulated-in"
    simulate = run_module.simulate

    async def recorded(*args: object, **kwargs: object) -> object:
        with simulated.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return await simulate(*args, **kwargs)

    monkeypatch.setattr(run_module, "simulate", recorded)
    settings = Settings(
        market={"symbols": ["SOL/USDT"], "context_bars": 128},
        forecast={"model": "baseline"},
        backtest={"cache_dir": tmp_path / "cache"},
    )
    sol = read_recording(SOLUSDT_1H)
    recordings = {"SOL/USDT": Recording("SOL/USDT", sol.timeframe, sol.rows[:1500], sol.path)}
    meanwhile: list[int] = []

    def backtest(jobs: int) -> run_module.Backtest:
        simulated.unlink(missing_ok=True)
        return asyncio.run(
            run_backtest(
                settings, recordings, strategies=["maxdiff"], jobs=jobs, progress=False,
                ledgers=tmp_path / f"jobs{jobs}", meanwhile=lambda _: meanwhile.append(os.getpid()),
            )
        )  # fmt: skip

    here = backtest(1)
    assert simulated.read_text().split() == [str(os.getpid())]
    forked = backtest(2)
    (worker,) = simulated.read_text().split()
    assert worker != str(os.getpid())
    assert meanwhile == [os.getpid(), os.getpid()]  # the quality and plots: this process
    a, b = here.runs["maxdiff"], forked.runs["maxdiff"]
    assert len(a.fills) > 10
    assert (a.fills, a.decisions, a.orders, a.states, a.outcomes) == (
        b.fills, b.decisions, b.orders, b.states, b.outcomes
    )  # fmt: skip
    np.testing.assert_array_equal(a.equity, b.equity)
    assert [line.performance for line in here.lines] == [line.performance for line in forked.lines]
    assert here.quality == forked.quality


def test_symbol_lines_add_up_to_the_ledgers_own_equity(tmp_path):
    sol = read_recording(SOLUSDT_1H)
    rows = sol.rows[1000:1400]
    eth = [(t, o * 7, h * 7, lo * 7, c * 7, v, q) for t, o, h, lo, c, v, q in sol.rows[3000:3400]]
    eth = [(rows[i][0], *row[1:]) for i, row in enumerate(eth)]  # other prices, same times
    recordings = {
        "SOL/USDT": Recording("SOL/USDT", sol.timeframe, rows, sol.path),
        "ETH/USDT": Recording("ETH/USDT", sol.timeframe, eth, sol.path),
    }
    settings = Settings(
        market={"symbols": ["SOL/USDT"], "context_bars": 128},
        forecast={"model": "baseline"},
        strategy={"allow_short": True},
        risk={"max_daily_loss": 1.0, "max_drawdown": 1.0},
        backtest={"cache_dir": tmp_path / "cache"},
    )
    result = asyncio.run(
        run_backtest(settings, recordings, strategies=["maxdiff"], ledgers=tmp_path / "ledgers")
    )
    lines = {(line.strategy, line.symbol): line for line in result.lines}
    assert set(lines) == {
        (s, sym) for s in ("maxdiff", BUY_AND_HOLD) for sym in ("SOL/USDT", "ETH/USDT", PORTFOLIO)
    }
    run = result.runs["maxdiff"]
    assert {f.symbol for f in run.fills} == {"SOL/USDT", "ETH/USDT"}
    cash = float(settings.broker.starting_cash)
    # Before the close-out at the end, each symbol's P&L marked at the close adds up to the
    # ledger's equity, tick by tick.
    pnl = sum(lines["maxdiff", s].equity[1:-1] - cash for s in ("SOL/USDT", "ETH/USDT"))
    np.testing.assert_allclose(cash + pnl, run.equity[:-1], rtol=1e-9)
    portfolio = lines["maxdiff", PORTFOLIO]
    np.testing.assert_allclose(portfolio.equity[1:-1], run.equity[:-1], rtol=1e-12)
    assert portfolio.equity[-1] <= run.equity[-1]  # closing out at the end costs
    # The cost columns hold the close-out too, as buy-and-hold's do: what it cost is exactly
    # what the curve lost at its last point.
    closing = run.equity[-1] - portfolio.equity[-1]
    traded = trading_costs(run.fills, result.closes, float(settings.broker.slippage_bps) / 1e4)
    assert traded.fees == pytest.approx(float(sum(f.fee for f in run.fills)))
    extra = [
        getattr(portfolio.costs, f) - getattr(traded, f) for f in ("fees", "spread", "slippage")
    ]
    assert extra[0] > 0
    assert sum(extra) == pytest.approx(closing, rel=1e-6)
    # Equal-weight buy-and-hold of the two.
    hold = lines[BUY_AND_HOLD, PORTFOLIO].equity
    np.testing.assert_allclose(
        hold, (lines[BUY_AND_HOLD, "SOL/USDT"].equity + lines[BUY_AND_HOLD, "ETH/USDT"].equity) / 2
    )
