"""Bench scripts keep working (their figures are read by people, not asserted here), on the
recorded excerpt in tests/data/, passed with --data; their default folder of full recordings
($BENCH_DATA) is pointed at tests/data/ too, so a bench run here never reads outside the
repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration


def run_quick(script: str, *args: str) -> str:
    """Run bench/<script> --quick on the recorded excerpts; what it printed."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick", *args],
        env=os.environ | {"BENCH_DATA": str(ROOT / "tests" / "data")},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def bench(script: str, *args: str) -> dict[str, Any]:
    """Run bench/<script> --quick; its JSON report."""
    report: dict[str, Any] = json.loads(run_quick(script, *args))
    return report


def test_the_domain_bench_prints_its_figures_as_json():
    report = bench("domain.py", "--data", str(SOLUSDT_1H))
    assert report["bars"] == 500
    assert report["fills"] == 500
    for key in ("validated_bars_per_s", "exact_fills_per_s", "settings_load_ms_median"):
        assert report[key] > 0


def test_the_market_bench_prints_its_figures_as_json():
    report = bench("market.py", "--data", str(SOLUSDT_1H))
    assert report["exchange_symbols"] == 20
    assert report["exchange_requests_per_tick"] == 21  # 20 klines + one batch quote call
    for key in ("replay_step_bars_per_s", "exchange_step_ms_median_unthrottled"):
        assert report[key] > 0
    assert report["replay_gap_missing_bars"] == 1
    assert report["replay_gap_bars_per_s"] > 0


def test_the_engine_bench_prints_its_figures_as_json():
    report = bench("engine.py", "--data", str(SOLUSDT_1H))
    assert report["maxdiff_50_symbols_nologs_orders_per_tick"] > 50  # the busy case is busy
    for key in (
        "ci_guard_1_symbols_nologs_tick_ms_median",
        "maxdiff_50_symbols_logs_engine_stages_ms_median",
    ):
        assert report[key] > 0


def bench_lines(script: str, *args: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Run a model bench (bench/<script> --quick), which writes JSON lines: its cases' figures
    by name, and its summary."""
    lines = [json.loads(line) for line in run_quick(script, *args).splitlines()]
    cases = {line["case"]: line for line in lines if line["kind"] == "case"}
    assert lines[-1]["kind"] == "summary"
    return cases, lines[-1]


def test_the_toto_bench_compares_ours_and_the_reference_side_by_side():
    cases, summary = bench_lines("toto.py", "--data", str(SOLUSDT_1H))
    for case in ("h16_s8", "h48_s32"):
        for key in ("ours_ms_median", "reference_ms_median", "ours_peak_rss_mb", "speedup"):
            assert cases[case][key] > 0
        # Same random weights, same input: the quantiles agree within sampling error.
        assert cases[case]["quantile_mean_z"] < 1.5
    assert cases["batch_2_symbols_h16_s32"]["cost_ratio"] > 0
    assert summary["complete"] is True
    assert summary["speedup_min"] == min(cases[c]["speedup"] for c in ("h16_s8", "h48_s32"))


def test_the_backtest_bench_times_ours_beside_backtesting_py():
    report = bench("backtest.py", "--data", str(SOLUSDT_1H))
    assert report["bars"] == 3000 - 512 + 1
    assert report["forecast_windows_per_s"] > 0
    for case in ("costs", "free"):
        ours, theirs = (
            report[f"{case}_{who}_bars_per_s"] for who in ("ours_simple", "backtesting_py")
        )
        assert ours > 0
        assert theirs > 0
        assert report[f"{case}_ours_over_backtesting_py"] == pytest.approx(ours / theirs, rel=0.01)
        # A bar's microseconds: the plan and the ledger's rows are parts of ours.
        whole = report[f"{case}_ours_us_per_bar"]
        assert whole == pytest.approx(1e6 / ours, rel=0.01)
        assert report[f"{case}_backtesting_py_us_per_bar"] == pytest.approx(1e6 / theirs, rel=0.01)
        assert 0 < report[f"{case}_ours_plan_us_per_bar"] < whole
        assert 0 < report[f"{case}_ledger_floor_us_per_bar"] < whole
        # The quiet ticks and the engine's are parts of ours too.
        quiet, engine = (report[f"{case}_ours_{part}_us_per_bar"] for part in ("quiet", "engine"))
        assert quiet > 0
        assert engine > 0
        assert quiet + engine < whole
    # The engine runs the first tick (the risk engine's first sight of the equity), then only
    # ticks that send or fill an order: none where the costs keep every order out.
    assert report["costs_ours_simple_fills"] == 0
    assert report["costs_ours_engine_ticks"] == 1
    assert report["free_ours_engine_ticks"] >= report["free_ours_simple_fills"] > 0
    # Without costs both trade on the same signal: a comparison of trading, not of idling.
    assert report["free_ours_simple_fills"] > 0
    assert report["free_backtesting_py_trades"] > 0
    assert report["costs_ours_maxdiff_fills"] > 0


def test_the_grid_bench_times_two_workers_beside_one_and_compares_their_figures():
    report = bench("backtest_grid.py", "--data", str(SOLUSDT_1H))
    assert report["runs"] == 8
    assert report["jobs1_seconds"] > 0
    assert report["jobs2_over_jobs1"] == pytest.approx(
        report["jobs2_seconds"] / report["jobs1_seconds"], rel=0.01
    )
    assert report["same_figures"] is True
    # The plain backtest's strategies side by side, beside one after the other.
    assert report["backtest_jobs1_seconds"] > 0
    assert report["backtest_over_jobs1"] == pytest.approx(
        report["backtest_seconds"] / report["backtest_jobs1_seconds"], rel=0.01
    )
    assert report["backtest_same_figures"] is True


def test_the_daemon_bench_measures_loop_lag_and_memory_over_ticks():
    report = bench("daemon.py", "--data", str(SOLUSDT_1H))
    for case in ("lag_offloop", "lag_offloop_all_cores", "lag_onloop", "lag_idle"):
        assert report[case]["samples"] > 0
        assert report[case]["p99_ms"] >= 0
    assert report["forecast_s_median"] > 0
    assert report["month_ticks"] >= 100
    assert report["month_rss_mb_at_end"] > 0
    assert len(report["month_rss_by_decile_mb"]) == 10


def test_the_cli_bench_times_the_start_beside_python_itself():
    report = bench("cli.py")
    assert report["runs"] == 3
    assert report["median_ms"]["python_pass"] > 0
    assert set(report["over_python_pass"]) == {
        "trader_help",
        "trader_config_show",
        "trader_backtest_help",
    }
