"""The rule `trader bench compile` applies, and `--mode production-check`'s exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trader.bench import compile as bench
from trader.config.schema import Settings


def run(
    p50_ms: float = 100.0,
    *,
    recompiles: int = 0,
    graph_breaks: int = 0,
    skips: int = 0,
    forced: str | None = None,
    outputs: list[list[float]] | None = None,
) -> dict[str, Any]:
    stats = {
        "recompiles": recompiles, "graph_breaks": graph_breaks, "cudagraph_skips": skips,
        "forced_eager": forced,
    }  # fmt: skip
    return {
        "runtime": "x", "mode_at_end": "eager" if forced else "compile", "device": "cpu",
        "first_call_s": 1.0, "compile_s": 0.5, "compile_after_warmup_s": 0.0, "total_s": 2.0,
        "latency_ms": [p50_ms], "p50_ms": p50_ms, "p99_ms": p50_ms, "after_warmup": stats,
        "warmup": stats | {"forced_eager": None}, "reasons": {}, "peak_memory_mb": 100.0,
        "memory_kind": "peak process RSS", "outputs": outputs or [[100.0, 101.0]],
    }  # fmt: skip


def test_compiling_is_advised_only_when_every_part_of_the_rule_holds():
    eager = run(200.0)
    assert bench.advise(eager, run(100.0), 0.0).compile
    assert bench.advise(eager, run(134.0), 0.0).failures == (
        "p50 only 1.49x eager's (needs >= 1.5x)",
    )
    failing = bench.advise(eager, run(50.0, recompiles=1, graph_breaks=2, skips=3), 2e-3)
    assert failing.failures == (
        "1 recompiles after warm-up",
        "2 graph breaks after warm-up",
        "3 CUDA-graph skips after warm-up",
        "forecasts differ from eager by 2.0e-03 (> 1e-03)",
    )
    forced = bench.advise(eager, run(50.0, forced="torch hit its recompile limit"), 0.0)
    assert forced.failures == ("torch stopped compiling it: torch hit its recompile limit",)
    assert not bench.advise(eager, run(50.0), float("nan")).compile


def test_agreement_is_the_largest_relative_quantile_difference():
    eager = run(outputs=[[100.0, 200.0], [50.0]])
    assert bench.agreement_of(eager, run(outputs=[[100.0, 200.2], [50.0]])) == pytest.approx(1e-3)
    assert bench.agreement_of(eager, run(outputs=[[100.0], [50.0]])) == float("inf")


@pytest.mark.parametrize(
    ("compiled_p50", "mode", "code"),
    [(50.0, "production-check", 0), (90.0, "production-check", 1), (90.0, "quick", 0)],
)
def test_production_check_exits_1_when_compiling_fails_the_rule(
    monkeypatch, tmp_path, capsys, compiled_p50, mode, code
):
    runs = {"eager": run(100.0), "compile": run(compiled_p50)}
    monkeypatch.setattr(
        bench, "_side_by_side", lambda specs, ticks: [runs["eager"], runs["compile"]]
    )
    args = bench.CompileBenchRequest(
        model="toto", mode=mode, device="cpu", weights=tmp_path, size="small",
        out=tmp_path / "report.json",
    )  # fmt: skip
    assert bench.run_bench_compile(Settings(), args) == code
    out = capsys.readouterr().out
    assert (
        "recommendation: " + ("compile" if code == 0 and mode != "quick" else "keep eager") in out
    )
    assert Path(args.out).is_file()
