"""`trader <verb>`: the daemon and its tools, one module per verb.

Each verb module owns its parser (`add`) and its handler (`run`), and imports what the verb
needs (torch, ccxt, pandas, pydantic) only when it runs: every parser is built on each start,
so `trader --help` stays as quick as Python itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trader.cli import (
    backtest,
    bench,
    config,
    demo,
    doctor,
    download,
    evaluate,
    finetune,
    forecast,
    ledger,
    promote,
    reconcile,
    run,
    sandbox,
    shortfall,
)
from trader.cli.options import common_options
from trader.exit_codes import EX_CONFIG

VERBS = (
    run, demo, download, forecast, backtest, evaluate, finetune, doctor, bench, reconcile,
    ledger, sandbox, config, shortfall, promote,
)  # fmt: skip


class _Version(argparse.Action):
    """--version, with the version read from the package metadata only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import trader  # noqa: PLC0415

        sys.stdout.write(f"trader {trader.__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trader", description="Paper/live trading daemon driven by time-series models."
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    common = common_options()
    for verb in VERBS:
        verb.add(verbs, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Imported here: pydantic (behind ConfigError) loads only once a verb runs.
    from trader.config import ConfigError  # noqa: PLC0415

    try:
        code: int = args.handler(args)
    except ConfigError as error:
        sys.stderr.write("trader: invalid settings:\n")
        sys.stderr.writelines(f"  - {problem}\n" for problem in error.problems)
        return EX_CONFIG
    except KeyboardInterrupt:
        return 130
    return code
