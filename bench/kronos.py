"""Our Kronos against the reference predictor (PyPI kronos-model-arch), side by side. Prints JSON
lines: the setup, one per case the moment it ends, a summary (bench/harness.py `run_cases`).

Both load the same random weights in the published Kronos-small + Tokenizer-base configuration
(written by the reference classes themselves) and forecast from the first `--context` bars of
XSHG_600977_5min.csv, `--horizon` bars ahead, on this machine's CPU:

- latency: median (and minimum) over `--repeats` timed runs, after `--warmup` untimed ones, of
  one symbol with 1 and with 8 sample paths, sampling as the daemon does (temperature 1, top-p
  0.9); `speedup` is the ratio of the medians. On a shared machine the minimum is the steadier
  figure: other work only ever adds time;
- memory, per implementation and case in a fresh worker process (Linux figures):
  `peak_rss_mb`, the process's peak RSS (VmHWM: imports, loading the weights, forecasting);
  `loaded_rss_mb`, its RSS once loaded, before the first forecast; `forecast_peak_rss_mb`, the
  peak RSS while forecasting (VmHWM, reset after loading), so the last minus the loaded one is
  what inference adds;
- exactness: greedy decoding (top-k 1) by both, the largest relative difference of the bars,
  and whether they agree to the published tolerance (1e-5);
- batching (ours): 8 symbols in one call against 8 calls of one symbol.

    .venv/bin/python bench/kronos.py [--data DIR|FILE] [--repeats N] [--threads N] [--quick]
        [--case NAME]...
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

# The random-weight checkpoints and the reference's inputs come from the conformance tests'
# helpers, so the bench measures exactly what the tests check.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    SHARED_DATA,
    add_case_option,
    environment,
    peak_rss_mb,
    reset_peak_rss,
    rss_mb,
    run_cases,
    run_worker,
    speedup_min,
)
from tests.integration.kronos_reference import (  # noqa: E402
    SMALL,
    Checkpoints,
    bars,
    read_bars,
    reference_predict,
    reference_predictor,
    write_random,
)
from trader.forecast.kronos.loading import load_model, load_tokenizer  # noqa: E402
from trader.forecast.kronos.predictor import KronosForecaster  # noqa: E402
from trader.forecast.kronos.sampling import Sampling  # noqa: E402
from trader.forecast.protocol import ForecastRequest  # noqa: E402

DATA = "XSHG_600977_5min.csv"
SAMPLED = {"T": 1.0, "top_k": 0, "top_p": 0.9}
GREEDY = {"T": 1.0, "top_k": 1, "top_p": 1.0}
RTOL = 1e-5


def _timed(run: Any, repeats: int, warmup: int) -> list[float]:
    # Untimed runs first: a fresh process's first forecasts pay for first-touch page faults
    # (expensive in a VM) until the allocator's pools have grown; a daemon pays that once.
    for _ in range(warmup):
        run()
    out = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        out.append((time.perf_counter() - began) * 1000)
    return out


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One implementation, one case, in this (fresh) process."""
    torch.set_num_threads(args.threads)
    checkpoints = Checkpoints(args.checkpoints / "Kronos-small", args.checkpoints / "tokenizer")
    frame = read_bars(recording(args.data))
    sampling = GREEDY if args.greedy else SAMPLED
    windows = [frame.iloc[i * 250 : i * 250 + args.context] for i in range(args.symbols)]
    if args.implementation == "reference":
        predictor = reference_predictor(checkpoints, SMALL.max_context)
        loaded = rss_mb()
        outputs: list[Any] = []

        def run() -> None:
            outputs[:] = [
                reference_predict(
                    predictor, windows[0], args.horizon, sample_count=args.samples, **sampling
                )
            ]

    else:
        forecaster = KronosForecaster(
            load_model(checkpoints.model),
            load_tokenizer(checkpoints.tokenizer),
            max_context=SMALL.max_context,
            sample_count=args.samples,
            sampling=Sampling(sampling["T"], int(sampling["top_k"]), sampling["top_p"]),
            seed=0,
            device=torch.device("cpu"),
        )
        requests = [
            ForecastRequest(f"S{i}/CNY", bars(w, symbol=f"S{i}/CNY"), args.horizon, [0.5])
            for i, w in enumerate(windows)
        ]
        loaded = rss_mb()
        outputs = []

        def run() -> None:
            if args.one_by_one:
                paths = [p for r in requests for p in forecaster.paths([r])]
            else:
                paths = forecaster.paths(requests)
            outputs[:] = [paths[0].mean(0).numpy()]

    loading_peak = peak_rss_mb()
    reset_peak_rss()  # resets ru_maxrss too: the loading peak is kept above
    latencies = _timed(run, args.repeats, args.warmup)
    forecast_peak = peak_rss_mb()
    return {
        "ms_median": statistics.median(latencies),
        "ms_min": min(latencies),
        "loaded_rss_mb": loaded,
        "forecast_peak_rss_mb": forecast_peak,
        "peak_rss_mb": max(loading_peak, forecast_peak),
        "bars": np.asarray(outputs[0]).tolist(),
    }


