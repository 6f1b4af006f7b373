"""Our Toto 2.0 against the reference (PyPI toto-2 2.0.0, in .venv/toto2-reference), on the
same inputs and the same random weights. Prints JSON lines: the setup, one per case the moment
it ends (`--conformance` is a case of its own), a summary (bench/harness.py `run_cases`).

Both load one checkpoint per size, written by the reference's own save_pretrained, and
forecast the close/high/low of the last `--context` bars of SOLUSDT_1h.csv (one symbol, three
variates) on this machine's CPU (or --device cuda), each implementation and case in a fresh
process: median of `--repeats` timed forecasts after `--warmup` untimed ones, peak RSS of the
process. Cases: the 4m and 22m configurations at horizons 64 (one pass) and 256 (decode
blocks of 128 steps: the KV-cached path), and the 313m one at horizon 64. `*_max_rel_diff` is
the largest relative difference of the nine quantiles between the two.

    .venv/bin/python bench/toto2.py [--data DIR|FILE] [--repeats N] [--threads N] [--quick]
        [--case NAME]...
    .venv/bin/python bench/toto2.py --write-random DIR [--size 22m]   # a random checkpoint
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

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

from bench.harness import (  # noqa: E402
    SHARED_DATA,
    add_case_option,
    environment,
    median_ms,
    run_cases,
    run_worker,
    speedup_min,
)
from tests.integration.toto2_reference import reference_python, run  # noqa: E402
from trader.forecast.random_weights import TOTO2_SMALL  # noqa: E402
from trader.forecast.toto2 import load_toto2  # noqa: E402
from trader.forecast.toto2.decode import Inputs, forecast_knots  # noqa: E402
from trader.forecast.toto2.presets import PRESETS, preset_config  # noqa: E402

DATA = "SOLUSDT_1h.csv"
VARIATES = ("close", "high", "low")
CASES = [("4m", 64, 0), ("4m", 256, 128), ("22m", 64, 0), ("22m", 256, 128), ("313m", 64, 0)]


def recording(data: Path) -> Path:
    return data if data.is_file() else data / DATA


def save_inputs(data: Path | None, context: int, path: Path) -> None:
    """The last `context` bars of the recording (None: a seeded random walk)."""
    if data is None:
        generator = torch.Generator().manual_seed(0)
        close = 100 * torch.exp(0.01 * torch.randn(context, generator=generator).cumsum(0))
        spread = 0.004 * torch.rand(2, context, generator=generator).abs()
        target = torch.stack([close, close * (1 + spread[0]), close * (1 - spread[1])])[None]
    else:
        from trader.forecast.oneshot import read_bars  # noqa: PLC0415 - pandas, only here

        bars, _ = read_bars(recording(data), None)
        window = bars[-context:]
        target = torch.tensor([[[getattr(b, v) for b in window] for v in VARIATES]])
    observed = torch.ones_like(target, dtype=torch.bool)
    torch.save({"target": target, "observed": observed, "series": torch.zeros(1, 3).long()}, path)


# Conformance on a device: (batch, context steps, unobserved on the left, horizon, block).
CONFORMANCE = [(3, 512, 0, 64, 0), (2, 500, 45, 150, 64), (1, 256, 0, 300, 128)]


def conformance(args: argparse.Namespace, python: Path, root: Path) -> dict[str, Any]:
    """Ours and the reference on `args.device`, on the same random checkpoints (small, 4m,
    22m) and inputs: the largest relative difference of the quantiles per case."""
    configs = {"small": TOTO2_SMALL, "4m": preset_config("4m"), "22m": preset_config("22m")}
    run(
        {"checkpoints": [
            {"directory": str(root / n), "config": c, "seed": 0} for n, c in configs.items()
        ]},
        python,
    )  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    jobs, ours = [], {}
    device = torch.device(args.device)
    for name in configs:
        model = load_toto2(root / name).model.to(device)
        for index, (batch, length, pad, horizon, block) in enumerate(CONFORMANCE):
            key = f"{name}_b{batch}_ctx{length}_pad{pad}_h{horizon}_block{block}"
            generator = torch.Generator().manual_seed(index)
            padded = -(-length // 32) * 32
            target = torch.zeros(batch, 3, padded)
            target[..., padded - length + pad :] = 50 + torch.randn(
                batch, 3, length - pad, generator=generator
            ).cumsum(-1)
            observed = target != 0
            path = root / f"{key}.pt"
            torch.save(
                {"target": target, "observed": observed, "series": torch.zeros(batch, 3).long()},
                path,
            )
            missing = bool((~torch.unflatten(observed, -1, (-1, 32)).any(-1)).any())
            inputs = Inputs(
                target.to(device),
                observed.to(device),
                torch.zeros(batch, 3).long().to(device),
                missing,
            )
            with torch.inference_mode():
                ours[key] = forecast_knots(model, inputs, horizon, block or None).cpu()
            jobs.append({
                "key": key, "checkpoint": str(root / name), "inputs": str(path), "horizon": horizon,
                "decode_block": block or None, "missing": missing, "device": args.device,
            })  # fmt: skip
    run({"cases": jobs, "out": str(root / "reference.pt")}, python)
    theirs = torch.load(root / "reference.pt")
    report: dict[str, Any] = {}
    for key, mine in ours.items():
        ref = theirs[key]
        report[f"{key}_max_rel_diff"] = float(
            f"{float(((mine - ref).abs() / ref.abs().clamp_min(1e-6)).max()):.2e}"
        )
    report["conformance_max_rel_diff"] = max(report.values())
    report["conformance_within_1e-4"] = report["conformance_max_rel_diff"] <= 1e-4
    return report


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Ours, one case, in this (fresh) process."""
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = load_toto2(args.checkpoint).model.to(device)
    saved = torch.load(args.inputs)
    inputs = Inputs(
        saved["target"].to(device), saved["observed"].to(device), saved["series"].to(device), False
    )
    knots: list[torch.Tensor] = []

    def once() -> None:
        with torch.inference_mode():
            knots[:] = [forecast_knots(model, inputs, args.horizon, args.decode_block or None)]
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    ms = median_ms(once, args.repeats, args.warmup)
    torch.save(knots[0].cpu(), args.save)
    return {
        "ms_median": ms,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def case_name(args: argparse.Namespace, case: tuple[str, int, int]) -> str:
    size, horizon, block = case
    return f"{size}_ctx{args.context}_h{horizon}" + (f"_block{block}" if block else "")


def side_by_side(
    args: argparse.Namespace,
    python: Path,
    checkpoint: Callable[[], Path],
    case: tuple[str, int, int],
    scratch: Path,
) -> dict[str, Any]:
    """Ours and the reference on one case, each in a fresh process: times, memory, agreement."""
    _, horizon, block = case
    inputs = scratch / "inputs.pt"
    ours = run_worker(
        __file__, "--worker", "--checkpoint", str(checkpoint()), "--inputs", str(inputs),
        horizon=horizon, decode_block=block, repeats=args.repeats, warmup=args.warmup,
        threads=args.threads, device=args.device, save=scratch / "ours.pt",
    )  # fmt: skip
    theirs = json.loads(
        run(
            {"time": {
                "checkpoint": str(checkpoint()), "inputs": str(inputs), "horizon": horizon,
                "decode_block": block or None, "missing": False, "repeats": args.repeats,
                "warmup": args.warmup, "threads": args.threads, "device": args.device,
                "save": str(scratch / "reference.pt"),
            }},
            python,
            threads=args.threads,
        ).strip().splitlines()[-1]
    )  # fmt: skip
    a, b = torch.load(scratch / "ours.pt"), torch.load(scratch / "reference.pt")
    return {
        "ours_ms_median": round(ours["ms_median"], 2),
        "reference_ms_median": round(theirs["ms_median"], 2),
        "speedup": round(theirs["ms_median"] / ours["ms_median"], 2),
        "ours_peak_rss_mb": round(ours["peak_rss_mb"], 1),
        "reference_peak_rss_mb": round(theirs["peak_rss_mb"], 1),
        "max_rel_diff": float(f"{float(((a - b).abs() / b.abs().clamp_min(1e-6)).max()):.2e}"),
    }


def random_checkpoint(python: Path, folder: Path, config: dict[str, Any]) -> Path:
    """A random checkpoint written by the reference's save_pretrained (once per size)."""
    if not folder.exists():
        run({"checkpoints": [{"directory": str(folder), "config": config, "seed": 0}]}, python)
    return folder


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--synthetic", action="store_true", help="a random walk, not --data")
    parser.add_argument("--conformance", action="store_true", help="also check the quantiles")
    parser.add_argument("--quick", action="store_true", help="a small model: a smoke test")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--sizes", help="comma-separated sizes to time (default: all cases; none: no timing)"
    )
    add_case_option(parser)
    parser.add_argument("--write-random", type=Path, metavar="DIR", help="write a checkpoint")
    parser.add_argument("--size", default="22m", choices=[*PRESETS, "small"])
    # Worker options (ours, one case per process).
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--horizon", type=int)
    parser.add_argument("--decode-block", type=int, default=0)
    parser.add_argument("--save", type=Path)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    python = reference_python()
    if python is None:
        sys.stderr.write("no reference Toto 2.0: `make venv` builds .venv/toto2-reference\n")
        return 2
    if args.write_random:
        config = TOTO2_SMALL if args.size == "small" else preset_config(args.size)
        label = (
            f"RANDOM weights in the Toto-2.0-{args.size} configuration (written by the "
            "reference's save_pretrained): the forecasts mean nothing"
        )
        run(
            {
                "checkpoints": [
                    {
                        "directory": str(args.write_random),
                        "config": config,
                        "seed": 0,
                        "label": label,
                    }
                ]
            },
            python,
        )
        sys.stdout.write(f"{label}\n{args.write_random}\n")
        return 0
    if args.worker:
        sys.stdout.write("\n" + json.dumps(worker(args)) + "\n")
        return 0
    if not args.synthetic and not recording(args.data).is_file():
        sys.stderr.write(f"no {recording(args.data)}: pass --data DIR or FILE\n")
        return 2
    cases = CASES
    configs = {size: preset_config(size) for size in {c[0] for c in CASES}}
    if args.quick:
        configs, cases = {"small": TOTO2_SMALL}, [("small", 16, 0), ("small", 48, 16)]
        args.context, args.repeats, args.warmup = 128, 1, 0
    if args.sizes:
        cases = [c for c in cases if c[0] in args.sizes.split(",")]
    setup = environment(args.device) | {
        "torch_threads": args.threads,
        "model": "Toto 2.0 configurations (presets), random weights",
        "data": "random walk" if args.synthetic else str(recording(args.data)),
        "context": args.context,
        "repeats": args.repeats,
        "warmup": args.warmup,
    }
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        named: dict[str, Callable[[], dict[str, Any]]] = {}
        if args.conformance:
            named["conformance"] = partial(conformance, args, python, root / "conformance")
        for case in cases:
            checkpoint = partial(random_checkpoint, python, root / case[0], configs[case[0]])
            named[case_name(args, case)] = partial(
                side_by_side, args, python, checkpoint, case, root
            )
        inputs = None if args.synthetic else args.data
        prepare = partial(save_inputs, inputs, args.context, root / "inputs.pt")
        return run_cases("toto2", setup, named, args.case, speedup_min, prepare)


if __name__ == "__main__":
    sys.exit(main())
