"""The model benches keep what they measured: one JSON line per case the moment it ends, a
summary line last, `--case` to run one, and a run killed half-way (SIGTERM, what `timeout`
sends) leaves its finished cases behind and its worker gone. Tiny random models, the recorded
excerpts in tests/data/."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.recorded import SOLUSDT_1H, XSHG_600977_5MIN

pytestmark = pytest.mark.integration

ENV = os.environ | {"BENCH_DATA": str(ROOT / "tests" / "data")}


def lines(stdout: str) -> list[dict[str, Any]]:
    """Every line a bench writes to stdout is one JSON object."""
    return [json.loads(line) for line in stdout.splitlines()]


def run(script: str, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick", *args],
        env=ENV, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return done.returncode, lines(done.stdout), done.stderr


def children(pid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as listed:
        return {int(child) for child in listed.read().split()}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_bench_killed_half_way_leaves_its_finished_cases_as_json_lines():
    bench = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "finetune.py"), "--quick", "--device", "cpu",
         "--data", str(SOLUSDT_1H)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert bench.stdout is not None
    try:
        setup = json.loads(bench.stdout.readline())
        assert setup["kind"] == "setup"
        assert setup["cases"] == ["toto", "kronos"]
        first = json.loads(bench.stdout.readline())  # written the moment the case ended
        assert first["kind"] == "case"
        assert first["case"] == "toto"
        # The next case's worker is running: the kill lands in the middle of a case.
        workers: set[int] = set()
        while not workers and bench.poll() is None:
            time.sleep(0.01)
            workers = children(bench.pid)
        bench.send_signal(signal.SIGTERM)
        rest, stderr = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert workers, "the bench ended before its second case began"
    assert bench.returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted by SIGTERM" in stderr
    # Its worker did not outlive it (killed by the bench, or by the kernel as the bench ended).
    # (The kernel's SIGKILL lands as the bench exits: a moment to act, not a figure measured.)
    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if alive(pid)]
    [summary] = lines(rest)
    assert summary == summary | {
        "kind": "summary", "bench": "finetune", "complete": False, "done": ["toto"],
        "left": ["kronos"], "failed": [], "interrupted": "SIGTERM",
    }  # fmt: skip
    # The finished case kept its figures: both implementations' steps and their comparison.
    for side in ("ours", "reference"):
        assert first[side]["ms_median"] > 0
        assert first[side]["parameters"] > 0
        assert first[side]["first_loss"] > 0
    assert first["speedup"] == pytest.approx(
        first["reference"]["ms_median"] / first["ours"]["ms_median"], rel=0.01
    )


def test_case_runs_only_the_case_named():
    status, out, stderr = run(
        "kronos.py", "--data", str(XSHG_600977_5MIN), "--case", "greedy", "--case", "samples_1"
    )
    assert status == 0, stderr
    assert [line["kind"] for line in out] == ["setup", "case", "case", "summary"]
    setup, greedy, sampled, summary = out
    assert setup["cases"] == ["greedy", "samples_1"]
    assert setup["device"] == "cpu"
    assert setup["torch"]
    assert greedy["case"] == "greedy"
    # Same random weights, greedy decoding: ours and the reference agree bar for bar.
    assert greedy["identical"] is True
    assert sampled["case"] == "samples_1"
    assert sampled["ours_ms_median"] > 0
    assert sampled["speedup"] == pytest.approx(
        sampled["reference_ms_median"] / sampled["ours_ms_median"], rel=0.05
    )
    assert summary["complete"] is True
    assert summary["done"] == ["greedy", "samples_1"]
    assert summary["speedup_min"] == sampled["speedup"]


def test_an_unknown_case_is_refused_with_the_list_of_cases():
    status, out, stderr = run("toto.py", "--data", str(SOLUSDT_1H), "--case", "h999_s1")
    assert status == 2
    assert out == []
    assert "unknown case h999_s1" in stderr
    assert "h16_s8" in stderr


def test_a_case_that_fails_is_recorded_and_the_others_still_run(tmp_path: Path):
    # A file of no bars: the case's workers fail, and the failure is that case's line.
    empty = tmp_path / "empty.csv"
    empty.write_text("timestamps,open,high,low,close,volume,amount\n")
    status, out, stderr = run("kronos.py", "--data", str(empty), "--case", "greedy")
    assert status == 1
    assert [line["kind"] for line in out] == ["setup", "case", "summary"]
    assert "worker" in out[1]["failed"]
    assert out[2]["failed"] == ["greedy"]
    assert out[2]["complete"] is False
    assert "case greedy failed" in stderr