def case(args: argparse.Namespace, checkpoints: Path, implementation: str, **kw: Any) -> Any:
    """One implementation and case in a fresh worker: its figures."""
    options = {"samples": 1, "symbols": 1, "repeats": args.repeats, "warmup": args.warmup} | kw
    return run_worker(
        __file__, "--worker", implementation, checkpoints=checkpoints, data=args.data,
        context=args.context, horizon=args.horizon, threads=args.threads, **options,
    )  # fmt: skip


def greedy(args: argparse.Namespace, checkpoints: Path) -> dict[str, Any]:
    """Both implementations decode greedily: how far apart their bars are."""
    ours = case(args, checkpoints, "ours", greedy=True, repeats=1, warmup=0)
    theirs = case(args, checkpoints, "reference", greedy=True, repeats=1, warmup=0)
    difference = np.abs(np.subtract(ours["bars"], theirs["bars"])) / np.abs(theirs["bars"])
    return {
        "max_relative_difference": float(difference.max()),
        "identical": bool(difference.max() <= RTOL),
    }


def sampled(args: argparse.Namespace, checkpoints: Path, count: int) -> dict[str, Any]:
    """Both implementations sampling `count` paths of one symbol: latency and memory."""
    ours = case(args, checkpoints, "ours", samples=count)
    theirs = case(args, checkpoints, "reference", samples=count)
    figures: dict[str, Any] = {}
    for figure in ("ms_median", "ms_min"):
        figures[f"ours_{figure}"] = round(ours[figure], 1)
        figures[f"reference_{figure}"] = round(theirs[figure], 1)
    figures["speedup"] = round(theirs["ms_median"] / ours["ms_median"], 2)
    for name, result in (("ours", ours), ("reference", theirs)):
        for figure in ("peak_rss_mb", "loaded_rss_mb", "forecast_peak_rss_mb"):
            figures[f"{name}_{figure}"] = round(result[figure], 1)
    return figures


def batching(args: argparse.Namespace, checkpoints: Path, count: int, batch: int) -> dict[str, Any]:
    """Ours: `batch` symbols in one call against one call per symbol."""
    together = case(args, checkpoints, "ours", samples=count, symbols=batch)
    apart = case(args, checkpoints, "ours", samples=count, symbols=batch, one_by_one=True)
    return {
        "ms_median": round(together["ms_median"], 1),
        "one_by_one_ms_median": round(apart["ms_median"], 1),
        "cost_ratio": round(together["ms_median"] / apart["ms_median"], 3),
    }


def recording(data: Path) -> Path:
    """--data: a directory holding the 5-minute file, or a file of bars (tests pass an excerpt)."""
    return data if data.is_file() else data / DATA


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs before timing")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--context", type=int, default=400)
    parser.add_argument("--horizon", type=int, default=24)
    add_case_option(parser)
    # Worker options (one implementation and case per process).
    parser.add_argument("--worker", dest="implementation", choices=["ours", "reference"])
    parser.add_argument("--checkpoints", type=Path)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--symbols", type=int, default=1)
    parser.add_argument("--greedy", action="store_true")
    parser.add_argument("--one-by-one", action="store_true")
    args = parser.parse_args()
    if not recording(args.data).is_file():
        sys.stderr.write(f"no {recording(args.data)}: pass --data DIR or FILE\n")
        return 2
    if args.implementation:
        sys.stdout.write("\n" + json.dumps(worker(args)) + "\n")
        return 0
    if args.quick:
        args.context, args.horizon, args.repeats = 64, 4, 1
    samples = (1,) if args.quick else (1, 8)
    batch = 2 if args.quick else 8
    setup = environment("cpu") | {
        "torch_threads": args.threads,
        "model": "Kronos-small + Kronos-Tokenizer-base configuration, random weights",
        "data": str(recording(args.data)),
        "context": args.context,
        "horizon": args.horizon,
        "repeats": args.repeats,
    }
    with tempfile.TemporaryDirectory() as scratch:
        checkpoints = Path(scratch)
        named: dict[str, Callable[[], dict[str, Any]]] = {
            "greedy": partial(greedy, args, checkpoints)
        }
        for count in samples:
            named[f"samples_{count}"] = partial(sampled, args, checkpoints, count)
        for count in samples:
            named[f"batch_{batch}_symbols_samples_{count}"] = partial(
                batching, args, checkpoints, count, batch
            )
        prepare = partial(write_random, checkpoints, SMALL)
        return run_cases("kronos", setup, named, args.case, speedup_min, prepare)


if __name__ == "__main__":
    sys.exit(main())
