"""What the benches share: where the full recordings are, timing after warm-up, one fresh
worker process per case so that each case's peak RSS is its own, and the JSON lines a model
bench writes as it goes (`run_cases`), so that a run cut short keeps every case it finished."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback
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


class WorkerFailed(SystemExit):
    """A worker process exited non-zero (a SystemExit, so a bench that does not catch it still
    ends with the message and status 1; `run_cases` records it as that case's failure)."""


class Interrupted(BaseException):
    """SIGTERM (a timeout, a killed job) or SIGINT arrived while a case ran: a BaseException,
    so that a case's own error handling cannot take it for a failure and go on."""


class _Stop:
    """What a signal asked for, between the handler and the code it interrupted: a worker being
    started or awaited is killed and `run_worker` raises once it is back (an exception raised
    inside Popen could leave a started worker behind); anywhere else the handler raises."""

    signal: str | None = None
    in_worker = False
    worker: subprocess.Popen[str] | None = None

    @classmethod
    def check(cls) -> None:
        if cls.signal is not None:
            raise Interrupted(cls.signal)


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
    _Stop.in_worker = True
    try:
        with subprocess.Popen(
            [sys.executable, *command, *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ) as process:  # fmt: skip
            _Stop.worker = process
            try:
                _Stop.check()  # a signal while it started
                stdout, stderr = process.communicate()
                _Stop.check()  # a signal while it ran: the handler killed it
            except BaseException:
                process.kill()
                raise
    finally:
        _Stop.in_worker, _Stop.worker = False, None
    if process.returncode:
        raise WorkerFailed(f"worker {' '.join(command + tuple(flags))} failed:\n{stderr}")
    report: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return report


def _interrupt(signum: int, _frame: object) -> None:
    # An exception, not the default death: the case's worker is killed, and the summary line
    # still says what was finished and what was not.
    _Stop.signal = signal.Signals(signum).name
    if not _Stop.in_worker:
        raise Interrupted(_Stop.signal)
    if _Stop.worker is not None:
        _Stop.worker.kill()


def add_case_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--case",
        action="append",
        metavar="NAME",
        help="run only this case (repeatable; an unknown name lists the cases)",
    )


def _cpu_name() -> str:
    with open("/proc/cpuinfo") as cpuinfo:
        named = (line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
        return f"{next(named, platform.processor())} ({os.cpu_count()} cores)"


def environment(device: str) -> dict[str, Any]:
    """Where the figures were taken: the device, its driver, torch and its CUDA build, Python."""
    import torch  # noqa: PLC0415 - only the model benches need it

    gpu = device.startswith("cuda")
    driver = None
    if gpu and shutil.which("nvidia-smi"):
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        driver = query.stdout.strip().splitlines()[0] if query.returncode == 0 else None
    return {
        "device": device,
        "device_name": torch.cuda.get_device_name(device) if gpu else _cpu_name(),
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        **interpreter(),
    }


def _line(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


def run_cases(
    bench: str,
    setup: dict[str, Any],
    cases: dict[str, Callable[[], dict[str, Any]]],
    chosen: list[str] | None,
    summarise: Callable[[dict[str, dict[str, Any]]], dict[str, Any]] = lambda _: {},
    prepare: Callable[[], object] | None = None,
) -> int:
    """Run the `chosen` cases (None: all, in order), writing JSON lines to stdout, each flushed
    the moment it is known: the setup first, then one line per case as it ends, then a summary.
    `prepare` (writing the random checkpoints) runs once after the setup line, before the cases;
    `summarise` turns the finished cases' figures into the summary's.
    A killed or timed-out run leaves its finished cases behind; the summary of a run that did
    not finish every case says which were left, and its exit status is not 0: 1, a case failed
    (its line says why, the others still run); 128 + the signal, interrupted (143: SIGTERM,
    what `timeout` sends). An unknown case name: exit 2, the cases listed, nothing run."""
    names = chosen or list(cases)
    unknown = [name for name in names if name not in cases]
    if unknown:
        sys.stderr.write(f"unknown case {', '.join(unknown)}; the cases: {', '.join(cases)}\n")
        return 2
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    done: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    interrupted = error = None
    try:
        _line("setup", bench=bench, cases=names, **setup)
        try:
            if prepare is not None:
                prepare()
        except Exception as failure:  # no case can run: the summary says so
            error = f"preparing the cases failed: {failure}"
            sys.stderr.write(f"{error}\n{traceback.format_exc()}\n")
        for name in names if error is None else []:
            _Stop.check()
            began = time.perf_counter()
            try:
                figures = cases[name]()
            except (WorkerFailed, Exception) as failure:  # recorded; the next case runs
                failed.append(name)
                message = str(failure.code if isinstance(failure, SystemExit) else failure)
                sys.stderr.write(f"case {name} failed:\n{traceback.format_exc()}\n")
                _line("case", case=name, failed=message[-2000:])
                continue
            done[name] = figures
            _line("case", case=name, seconds=round(time.perf_counter() - began, 1), **figures)
    except Interrupted as signal_name:
        interrupted = str(signal_name)
        sys.stderr.write(f"{bench} bench interrupted by {interrupted}: {len(done)} cases done\n")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    left = [name for name in names if name not in done and name not in failed]
    complete = not failed and not left and error is None
    figures = summarise(done) if done else {}
    _line(
        "summary", bench=bench, complete=complete, done=list(done), failed=failed, left=left,
        interrupted=interrupted, error=error, **figures,
    )  # fmt: skip
    if interrupted:
        return 128 + signal.Signals[interrupted]
    return 0 if complete else 1


def speedup_min(done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A summary: the smallest speedup (reference time over ours) of the finished cases."""
    speedups = [figures["speedup"] for figures in done.values() if "speedup" in figures]
    return {"speedup_min": min(speedups)} if speedups else {}
