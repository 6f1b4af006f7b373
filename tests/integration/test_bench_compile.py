"""`trader bench compile --mode quick` on this machine: eager against compiled Toto on the same
ticks, in fresh processes; the table, the JSON report, the advice by its rule."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.integration.conftest import TRADER, clean_env

pytestmark = pytest.mark.integration


def test_the_quick_compile_bench_prints_the_table_and_writes_the_report(tmp_path):
    out = tmp_path / "compile.json"
    result = subprocess.run(
        [TRADER, "bench", "compile", "--mode", "quick", "--size", "small", "--samples", "32",
         "--device", "cpu", "--out", str(out)],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    table = result.stdout
    for row in (
        "first tick (warm-up), s", "torch compile time, s", "p50 tick after warm-up, ms",
        "p99 tick after warm-up, ms", "recompiles after warm-up", "graph breaks after warm-up",
        "CUDA-graph skips after warm-up", "peak process RSS, MiB", "output agreement",
        "recommendation: ", "rule: compile only with 0 recompiles",
    ):  # fmt: skip
        assert row in table, row
    assert "RANDOM weights in a small toto architecture" in table
    report = json.loads(out.read_text())
    assert report["workload"]["ticks_after_warmup"] == 8
    assert report["workload"]["symbols_per_tick"] == [1, 2, 3]
    assert len(report["eager"]["latency_ms"]) == len(report["compile"]["latency_ms"]) == 8
    assert report["compile"]["compile_s"] > 0 == report["eager"]["compile_s"]
    # Our Toto compiled: nothing recompiles after warm-up, and the forecasts are eager's.
    assert report["compile"]["after_warmup"] == {
        "recompiles": 0, "graph_breaks": 0, "cudagraph_skips": 0, "forced_eager": None,
    }  # fmt: skip
    assert report["agreement_max_relative_difference"] < 1e-3
    assert report["recommendation"] == ("compile" if report["speedup_p50"] >= 1.5 else "eager")
