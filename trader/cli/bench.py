"""`trader bench compile`: a model eager against compiled on this machine, and which to use."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import Verbs, add_check_arguments, load


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    bench = verbs.add_parser(
        "bench", help="measure on this machine: eager against compiled inference"
    )
    kinds = bench.add_subparsers(dest="bench_verb", required=True, metavar="BENCH")
    compile_ = kinds.add_parser(
        "compile",
        parents=[common],
        help="a model eager against torch.compile on the same ticks; a table, JSON and advice",
        description="Run the model eagerly and compiled, each in a fresh process, over the same "
        "ticks (varying context lengths and symbol counts, repeated shapes): compile time, "
        "p50/p99 latency after warm-up, recompiles, graph breaks and CUDA-graph skips (from "
        "torch's own logs), peak memory and output agreement, then a recommendation by a "
        "stated rule. With --mode production-check the exit code is 1 when compiling fails "
        "the rule.",
    )
    compile_.add_argument("--model", choices=["toto", "toto2", "kronos"], default="toto")
    compile_.add_argument(
        "--mode", choices=["quick", "production-check"], default="quick", help="how many ticks"
    )
    add_check_arguments(compile_)
    compile_.add_argument("--compile-mode", help="torch.compile mode, e.g. reduce-overhead")
    compile_.add_argument("--data", type=Path, help="CSV/Parquet bars (default: random walks)")
    compile_.add_argument(
        "--horizon",
        type=int,
        action="append",
        help="bars ahead (repeat; default: forecast.horizon)",
    )
    compile_.add_argument("--samples", type=int, help="sample paths (default: the model's setting)")
    compile_.add_argument(
        "--out", type=Path, metavar="FILE", help="JSON report (default: var/bench/compile-*.json)"
    )
    compile_.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trader.bench.compile import CompileBenchRequest, run_bench_compile  # noqa: PLC0415

    request = CompileBenchRequest(
        model=args.model, mode=args.mode, device=args.device, compile_mode=args.compile_mode,
        samples=args.samples, horizons=args.horizon, data=args.data, weights=args.weights,
        tokenizer=args.tokenizer, size=args.size, out=args.out,
    )  # fmt: skip
    return run_bench_compile(load(args).settings, request)
