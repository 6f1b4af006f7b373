"""What the benches share: where the full recordings are, timing after warm-up, and one fresh
worker process per case so that each case's peak RSS is its own."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The full recordings (tests use excerpts in tests/data/); $BENCH_DATA moves them (a name
# outside the daemon's TRADER_ settings, which refuse one they do not know).
SHARED_DATA = Path(
    os.environ.get("BENCH_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def interpreter() -> dict[str, str]:
    """Which Python ran the bench: its version, and the interpreter under the virtualenv (its
    build counts: an unoptimised one, e.g. pyenv's default, runs our Python code about a
    fifth slower than a distribution's profile-guided one)."""
    executable = getattr(sys, "_base_executable", sys.executable)
    return {"python": sys.version.split()[0], "python_executable": os.path.realpath(executable)}


def rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def reset_peak_rss() -> None:
    """Linux: restart the peak-RSS (VmHWM) count from the current RSS (ru_maxrss too)."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


def peak_rss_mb() -> float:
    """This process's peak RSS since it started or since `reset_peak_rss`."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def median_ms(run: Callable[[], object], repeats: int, warmup: int) -> float:
    # Untimed runs first: a fresh process's first forecasts pay for first-touch page faults
    # (expensive in a VM) until the allocator's pools have grown; a daemon pays that once.
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def run_worker(*command: str, **options: Any) -> dict[str, Any]:
    """Run `command` (a script and its arguments) in a fresh interpreter; its report, the last
    line it printed (reference code prints progress of its own). `options` become --flags:
    True is a bare flag, False and None are left out."""
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value not in (False, None):
            flags.append(f"{flag}={value}")
    done = subprocess.run(
        [sys.executable, *command, *flags], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"worker {' '.join(command + tuple(flags))} failed:\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report
