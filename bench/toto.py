"""Our Toto against the reference (PyPI toto-ts 0.2.0), side by side in one run. Prints JSON
lines: the setup, one per case the moment it ends, a summary (bench/harness.py `run_cases`).

Both load the same random weights in the published Toto-Open-Base-1.0 configuration (151M
parameters; written by the reference classes, in Datadog's file format) and forecast the
close/high/low of the last `--context` bars of SOLUSDT_1h.csv on this machine's CPU:

- latency: median over `--repeats` timed forecasts (after `--warmup` untimed ones) of one
  symbol for each horizon and sample count, quantiles out. The reference runs with
  samples_per_batch = num_samples and its KV cache, its fastest setting (as its docs advise);
- memory: peak RSS (ru_maxrss) of a fresh worker process per implementation and case, and its
  RSS once the weights are loaded;
- matching output: where our quantiles (levels 0.1 to 0.9, every variate and step) fall in the
  reference's samples, in standard errors of sampling: a mean near 0.8 is agreement;
- batching (ours): 8 symbols in one call against 8 calls of one symbol.

    .venv/bin/python bench/toto.py [--data DIR|FILE] [--repeats N] [--threads N] [--quick]
        [--case NAME]...
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

# The random-weight checkpoints and the reference's calls come from the conformance tests'
# helpers, so the bench measures what the tests check. The repository root replaces this
# script's folder on the path: this file's name would hide the reference's `toto` package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

from bench.harness import (  # noqa: E402
    SHARED_DATA,
    add_case_option,
    environment,
    median_ms,
    rss_mb,
    run_cases,
    run_worker,
    speedup_min,
)
from tests.integration.toto_reference import (  # noqa: E402
    PUBLISHED,
    SMALL,
    load_reference,
    quantile_z,
    reference_samples,
    write_checkpoint,
)
from trader.domain import Bar  # noqa: E402
from trader.forecast.oneshot import read_bars  # noqa: E402
from trader.forecast.protocol import ForecastRequest  # noqa: E402
from trader.forecast.toto import TotoForecaster, load_toto  # noqa: E402

DATA = "SOLUSDT_1h.csv"
VARIATES = ("close", "high", "low")
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def recording(data: Path) -> Path:
    """--data: a directory holding SOLUSDT_1h.csv, or a file of bars (tests pass an excerpt)."""
    return data if data.is_file() else data / DATA


def windows(args: argparse.Namespace) -> list[list[Bar]]:
    """`--symbols` windows of `--context` bars, 500 bars apart, ending at the file's end."""
    bars, _ = read_bars(recording(args.data), None)
    ends = [len(bars) - 500 * i for i in range(args.symbols)]
    return [bars[end - args.context : end] for end in ends]


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One implementation, one case, in this (fresh) process."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    inputs = windows(args)
    # The first window as the reference takes it: [1, V, T].
    x = torch.tensor([[getattr(b, v) for b in inputs[0]] for v in VARIATES]).unsqueeze(0)
    valid = torch.ones_like(x, dtype=torch.bool)
    if args.implementation == "reference":
        model = load_reference(args.checkpoint).model
        loaded = rss_mb()

        def run() -> None:
            with torch.inference_mode():
                samples = reference_samples(
                    model, x, valid, args.horizon, args.samples, per_batch=args.samples
                )
                samples.quantile(torch.tensor(LEVELS), dim=-1)

        def paths() -> torch.Tensor:
            return reference_samples(model, x, valid, args.horizon, args.samples, args.samples)[0]

    else:
        forecaster = TotoForecaster(
            load_toto(args.checkpoint), variates=VARIATES, num_samples=args.samples
        )
        loaded = rss_mb()
        requests = [
            ForecastRequest(f"S{i}/USDT", window, args.horizon, LEVELS)
            for i, window in enumerate(inputs)
        ]

        def run() -> None:
            if args.one_by_one:
                for request in requests:
                    forecaster.forecast([request])
            else:
                forecaster.forecast(requests)

        def paths() -> torch.Tensor:
            generator = torch.Generator().manual_seed(1)
            drawn = forecaster.sample_paths(x, valid, args.horizon, args.samples, generator)
            return drawn[0].permute(1, 2, 0)  # [S, V, H] -> [V, H, S]

    ms = median_ms(run, args.repeats, args.warmup)
    report: dict[str, Any] = {
        "ms_median": ms,
        "loaded_rss_mb": loaded,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if args.save:
        with torch.inference_mode():
            np.save(args.save, paths().numpy())
    return report


def agreement(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
    z = torch.stack(
        [quantile_z(torch.from_numpy(ours), torch.from_numpy(theirs), q) for q in LEVELS]
    )
    return {"mean_z": round(float(z.mean()), 3), "max_z": round(float(z.max()), 3)}


def side_by_side(command: list[str], horizon: int, samples: int, scratch: Path) -> dict[str, Any]:
    """Both implementations on one case, each in a fresh worker: their figures, the speedup and
    how well the quantiles agree."""
    figures: dict[str, Any] = {}
    results = {}
    for name in ("ours", "reference"):
        results[name] = result = run_worker(
            *command, "--worker", name,
            horizon=horizon, samples=samples, save=scratch / f"{name}.npy",
        )  # fmt: skip
        figures[f"{name}_ms_median"] = round(result["ms_median"], 1)
        figures[f"{name}_peak_rss_mb"] = round(result["peak_rss_mb"], 1)
        figures[f"{name}_loaded_rss_mb"] = round(result["loaded_rss_mb"], 1)
    figures["speedup"] = round(results["reference"]["ms_median"] / results["ours"]["ms_median"], 2)
    match = agreement(np.load(scratch / "ours.npy"), np.load(scratch / "reference.npy"))
    figures["quantile_mean_z"] = match["mean_z"]
    figures["quantile_max_z"] = match["max_z"]
    return figures


def batching(command: list[str], horizon: int, samples: int, batch: int) -> dict[str, Any]:
    """Ours: `batch` symbols in one call against one call per symbol."""
    options = {"horizon": horizon, "samples": samples, "symbols": batch}
    together = run_worker(*command, "--worker", "ours", **options)
    apart = run_worker(*command, "--worker", "ours", one_by_one=True, **options)
    return {
        "ms_median": round(together["ms_median"], 1),
        "one_by_one_ms_median": round(apart["ms_median"], 1),
        "cost_ratio": round(together["ms_median"] / apart["ms_median"], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--quick", action="store_true", help="small model and sizes: a smoke test")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before timing")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--context", type=int, default=512)
    add_case_option(parser)
    # Worker options (one implementation and case per process).
    parser.add_argument("--worker", dest="implementation", choices=["ours", "reference"])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--horizon", type=int)
    parser.add_argument("--samples", type=int)
    parser.add_argument("--symbols", type=int, default=1)
    parser.add_argument("--one-by-one", action="store_true")
    parser.add_argument("--save", type=Path, help="write the last sample paths here (.npy)")
    args = parser.parse_args()
    if not recording(args.data).is_file():
        sys.stderr.write(f"no {recording(args.data)}: pass --data DIR or FILE\n")
        return 2
    if args.implementation:
        sys.stdout.write("\n" + json.dumps(worker(args)) + "\n")
        return 0
    config, batch = PUBLISHED, 8
    cases = [(horizon, count) for horizon in (64, 256) for count in (64, 256)]
    batched = [(64, 256), (256, 64)]  # (horizon, sample paths)
    if args.quick:  # a smoke test: two cases side by side, one batching case
        config, batch, cases, batched = SMALL, 2, [(16, 8), (48, 32)], [(16, 32)]
        args.context, args.repeats, args.warmup = 128, 1, 0
    setup = environment("cpu") | {
        "torch_threads": args.threads,
        "model": "Toto-Open-Base-1.0 configuration, random weights"
        if not args.quick
        else "small configuration, random weights",
        "context": args.context,
        "repeats": args.repeats,
    }
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = Path(scratch) / "toto"
        command = [
            __file__, "--checkpoint", str(checkpoint), "--data", str(args.data),
            "--context", str(args.context), "--threads", str(args.threads),
            "--repeats", str(args.repeats), "--warmup", str(args.warmup),
        ]  # fmt: skip
        named: dict[str, Callable[[], dict[str, Any]]] = {
            f"h{h}_s{n}": partial(side_by_side, command, h, n, Path(scratch)) for h, n in cases
        }
        for h, n in batched:
            named[f"batch_{batch}_symbols_h{h}_s{n}"] = partial(batching, command, h, n, batch)
        prepare = partial(write_checkpoint, checkpoint, config, seed=0)
        return run_cases("toto", setup, named, args.case, speedup_min, prepare)


if __name__ == "__main__":
    sys.exit(main())
