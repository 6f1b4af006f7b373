"""`trader demo`: the daemon at work in a minute, offline, on a recorded excerpt it ships with."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import Verbs, positive


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    demo = verbs.add_parser(
        "demo",
        help="run the real daemon offline over a bundled recording, then summarise its ledger",
        description="Runs `trader run --replay` on the first 1,000 hours of SOL/USDT that ship "
        "with trader, with the paper broker and (by default) the baseline forecaster, at replay "
        "speed for a bounded number of ticks, with /metrics on a free port; then prints what "
        "the ledger says happened. Nothing is downloaded. Exit 0: the daemon ran every tick, and "
        "skipped at most backtest.max_skipped_share of them, as a backtest allows.",
    )
    demo.add_argument(
        "--model",
        choices=["baseline", "toto", "kronos"],
        default="baseline",
        help="toto and kronos need their weights in the Hugging Face cache (default: baseline)",
    )
    demo.add_argument("--ticks", type=positive, default=240, help="hourly ticks (default 240)")
    demo.add_argument(
        "--speed", type=float, default=86_400.0, help="multiple of real time (default: a day/s)"
    )
    demo.add_argument(
        "--dir", type=Path, default=Path("var/demo"), help="its files (default: var/demo)"
    )
    demo.add_argument(
        "--allow-skips",
        action="store_true",
        help="exit 0 even when the symbol skipped more than backtest.max_skipped_share of the "
        "ticks (the summary still says so first)",
    )
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trader.demo.run import DemoOptions, run_demo  # noqa: PLC0415

    return run_demo(DemoOptions(args.dir, args.model, args.ticks, args.speed, args.allow_skips))
