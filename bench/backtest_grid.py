"""Backtests at the command line on SOLUSDT_1h.csv, in worker processes beside one after the
other. Prints JSON.

- A grid of 8 backtests with `--jobs 2` beside `--jobs 1`: the same command twice, as a user
  runs it (`trader backtest --grid ...`): two strategies x position_fraction 0.1, 0.2 x
  ci_guard.k 1, 2. `jobs2_over_jobs1` is the wall time with two worker processes over the
  time with one (the acceptance: at most 0.6); `same_figures` whether every run's figures
  agree between the two.
- The plain backtest of the three default strategies (`trader backtest`, the whole file unless
  --from), its strategies side by side (the default) beside `--jobs 1`: `backtest_seconds`,
  `backtest_jobs1_seconds`, their ratio and `backtest_same_figures` (every line of stats.json).
Both on a forecast cache filled first (untimed). The machine's load while it ran is in
`load_before`: timings on a shared machine vary.

    .venv/bin/python bench/backtest_grid.py [--data DIR|FILE] [--from DATE] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import SHARED_DATA, interpreter

from trader.domain import from_epoch_ms
from trader.market.replay import read_recording

TRADER = Path(sys.executable).parent / "trader"
GRID = (
    "--strategy", "simple", "ci_guard", "--grid", "strategy.position_fraction=0.1,0.2",
    "--grid", "ci_guard.k=1,2",
)  # fmt: skip
KEEP = ("run", "strategy", "params", "sharpe", "total_return", "max_drawdown", "trades", "fills")


def backtest(path: Path, cache: Path, *args: str) -> float:
    """Seconds `trader backtest --data path ...args` took."""
    env = os.environ | {"TRADER_BACKTEST__CACHE_DIR": str(cache)}
    began = time.perf_counter()
    done = subprocess.run(
        [str(TRADER), "backtest", "--data", str(path), "--model", "baseline", *args],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"trader backtest failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - began


def grid(
    path: Path, cache: Path, out: Path, extra: list[str]
) -> tuple[float, list[dict[str, Any]]]:
    seconds = backtest(path, cache, *GRID, *extra, "--out", str(out))
    runs = json.loads((out / "grid.json").read_text())["runs"]
    return seconds, sorted(({k: r[k] for k in KEEP} for r in runs), key=lambda r: r["run"])


def figures(out: Path) -> dict[str, Any]:
    """What a backtest's report (stats.json) says, but how long its parts took."""
    stats = json.loads((out / "stats.json").read_text())
    for run in stats["runs"].values():
        run.pop("simulation_seconds")
    stats.pop("forecast_seconds")
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--from", dest="begin", help="first tick (default: the whole file)")
    parser.add_argument("--quick", action="store_true", help="the file's last 500 bars")
    args = parser.parse_args()
    path = args.data if args.data.is_file() else args.data / "SOLUSDT_1h.csv"
    if not path.is_file():
        sys.stderr.write(f"no {path}: pass --data DIR or FILE\n")
        return 2
    if args.quick:
        rows = read_recording(path).rows
        args.begin = from_epoch_ms(rows[-500][0]).strftime("%Y-%m-%dT%H:%M")
    period = ["--from", args.begin] if args.begin else []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cache = folder / "cache"
        # The forecasts first, untimed: both timed runs read them from the cache.
        backtest(path, cache, *period, "--strategy", "simple")
        load = os.getloadavg()[0]
        one, runs_one = grid(path, cache, folder / "one", [*period, "--jobs", "1"])
        two, runs_two = grid(path, cache, folder / "two", [*period, "--jobs", "2"])
        side = backtest(path, cache, *period, "--out", str(folder / "side"))
        alone = backtest(path, cache, *period, "--jobs", "1", "--out", str(folder / "alone"))
        same = figures(folder / "side") == figures(folder / "alone")
    report = {
        **interpreter(),
        "file": path.name,
        "period_from": args.begin,
        "runs": len(runs_one),
        "cores": os.cpu_count(),
        "load_before": round(load, 2),
        "jobs1_seconds": round(one, 2),
        "jobs2_seconds": round(two, 2),
        "jobs2_over_jobs1": round(two / one, 3),
        "same_figures": runs_one == runs_two,
        "backtest_seconds": round(side, 2),
        "backtest_jobs1_seconds": round(alone, 2),
        "backtest_over_jobs1": round(side / alone, 3),
        "backtest_same_figures": same,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
