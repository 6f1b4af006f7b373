"""Runs side by side in forked worker processes: results in order, failures raised here."""

from __future__ import annotations

import os
import time

import pytest

from trader.backtest.run import run_niceness
from trader.backtest.side_by_side import (
    ChildFailed,
    default_workers,
    fork_refusal,
    run_side_by_side,
)
from trader.config.trading_settings import StrategySettings

pytestmark = pytest.mark.skipif(fork_refusal() is not None, reason="this platform cannot fork")


def test_results_come_back_in_order_from_other_processes():
    big = list(range(200_000))  # made here, read there without being sent
    tasks = [lambda i=i: (i, os.getpid(), sum(big) + i) for i in range(5)]
    done, waited = [], []
    results = run_side_by_side(
        tasks, 2, while_waiting=lambda: waited.append(True), on_done=done.append
    )
    assert [r[0] for r in results] == list(range(5))
    assert [r[2] for r in results] == [sum(big) + i for i in range(5)]
    assert os.getpid() not in {r[1] for r in results}
    assert sorted(done) == list(range(5))
    assert waited == [True]


def test_at_most_the_workers_asked_run_at_once(tmp_path):
    def task(i: int) -> int:
        mark = tmp_path / f"{i}.running"
        mark.touch()
        time.sleep(0.2)
        running = len(list(tmp_path.glob("*.running")))
        mark.unlink()
        return running

    assert max(run_side_by_side([lambda i=i: task(i) for i in range(4)], 2)) <= 2


def test_a_task_that_raises_raises_here_with_the_workers_traceback():
    def fails() -> None:
        raise ValueError("the data cannot be backtested")

    with pytest.raises(ValueError, match="cannot be backtested") as raised:
        run_side_by_side([lambda: 1, fails], 2)
    assert any("in the worker process" in note for note in raised.value.__notes__)


def test_a_worker_that_dies_is_reported():
    with pytest.raises(ChildFailed, match="code 3"):
        run_side_by_side([lambda: os._exit(3)], 1)


def test_a_result_that_cannot_be_sent_back_is_reported():
    with pytest.raises(ChildFailed, match="could not be sent back"):
        run_side_by_side([lambda: lambda: None], 1)


def test_no_worker_outlives_a_failure_here(tmp_path):
    """Work done here while the workers run fails: the workers are ended, not left running."""
    pids = tmp_path / "pids"

    def slow() -> None:
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(60)

    def started() -> int:
        return len(pids.read_text().split()) if pids.exists() else 0

    def fails_here() -> None:
        while started() < 2:
            time.sleep(0.01)
        raise RuntimeError("the quality section failed")

    began = time.monotonic()
    with pytest.raises(RuntimeError, match="quality section"):
        run_side_by_side([slow, slow], 2, while_waiting=fails_here)
    assert time.monotonic() - began < 30
    for pid in map(int, pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_task_given_niceness_runs_that_much_lower():
    here = os.nice(0)
    lowered = run_side_by_side([lambda: os.nice(0)] * 3, 3, niceness=[10, 0, 3])
    assert lowered == [min(here + 10, 19), here, min(here + 3, 19)]  # 19: the lowest there is


@pytest.mark.parametrize(
    ("strategies", "consensus", "niceness"),
    [
        (["simple", "ci_guard", "maxdiff"], False, [10, 10, 0]),  # the short give way
        (["maxdiff", "simple"], False, [0, 10]),
        (["simple", "ci_guard"], False, [0, 0]),  # all as short: none gives way
        (["maxdiff"], False, [0]),
        (["simple", "maxdiff"], True, [0, 0]),  # a consensus gate: every tick in the engine
    ],
)
def test_short_runs_give_way_to_the_long_ones_beside_them(strategies, consensus, niceness):
    settings = StrategySettings(consensus=consensus)
    assert run_niceness(settings, strategies) == niceness


@pytest.mark.parametrize(
    ("cores", "runs", "workers"),
    [(1, 1, 1), (1, 3, 2), (2, 1, 2), (2, 3, 3), (2, 9, 4), (8, 1, 2), (8, 5, 5)],
)
def test_default_workers_one_a_run_two_at_least_with_several_cores(
    monkeypatch, cores, runs, workers
):
    """A single run goes to a worker too where there is a core for this process's own work
    meanwhile; never more than twice the cores."""
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert default_workers(runs) == workers
