"""The backtest's own run (the data step planned ahead, the ledger written once at the end, no
scheduler, quiet stretches booked without the engine's stages) against the
daemon's replay of the same history (`run_backtest(reference=True)`: the data step fetching
and judging rows at every tick, a ledger transaction every tick).

Same bars, models and settings: two symbols (one with a candle missing and a bad bar), fees
and a spread, every strategy (maxdiff's resting limits filled in parts by a small volume
share), the risk engine refusing orders and a loss limit halting them; an A-share stock in
its sessions (nights and lunch breaks) with a halt that stops the run. Every table of the
two ledgers must hold the same rows (but the stage timings, which are measurements), and every
figure the report is made of must be equal.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.recorded import SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.backtest.run import Backtest, run_backtest
from trader.config.schema import Settings
from trader.market.replay import Recording, read_recording

pytestmark = pytest.mark.integration

STRATEGIES = ["simple", "ci_guard", "maxdiff"]


def two_symbols() -> dict[str, Recording]:
    sol = read_recording(SOLUSDT_1H_2022)
    rows = sol.rows[:520]
    other = [(rows[i][0], *row[1:]) for i, row in enumerate(sol.rows[1000:1520])]
    other = [(t, o * 7, h * 7, lo * 7, c * 7, v / 7, q) for t, o, h, lo, c, v, q in other]
    other[300] = (*other[300][:4], math.nan, *other[300][5:])  # a bad bar
    del other[200]  # a missing candle
    return {
        "SOL/USDT": replace(sol, rows=rows),
        "ETH/USDT": replace(sol, symbol="ETH/USDT", rows=other),
    }


def crypto_settings(folder: Path) -> Settings:
    return Settings(
        market={"context_bars": 64, "min_contiguous_bars": 16, "replay_spread": "high_low",
                "replay_amount_step": "0.001"},
        forecast={"model": "baseline", "horizon": 3, "baseline_lookback": 32},
        strategy={"position_fraction": 0.4},
        # A small share of each bar's volume: maxdiff's limits fill in parts.
        broker={"max_volume_share": 0.0002},
        risk={"min_edge_bps": 0, "max_daily_loss": 0.006, "max_drawdown": 1.0,
              "max_orders_per_minute": 1000},
        backtest={"cache_dir": folder / "cache", "batch_windows": 8,
                  "on_halt": "resume_next_day"},
    )  # fmt: skip


def stock_settings(folder: Path) -> Settings:
    return Settings(
        market={"context_bars": 64, "min_contiguous_bars": 16, "replay_spread_bps": 1.0},
        forecast={"model": "baseline", "horizon": 2, "baseline_lookback": 32},
        strategy={"position_fraction": 1.0},
        broker={"taker_fee_bps": 1, "maker_fee_bps": 0},
        risk={"min_edge_bps": 0, "max_daily_loss": 0.002, "max_drawdown": 1.0,
              "max_order_notional": "20000", "max_position_notional": "20000",
              "max_total_exposure": "20000"},
        backtest={"cache_dir": folder / "cache", "batch_windows": 8, "on_halt": "stop"},
    )  # fmt: skip


def both(
    settings: Settings, recordings: dict[str, Recording], folder: Path, jobs: int
) -> tuple[Backtest, Backtest]:
    """The backtest's own run (its strategies side by side in `jobs` worker processes, or one
    after the other for 1) and the daemon's replay."""

    def once(name: str, reference: bool) -> Backtest:
        return asyncio.run(
            run_backtest(
                settings, recordings, strategies=STRATEGIES, ledgers=folder / name,
                progress=False, reference=reference, jobs=1 if reference else jobs,
            )
        )  # fmt: skip

    return once("fast", False), once("reference", True)


