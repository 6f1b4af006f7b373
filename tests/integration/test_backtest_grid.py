"""`trader backtest --grid` as a user runs it: every combination in worker processes, one table
sorted by the metric asked for, each run's report linked, the deflated Sharpe ratio of the
best over the number of trials; a run's figures equal the single backtest's with the same
settings; the same grid on a local Ray cluster the test starts and stops gives the same
figures; a walk-forward reports only its test windows; bad input is refused before any run.
Real recorded bars (tests/data), a short period and a small context, so that each run is
short."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import missing_binary
from tests.integration.conftest import TRADER, clean_env
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration

PERIOD = ("--from", "2020-11-01", "--to", "2020-11-12")
GRID = (
    "--strategy", "simple", "ci_guard", "--grid", "strategy.position_fraction=0.1,0.3",
    "--grid", "risk.min_edge_bps=0",
)  # fmt: skip
# No fees and a small context: the baseline's forecasts trade, and each run is short.
SETTINGS = {
    "TRADER_MARKET__CONTEXT_BARS": "64",
    "TRADER_FORECAST__BASELINE_LOOKBACK": "32",
    "TRADER_BROKER__TAKER_FEE_BPS": "0",
    "TRADER_BROKER__MAKER_FEE_BPS": "0",
}


def trader(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    settings = SETTINGS | {"TRADER_BACKTEST__CACHE_DIR": str(cwd / "cache")} | env
    return subprocess.run(
        [TRADER, "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline", *args],
        cwd=cwd, env=clean_env(**settings), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("grid")
    done = trader(folder, *PERIOD, *GRID, "--jobs", "2", "--out", str(folder / "out"))
    assert done.returncode == 0, done.stderr
    assert "Deflated Sharpe ratio (Bailey and López de Prado, 2014) over the 4 trials" in (
        done.stdout
    )
    assert "it is the best of 4, not the result" in done.stdout
    return folder / "out"


def runs(out: Path) -> list[dict]:
    return json.loads((out / "grid.json").read_text())["runs"]


def figures(out: Path) -> list[dict]:
    """Each run's figures in the grid's summary (not how long it took)."""
    keep = ("run", "strategy", "params", "sharpe", "total_return", "max_drawdown", "trades")
    return [{k: r[k] for k in keep} for r in runs(out)]


def test_a_grid_runs_every_combination_sorted_with_each_report_linked(grid):
    found = runs(grid)
    assert [(r["strategy"], r["params"]["strategy.position_fraction"]) for r in found] != []
    assert sorted((r["strategy"], r["params"]["strategy.position_fraction"]) for r in found) == [
        ("ci_guard", "0.1"), ("ci_guard", "0.3"), ("simple", "0.1"), ("simple", "0.3"),
    ]  # fmt: skip
    sharpes = [r["sharpe"] for r in found if r["sharpe"] is not None]
    assert sharpes == sorted(sharpes, reverse=True)
    assert sum(r["trades"] for r in found) > 0, "nothing traded: the table would prove nothing"
    page = (grid / "grid.html").read_text()
    for run in found:
        assert (grid / run["report"]).is_file()
        assert f'href="{run["report"]}"' in page
    summary = json.loads((grid / "grid.json").read_text())
    assert summary["trials"] == 4
    assert 0.0 <= summary["deflated_sharpe"]["probability"] <= 1.0


def test_a_runs_figures_equal_the_single_backtests(grid, tmp_path):
    (run,) = [
        r for r in runs(grid)
        if r["strategy"] == "simple" and r["params"]["strategy.position_fraction"] == "0.3"
    ]  # fmt: skip
    single = trader(
        tmp_path, *PERIOD, "--strategy", "simple", "--out", str(tmp_path / "single"),
        TRADER_STRATEGY__POSITION_FRACTION="0.3", TRADER_RISK__MIN_EDGE_BPS="0",
    )  # fmt: skip
    assert single.returncode == 0, single.stderr
    mine = json.loads((grid / Path(run["report"]).parent / "stats.json").read_text())
    theirs = json.loads((tmp_path / "single" / "stats.json").read_text())
    assert mine["lines"] == theirs["lines"]
    (line,) = [x for x in theirs["lines"] if x["strategy"] == "simple"]
    assert line["performance"]["sharpe"] == run["sharpe"]
    # The forecasts' section and plots: worked out and drawn once in a worker, then the same
    # in each of its runs' reports, and the single backtest's.
    plots = sorted((tmp_path / "single").glob("*_baseline_*.png"))
    assert [p.name for p in plots] == [
        "calibration_baseline_SOLUSDT.png",
        "forecast_baseline_SOLUSDT.png",
    ]
    for each in runs(grid):
        folder = grid / Path(each["report"]).parent
        stats = json.loads((folder / "stats.json").read_text())
        assert stats["forecast_quality"] == theirs["forecast_quality"]
        for plot in plots:
            assert (folder / plot.name).read_bytes() == plot.read_bytes(), plot.name
            assert plot.name in (folder / "report.md").read_text()


def test_the_same_grid_on_a_local_ray_cluster_gives_the_same_figures(grid, tmp_path, monkeypatch):
    # The cluster this test starts, and only it, takes this token (Ray authenticates). Ray
    # reads it when first imported.
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    for name, value in auth.items():
        monkeypatch.setenv(name, value)
    try:
        import ray  # noqa: PLC0415
    except ImportError:
        missing_binary("ray (pip install 'trader[ray]')")
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = context.address_info["gcs_address"]
        out = tmp_path / "out"
        done = trader(tmp_path, *PERIOD, *GRID, "--ray", address, "--out", str(out), **auth)
    finally:
        ray.shutdown()
    assert done.returncode == 0, done.stderr
    assert figures(out) == figures(grid)


def test_the_same_grid_in_one_process_gives_the_same_figures(grid, tmp_path):
    # --jobs 1: the runs follow one another in the grid's process, on what it prepared.
    out = tmp_path / "out"
    done = trader(tmp_path, *PERIOD, *GRID, "--jobs", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert figures(out) == figures(grid)


def test_a_walk_forward_reports_only_its_test_windows(tmp_path):
    done = trader(
        tmp_path, "--from", "2020-10-25", "--to", "2020-11-13", "--strategy", "simple",
        "--grid", "strategy.position_fraction=0.1,0.3", "--grid", "risk.min_edge_bps=0",
        "--walk-forward", "200/100", "--jobs", "2", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "on each training window the best of 2 combinations" in done.stdout
    assert "out of sample (" in done.stdout
    report = json.loads((tmp_path / "out" / "walk_forward.json").read_text())
    (line,) = report["lines"]
    folds = line["folds"]
    assert len(folds) == 3
    for fold in folds:
        trained, tested = fold[1], fold[2]
        assert trained.split(" .. ")[1] <= tested.split(" .. ")[0]  # tested after training
        assert (tmp_path / "out" / fold[-1].split("(")[1].rstrip(")")).is_file()


@pytest.mark.parametrize(
    ("args", "env", "code", "says"),
    [
        (("--grid", "strategy.positon_fraction=0.1"), {}, 2, "did you mean"),
        (("--grid", "risk.min_edge_bps=abc"), {}, 2, "risk.min_edge_bps=abc"),
        (("--grid", "risk.min_edge_bps=1,2,3"), {"TRADER_BACKTEST__MAX_TRIALS": "2"}, 2, "--yes"),
        (("--yes",), {}, 2, "apply to a grid"),
        (("--grid", "risk.min_edge_bps=1", "--ray", "127.0.0.1:1"), {"NO_RAY": "1"}, 78,
         "pip install 'trader[ray]'"),
    ],
)  # fmt: skip
def test_bad_grid_input_is_refused_before_any_run(tmp_path, args, env, code, says):
    if env.pop("NO_RAY", None):
        # Ray made unimportable, as where the extra is not installed.
        (tmp_path / "no_ray").mkdir()
        (tmp_path / "no_ray" / "ray.py").write_text("raise ImportError('no ray here')\n")
        env["PYTHONPATH"] = str(tmp_path / "no_ray")
    done = trader(tmp_path, *PERIOD, "--strategy", "simple", *args, **env)
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cache").exists()  # no run started, no forecast computed


def _children(parent: int) -> dict[str, bytes]:
    """`parent`'s child processes: their command lines, by pid."""
    found = {}
    for task in Path(f"/proc/{parent}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended
            continue
        for child in children:
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:  # the child ended
                continue
    return found


def _kill_a_worker(parent: int, deadline: float) -> bytes | None:
    """SIGKILL the first of `parent`'s workers to appear, as the out-of-memory killer would:
    its command line, or None if none appeared before `deadline`. A worker is a child seen
    twice with the same command line but multiprocessing's resource tracker (which, forked
    a moment before it runs its own, has its parent's command line at first)."""
    seen: dict[str, bytes] = {}
    while time.monotonic() < deadline:
        children = _children(parent)
        for child, command in children.items():
            if seen.get(child) == command and b"resource_tracker" not in command:
                os.kill(int(child), signal.SIGKILL)
                return command
        seen = children
        time.sleep(0.01)
    return None


@pytest.mark.parametrize(
    ("mode", "spawned"),
    [
        # A plain grid: workers forked from the grid's process, which prepared the runs.
        (PERIOD, False),
        # A walk-forward's folds: spawned workers prepare their own.
        (("--from", "2020-10-25", "--to", "2020-11-13", "--walk-forward", "200/100"), True),
    ],
    ids=["forked-runs", "spawned-workers"],
)
def test_a_grid_worker_that_is_killed_ends_the_grid_with_one_line_saying_so(
    tmp_path, mode, spawned
):
    settings = SETTINGS | {"TRADER_BACKTEST__CACHE_DIR": str(tmp_path / "cache")}
    command = [
        TRADER, "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline", *mode, *GRID,
        "--jobs", "2",
    ]  # fmt: skip
    with subprocess.Popen(
        command, cwd=tmp_path, env=clean_env(**settings), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    ) as process:  # fmt: skip
        try:
            killed = _kill_a_worker(process.pid, time.monotonic() + 120)
            out, err = process.communicate(timeout=120)
        finally:  # a grid that hangs fails this test, it never hangs the suite
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert killed is not None, err
    assert (b"spawn_main" in killed) is spawned  # a forked worker runs the parent's command
    assert process.returncode == 1, err
    assert "a worker process ended abruptly (killed, or out of memory?)" in err
    assert "runs unfinished (--jobs 1: one after the other, here)" in err
    assert "Traceback" not in err
    assert "Deflated Sharpe" not in out  # no table of a grid that did not finish
    assert "walk-forward:" not in out
