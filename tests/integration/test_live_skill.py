"""Live skill on the real daemon (`trader run --replay`, baseline model): the skill metrics from
the first scored forecast, and a SIGKILL mid-horizon followed by a restart that scores every
forecast exactly once, with the same figures as a run never interrupted."""

from __future__ import annotations

import math
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.integration.daemon import (
    daemon_env,
    metric,
    metrics_port,
    recording,
    running,
    ticks,
    wait_until,
)

pytestmark = pytest.mark.integration

CONTEXT = 48
HORIZON = 4
BARS = CONTEXT + 60


def env(tmp: Path) -> dict[str, str]:
    # The baseline and the naive reference look back over the same 16 bars (plus the
    # horizon), which the window still holds when the horizon closes: the same construction
    # on the same bars, so the baseline's live skill is 0.
    return daemon_env(
        tmp, TRADER_FORECAST__HORIZON=str(HORIZON), TRADER_MQTT__ENABLED="false",
        TRADER_FORECAST__BASELINE_LOOKBACK="16", TRADER_FORECAST__NAIVE_WINDOW="16",
    )  # fmt: skip


def scores(ledger: Path) -> list[tuple[str, str, str, str, str, str]]:
    """The scores so far (none before the daemon has made the ledger)."""
    if not ledger.exists():
        return []
    try:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5) as c:
            return c.execute(
                "SELECT symbol, model, as_of, outcome, sums, naive FROM forecast_scores "
                "ORDER BY as_of"
            ).fetchall()
    except sqlite3.OperationalError:  # created, not yet migrated
        return []


def forecasts(ledger: Path) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(DISTINCT as_of) FROM forecasts").fetchone()[0]


def test_a_kill_mid_horizon_scores_every_forecast_exactly_once(cli, tmp_path):
    data = recording(tmp_path, BARS)
    # The run never interrupted: the reference.
    whole = tmp_path / "whole"
    whole.mkdir()
    done = cli.start("run", "--replay", str(data), env=env(whole))
    with running(done):
        assert done.finish(timeout=120) == 0
    reference = scores(whole / "ledger.sqlite3")
    made = forecasts(whole / "ledger.sqlite3")
    assert len(reference) == made - HORIZON  # the last HORIZON still wait for their bars
    assert {row[3] for row in reference} == {"scored"}

    # The same replay, killed with SIGKILL while forecasts wait for their horizon, then resumed.
    broken = tmp_path / "broken"
    broken.mkdir()
    ledger = broken / "ledger.sqlite3"
    first = cli.start("run", "--replay", str(data), "--speed", "36000", env=env(broken))
    with running(first):
        port = metrics_port(first)
        # The skill metrics are there from the first scored forecast.
        wait_until(lambda: len(scores(ledger)) >= 3, "three scored forecasts", 90)
        wait_until(
            lambda: math.isfinite(metric(port, "trader_forecast_crps", model="baseline")),
            "trader_forecast_crps after the first score", 30,
        )  # fmt: skip
        assert math.isfinite(metric(port, "trader_forecast_crps", model="naive"))
        # The headline is against the probabilistic naive reference; the no-change point
        # comparison, which any spread beats, is its own metric.
        assert metric(port, "trader_forecast_skill_vs_naive", model="baseline") == 0.0
        assert metric(port, "trader_forecast_skill_vs_naive", model="naive") == 0.0
        point = metric(port, "trader_forecast_skill_vs_no_change", model="baseline")
        assert math.isfinite(point)
        assert point != 0.0
        assert metric(port, "trader_forecast_coverage", model="baseline", interval="80") >= 0
        wait_until(lambda: len(ticks(ledger)) >= 20, "20 ticks", 90)
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=30)
    killed_at = len(scores(ledger))
    assert 0 < killed_at < len(reference)
    second = cli.start("run", "--replay", str(data), env=env(broken))
    with running(second):
        port = metrics_port(second)
        assert second.finish(timeout=120) == 0
    resumed = scores(ledger)
    assert resumed == reference  # every forecast once, with the figures of the whole run
    log = [line for line in second.lines if line["event"] == "live skill"]
    assert log
    assert log[0]["waiting"] > 0  # forecasts mid-horizon at the kill, read back from the ledger
