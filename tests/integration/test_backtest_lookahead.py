"""Walk-forward: changing any bar after time t changes no decision at or before t.

For the baseline and for small random-weight Toto and Kronos models, every strategy is
backtested on recorded bars, then again on the same bars with everything after t changed
(prices scaled at random, a bar made invalid, the last ones removed), each run with a cache
and ledgers of its own. Up to t the ledgers must agree exactly: forecasts, decisions with
their reasons and inputs, orders placed, fills and equity. After t they must differ, or the
test would prove nothing.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration import kronos_reference, toto_reference
from tests.recorded import SOLUSDT_1H
from trader.backtest.run import run_backtest
from trader.config.schema import Settings
from trader.forecast.build import build_forecaster
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.protocol import Forecaster
from trader.ledger.codec import time_text
from trader.market.replay import Recording, read_recording

pytestmark = pytest.mark.integration
CONTEXT, TICKS, CUT = 64, 48, 20  # bars of context, ticks run, ticks before t (at least)
BATCH = 8  # windows per model call
STRATEGIES = ["simple", "ci_guard", "maxdiff"]
CPU = DeviceChoice("cpu", "float32", "tests run on the CPU")


def settings(folder: Path) -> Settings:
    return Settings(
        market={"symbols": ["SOL/USDT"], "context_bars": CONTEXT, "replay_amount_step": "0.001"},
        forecast={"model": "baseline", "horizon": 3, "baseline_lookback": 32,
                  "toto": {"num_samples": 32}, "kronos": {"sample_count": 1}},
        # Loose limits: the strategies must keep trading for the test to mean something.
        risk={"max_daily_loss": 1.0, "max_drawdown": 1.0, "min_edge_bps": 0,
              "max_orders_per_minute": 1000},
        backtest={"cache_dir": folder / "cache", "batch_windows": BATCH},
    )  # fmt: skip


@pytest.fixture(scope="module")
def bars() -> Recording:
    original = read_recording(SOLUSDT_1H)
    rows = original.rows[2000 : 2000 + CONTEXT - 1 + TICKS]
    return Recording(original.symbol, original.timeframe, rows, original.path)


@pytest.fixture(scope="module", params=["baseline", "toto", "kronos"])
def forecaster(request, tmp_path_factory) -> Forecaster:
    forecast = settings(Path("unused")).forecast
    if request.param == "baseline":
        return build_forecaster("baseline", forecast, CPU)
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "toto":
        pytest.importorskip("toto", reason="the reference toto-ts writes the checkpoint")
        toto_reference.write_checkpoint(folder, toto_reference.SMALL, seed=3)
        return build_forecaster("toto", forecast, CPU, model_path=folder)
    checkpoints = kronos_reference.write_random(folder, kronos_reference.MINI, seed=3)
    return build_forecaster(
        "kronos", forecast, CPU, model_path=checkpoints.model,
        tokenizer_path=checkpoints.tokenizer,
    )  # fmt: skip


def scaled_after(recording: Recording, cut_ms: int, seed: int) -> Recording:
    """Every bar that opens at or after `cut_ms` scaled by its own random factor."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    rows = []
    for row in recording.rows:
        start, o, h, lo, c, v, q = row
        if start >= cut_ms:
            k, m = rng.uniform(0.8, 1.25), rng.uniform(0.5, 2)
            row = (start, o * k, h * k, lo * k, c * k, v * m, q)  # noqa: PLW2901
        rows.append(row)
    return Recording(recording.symbol, recording.timeframe, rows, recording.path)


def broken_after(recording: Recording, cut_ms: int) -> Recording:
    """A bar after `cut_ms` made invalid (high below low), the last five removed."""
    rows = list(recording.rows[:-5])
    index = next(i for i, row in enumerate(rows) if row[0] >= cut_ms)
    start, o, h, lo, c, v, q = rows[index]
    rows[index] = (start, o, lo * 0.9, h * 1.1, c, v, q)
    return Recording(recording.symbol, recording.timeframe, rows, recording.path)


def backtest(recording: Recording, forecaster: Forecaster, folder: Path) -> dict[str, Path]:
    folder.mkdir()
    asyncio.run(
        run_backtest(
            settings(folder), {recording.symbol: recording}, strategies=STRATEGIES,
            forecasters=[forecaster], ledgers=folder / "ledgers", progress=False,
        )
    )  # fmt: skip
    return {s: folder / "ledgers" / f"ledger-{s}.sqlite3" for s in STRATEGIES}


QUERIES = {
    "forecasts": "SELECT tick, symbol, model, as_of, quantiles, mean FROM forecasts "
    "WHERE tick <= :t ORDER BY tick",
    "decisions": "SELECT tick, symbol, strategy, direction, reason, inputs FROM decisions "
    "WHERE tick <= :t ORDER BY tick",
    "orders": "SELECT client_order_id, side, type, amount, limit_price, created_at, expires_at "
    "FROM orders WHERE created_at <= :t ORDER BY client_order_id",
    "fills": "SELECT fill_id, price, amount, fee, at FROM fills WHERE at <= :t ORDER BY fill_id",
    "equity": "SELECT at, equity, cash, exposure FROM equity WHERE at <= :t ORDER BY at",
}


def record(ledger: Path, t: datetime, after: bool = False) -> dict[str, list[Any]]:
    with sqlite3.connect(ledger) as c:
        out = {}
        for name, sql in QUERIES.items():
            query = sql.replace("<= :t", "> :t") if after else sql
            out[name] = c.execute(query, {"t": time_text(t)}).fetchall()
    return out


def tick_at(ledger: Path, index: int) -> datetime:
    from trader.ledger.codec import parse_time  # noqa: PLC0415

    with sqlite3.connect(ledger) as c:
        (at,) = c.execute("SELECT at FROM ticks ORDER BY at LIMIT 1 OFFSET ?", (index,)).fetchone()
    return parse_time(at)


def test_no_decision_at_or_before_t_sees_a_bar_after_t(bars, forecaster, tmp_path):
    original = backtest(bars, forecaster, tmp_path / "original")
    # t in the middle of a batch of model calls, so that batches could carry a later bar's
    # existence back to t (they must not: see trader.backtest.windows).
    t = next(
        at
        for at in (tick_at(original["simple"], CUT + i) for i in range(BATCH))
        if int(at.timestamp()) // 3600 % BATCH == BATCH // 2
    )
    cut_ms = int(t.timestamp() * 1000)  # bars opening at t or later closed after t
    # Every bar after t scaled at random, one of them invalid, the last ones gone.
    changed = broken_after(scaled_after(bars, cut_ms, seed=7), cut_ms)
    variant = backtest(changed, forecaster, tmp_path / "changed")
    traded = 0
    for strategy in STRATEGIES:
        before = record(original[strategy], t)
        assert len(before["decisions"]) > CUT
        traded += len(before["fills"])
        assert record(variant[strategy], t) == before, f"{strategy}: look-ahead"
        later = record(original[strategy], t, after=True)
        assert later["forecasts"] != record(variant[strategy], t, after=True)["forecasts"], (
            f"{strategy}: the bars after t changed nothing, so this test proves nothing"
        )
    assert traded > 0, "nothing traded before t: the orders and fills were not compared"