def ledger(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows in their stored order (the stage timings left out)."""
    with sqlite3.connect(path) as c:
        tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {t: c.execute(f"SELECT * FROM {t}").fetchall() for t in tables}  # noqa: S608 - names from sqlite_master
        out["ticks"] = c.execute(
            "SELECT at, finished_at, outcome, ready, skipped FROM ticks"
        ).fetchall()
        (out["schema"],) = c.execute("PRAGMA user_version").fetchone()
    return out


def quiet_share(path: Path) -> float:
    """The share of a ledger's ticks booked by a quiet stretch (their one timing, "quiet")."""
    with sqlite3.connect(path) as c:
        timings = [json.loads(t) for (t,) in c.execute("SELECT timings FROM ticks")]
    return sum(1 for t in timings if "quiet" in t) / len(timings)


def assert_stretched(fast: Backtest) -> None:
    """The fast runs took quiet stretches where they could (so that the comparison covers
    them): the at-market strategies, never maxdiff (whose limits rest every tick)."""
    shares = {s: quiet_share(fast.runs[s].ledger) for s in STRATEGIES}
    assert shares["simple"] > 0.6, shares
    assert shares["ci_guard"] > 0.6, shares
    assert shares["maxdiff"] == 0, shares


def assert_same(fast: Backtest, reference: Backtest) -> dict[str, dict[str, list[Any]]]:
    np.testing.assert_array_equal(fast.ticks_ms, reference.ticks_ms)
    books = {}
    for strategy in STRATEGIES:
        mine, theirs = fast.runs[strategy], reference.runs[strategy]
        for f in fields(mine):
            if f.name in ("ledger", "seconds"):
                continue
            a, b = getattr(mine, f.name), getattr(theirs, f.name)
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=f"{strategy} {f.name}")
            else:
                assert a == b, f"{strategy} {f.name}"
        books[strategy] = ledger(mine.ledger)
        assert books[strategy] == ledger(theirs.ledger), f"{strategy}: the ledgers differ"
    for a, b in zip(fast.lines, reference.lines, strict=True):
        assert (a.strategy, a.symbol, a.performance, a.trades, a.costs, a.exposure) == (
            b.strategy, b.symbol, b.performance, b.trades, b.costs, b.exposure
        )  # fmt: skip
        np.testing.assert_array_equal(a.equity, b.equity)
    assert fast.quality == reference.quality
    assert [c.live for c in fast.cache] == [c.live for c in reference.cache]  # none made late
    return books


def test_two_symbols_every_strategy_partial_fills_refusals_and_a_halt(tmp_path):
    fast, reference = both(crypto_settings(tmp_path), two_symbols(), tmp_path, jobs=2)
    books = assert_same(fast, reference)
    assert_stretched(fast)
    # What the comparison covered, so that it cannot pass on runs that did nothing.
    traded = set()
    for strategy in STRATEGIES:
        run = fast.runs[strategy]
        assert len(run.fills) > 10, strategy
        traded |= {f.symbol for f in run.fills}
        assert any(c.reason.startswith("daily loss") for c in run.states), strategy
        assert run.refusals, strategy
        assert run.skipped_by_symbol["ETH/USDT"], strategy  # the hole and the bad bar
    assert traded == {"SOL/USDT", "ETH/USDT"}
    events = books["maxdiff"]["order_events"]
    assert sum(1 for e in events if e[3] == "partially_filled") > 5
    assert sum(1 for e in events if e[3] in ("canceled", "expired")) > 5
    assert {row[4] for row in books["maxdiff"]["orders"]} == {"limit"}
    assert {row[4] for row in books["simple"]["orders"]} == {"market"}


def test_a_stock_in_its_sessions_halted_for_the_rest_of_the_run(tmp_path):
    xshg = read_recording(XSHG_600977_5MIN, "600977/CNY")
    recordings = {"600977/CNY": replace(xshg, rows=xshg.rows[:700])}
    fast, reference = both(stock_settings(tmp_path), recordings, tmp_path, jobs=1)
    assert_same(fast, reference)
    assert_stretched(fast)
    for strategy in STRATEGIES:
        run = fast.runs[strategy]
        assert run.fills, strategy
        assert any("rest of the run" in c.reason for c in run.states), strategy
