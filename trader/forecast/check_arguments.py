"""Arguments the model checks (`trader doctor`, `trader bench compile`) share: which weights
to run on, and what stands in when there are none. No torch: every CLI parser is built at once."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: forecast.device)")
    parser.add_argument("--weights", type=Path, metavar="DIR", help="checkpoint directory")
    parser.add_argument("--tokenizer", type=Path, metavar="DIR", help="Kronos tokenizer")
    parser.add_argument(
        "--size",
        choices=["published", "small"],
        default="published",
        help="architecture of the random weights used when no real ones are found",
    )
