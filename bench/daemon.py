"""The daemon's own costs, side by side in one run. Prints JSON.

1. Event-loop lag while a model forecasts. A Toto with random weights in the published
   Toto-Open-Base-1.0 size (151M parameters; our own classes; `--size small` for a 4-layer
   one) forecasts two symbols of `--context` recorded bars, `--samples` paths, horizon 1 (a
   tick's batch), `--forecasts` times, while a monitor asks the loop to wake every 5 ms and
   records how late it wakes:
   - `offloop`: through the daemon's path (the model's slot on the device's worker thread),
     with torch on every core but one, as the daemon sets it for a model on the CPU;
   - `offloop_all_cores`: the same with torch's default threads (every core), for comparison;
   - `onloop`: the same calls made on the event loop, for comparison (what the worker avoids);
   - `idle`: the loop with nothing to do, the machine's floor.
   Target: offloop p99 under 10 ms.
2. Resident memory over a simulated month: `trader run --replay` (the real daemon, in its own
   process: scheduler, metrics endpoint, ledger) over 30 days of hourly SOL/USDT and a copy
   as BTC/USDT, with a small random-weight Toto, as fast as it goes. RSS is sampled with the
   number of ticks booked; growth is measured from 10% of the month (after warm-up and the
   allocators' first growth) to its end. Target: growth under 5%.

    .venv/bin/python bench/daemon.py [--data DIR|FILE] [--size published|small] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

from bench.harness import SHARED_DATA  # noqa: E402
from tests.integration.toto_reference import PUBLISHED, SMALL  # noqa: E402
from tests.unit.forecast.toto.builders import write  # noqa: E402
from trader.daemon.inference import (  # noqa: E402
    InferenceWorker,
    ModelSlot,
    leave_a_core_to_the_loop,
)
from trader.daemon.loop_lag import LoopLagMonitor, percentile  # noqa: E402
from trader.domain import Bar  # noqa: E402
from trader.forecast.oneshot import read_bars  # noqa: E402
from trader.forecast.protocol import ForecastRequest  # noqa: E402
from trader.forecast.toto import TotoForecaster  # noqa: E402
from trader.forecast.toto.config import TotoConfig  # noqa: E402
from trader.forecast.toto.model import TotoModel  # noqa: E402

TRADER = str(Path(sys.executable).parent / "trader")
LEVELS = (0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9)
MONTH_TICKS = 30 * 24


def random_model(config: dict[str, Any], seed: int = 0) -> TotoModel:
    torch.manual_seed(seed)
    model = TotoModel(TotoConfig.from_json(config, "bench"))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    return model.eval()


def recording(data: Path) -> Path:
    """--data: a directory holding SOLUSDT_1h.csv, or a file of SOL/USDT bars (.csv, .csv.gz:
    tests pass an excerpt)."""
    return data if data.is_file() else data / "SOLUSDT_1h.csv"


def requests(data: Path, context: int) -> list[ForecastRequest]:
    bars, _ = read_bars(recording(data), None)
    window = bars[-context:]
    scaled = [
        Bar("BTC/USDT", b.timeframe, b.start, b.open * 10, b.high * 10, b.low * 10, b.close * 10,
            b.volume)
        for b in window
    ]  # fmt: skip
    return [
        ForecastRequest("SOL/USDT", window, 1, LEVELS),
        ForecastRequest("BTC/USDT", scaled, 1, LEVELS),
    ]


def lag_summary(lags: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(lags, 50) * 1000, 3),
        "p99_ms": round(percentile(lags, 99) * 1000, 3),
        "max_ms": round(max(lags, default=0.0) * 1000, 3),
        "samples": len(lags),
    }


async def measure_lag(args: argparse.Namespace) -> dict[str, Any]:
    config = PUBLISHED if args.size == "published" else SMALL
    model = TotoForecaster(random_model(config), num_samples=args.samples)
    slot = ModelSlot("toto", "cpu")
    slot.load(model)
    batch = requests(args.data, args.context)
    worker = InferenceWorker("cpu")
    slot.warm_up(batch)
    monitor = LoopLagMonitor(interval_s=0.005)
    running = asyncio.create_task(monitor.run())

    async def lags_during(work: Any) -> tuple[list[float], list[float]]:
        await asyncio.sleep(0.2)
        monitor.clear()
        times = []
        for _ in range(args.forecasts):
            began = time.perf_counter()
            await work()
            times.append(time.perf_counter() - began)
        return list(monitor.samples), times

    async def offloop() -> None:
        await worker.run(partial(slot.forecast, batch))

    async def onloop() -> None:
        slot.forecast(batch)  # blocks the loop: the comparison case
        await asyncio.sleep(0.02)  # the monitor records the wake-up that was held up

    async def idle() -> None:
        await asyncio.sleep(forecast_s)

    default_threads = torch.get_num_threads()
    all_cores, all_cores_times = await lags_during(offloop)
    daemon_threads = leave_a_core_to_the_loop()  # what the daemon does on the CPU
    off, off_times = await lags_during(offloop)
    forecast_s = statistics.median(off_times)
    on, _ = await lags_during(onloop)
    quiet, _ = await lags_during(idle)
    running.cancel()
    worker.shutdown()
    torch.set_num_threads(default_threads)
    parameters = sum(p.numel() for p in model.model.parameters())
    return {
        "model": f"toto {args.size} (random weights, {parameters / 1e6:.0f}M parameters)",
        "batch": f"2 symbols x {args.context} bars, {args.samples} samples, horizon 1",
        "cpu_count": os.cpu_count(),
        "forecasts": args.forecasts,
        "torch_threads": daemon_threads,
        "forecast_s_median": round(forecast_s, 3),
        "lag_offloop": lag_summary(off),
        "torch_threads_all_cores": default_threads,
        "forecast_s_median_all_cores": round(statistics.median(all_cores_times), 3),
        "lag_offloop_all_cores": lag_summary(all_cores),
        "lag_onloop": lag_summary(on),
        "lag_idle": lag_summary(quiet),
        "offloop_p99_under_10ms": percentile(off, 99) < 0.010,
    }


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def booked(ledger: Path) -> int:
    try:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=1) as c:
            return int(c.execute("SELECT count(*) FROM ticks").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def measure_month(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    path = recording(args.data)
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        lines = handle.read().splitlines()
    rows = lines[1 : 1 + args.month_context + args.ticks + 1]
    (tmp / "SOLUSDT_1h.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    scaled = []
    for row in rows:
        t, o, h, lo, c, v, a = row.split(",")
        scaled.append(",".join([t, *(repr(float(x) * 10) for x in (o, h, lo, c)), v, a]))
    (tmp / "BTCUSDT_1h.csv").write_text("\n".join([lines[0], *scaled]) + "\n")
    weights = write(tmp / "toto-small", random_model_state(SMALL), SMALL)
    ledger = tmp / "ledger.sqlite3"
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    env |= {
        "TRADER_LEDGER__PATH": str(ledger),
        "TRADER_METRICS__PORT": "0",
        "TRADER_FORECAST__MODEL": "toto",
        "TRADER_FORECAST__DEVICE": "cpu",
        "TRADER_FORECAST__TOTO__REPO": str(weights),
        "TRADER_FORECAST__TOTO__NUM_SAMPLES": "64",
        "TRADER_MARKET__CONTEXT_BARS": str(args.month_context),
        "TRADER_STRATEGY__NAME": "maxdiff",
        "TRADER_STRATEGY__ALLOW_SHORT": "true",
        "TRADER_MARKET__REPLAY_AMOUNT_STEP": "0.001",
        "TRADER_LOG__LEVEL": "WARNING",
    }
    command = [TRADER, "run", "--replay", str(tmp / "SOLUSDT_1h.csv"), str(tmp / "BTCUSDT_1h.csv")]
    began = time.perf_counter()
    # Its closing verdict (skipped ticks) goes to our stderr: our stdout is the JSON report.
    process = subprocess.Popen(
        command, env=env, cwd=tmp, stdout=sys.stderr, stderr=subprocess.PIPE, text=True
    )
    samples: list[tuple[int, float]] = []
    while process.poll() is None:
        ticks = booked(ledger)
        try:
            rss = rss_mb(process.pid)
        except OSError:
            break
        if rss > 0:  # 0 once the process is exiting
            samples.append((ticks, rss))
        time.sleep(0.25)
    stderr = process.communicate()[1]
    if process.returncode != 0:
        raise SystemExit(f"the daemon failed ({process.returncode}):\n{stderr[-3000:]}")
    total = booked(ledger)
    # From 10% of the month to the moment it was all booked (later samples are the exit).
    running = [rss for ticks, rss in samples if total * 0.1 <= ticks < total]
    done = [rss for ticks, rss in samples if ticks >= total]
    start, end = running[0], (done or running)[0]
    return {
        "month_ticks": total,
        "month_symbols": 2,
        "month_model": f"toto small (random weights), 64 samples, context {args.month_context}",
        "month_wall_s": round(time.perf_counter() - began, 1),
        "month_rss_mb_at_10pct": round(start, 1),
        "month_rss_mb_at_end": round(end, 1),
        "month_rss_mb_peak": round(max(rss for _, rss in samples), 1),
        "month_rss_growth_pct": round((end - start) / start * 100, 2),
        "month_rss_by_decile_mb": [
            round(next(rss for ticks, rss in samples if ticks >= total * d / 10), 1)
            for d in range(1, 11)
            if any(ticks >= total * d / 10 for ticks, _ in samples)
        ],
        "month_growth_under_5pct": (end - start) / start < 0.05,
    }


def random_model_state(config: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {name: t.contiguous() for name, t in random_model(config).state_dict().items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--size", choices=["published", "small"], default="published")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--forecasts", type=int, default=5)
    parser.add_argument("--ticks", type=int, default=MONTH_TICKS)
    parser.add_argument("--month-context", type=int, default=256)
    parser.add_argument("--quick", action="store_true", help="small model, short runs (tests)")
    args = parser.parse_args()
    if args.quick:
        args.size, args.context, args.samples, args.forecasts = "small", 128, 16, 3
        args.ticks, args.month_context = 100, 64
    report = asyncio.run(measure_lag(args))
    with tempfile.TemporaryDirectory() as tmp:
        report |= measure_month(args, Path(tmp))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
