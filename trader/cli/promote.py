"""`trader promote --paper LEDGER`: judge a paper daemon's record (days traded, ticks skipped,
its shortfall against its backtest replay, forecast skill against the naive, drawdown against
the replay's) by the `[promote]` thresholds; when it clears every one, write the live
settings (broker.mode = live, broker.live_capital_fraction, the ramp, a ledger of their own)
and the promotion record beside them. Live trading itself still needs its own opt-ins.

Exit status: 0 written; 1 refused (the reasons first, one a line); 2 a wrong command line;
65 a ledger that cannot be judged; 73 the live settings cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from trader.cli.options import Verbs, load
from trader.exit_codes import EX_ARGUMENTS

if TYPE_CHECKING:
    from trader.domain.capital_ramp import RampStep


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "promote",
        parents=[common],
        help="judge a paper record and write live settings when it is good enough",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--paper", type=Path, metavar="LEDGER", required=True,
                        help="the paper daemon's ledger")  # fmt: skip
    parser.add_argument("--out", type=Path, metavar="FILE", default=Path("live.toml"),
                        help="the live settings to write (default live.toml); the record "
                        "goes beside it as FILE's name .promotion.json")  # fmt: skip
    parser.add_argument("--live-ledger", type=Path, metavar="FILE",
                        help="the live daemon's ledger (default: beside --out, named after "
                        "it, .sqlite3)")  # fmt: skip
    parser.add_argument("--fraction", metavar="F",
                        help="broker.live_capital_fraction: the share of equity live sizing "
                        "starts from (default: the ramp's first step, else 0.1)")  # fmt: skip
    parser.add_argument("--ramp", default="", metavar="STEPS",
                        help='raise the share in steps, counted in days from the promotion: '
                        '"0.1:7d,0.25:14d,1.0"')  # fmt: skip
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="replay the backtest with this setting instead of the recorded one "
                        "(the backtest you validated, say with other costs)")  # fmt: skip
    parser.set_defaults(handler=run)


DEFAULT_FRACTION = Decimal("0.1")


def run(args: argparse.Namespace) -> int:
    from trader.cli.shortfall import parse_overrides  # noqa: PLC0415
    from trader.domain.capital_ramp import parse_ramp  # noqa: PLC0415
    from trader.promote.command import PromoteRequest, run_promote  # noqa: PLC0415

    try:
        overrides = parse_overrides(args.overrides)
        ramp = parse_ramp(args.ramp)
        fraction = _fraction(args.fraction, ramp)
    except ValueError as error:  # DomainError too
        sys.stderr.write(f"trader promote: {error}\n")
        return EX_ARGUMENTS
    out: Path = args.out
    ledger = args.live_ledger or out.with_name(out.stem + ".sqlite3")
    args.log_level = args.log_level or "WARNING"  # the replay's ticks, as `trader shortfall`
    loaded = load(args)
    request = PromoteRequest(
        args.paper, loaded.settings, out, ledger, fraction, ramp, datetime.now(UTC), overrides
    )
    outcome = run_promote(request)
    sys.stdout.writelines(f"{line}\n" for line in outcome.lines)
    return outcome.code


def _fraction(text: str | None, ramp: tuple[RampStep, ...]) -> Decimal:
    """--fraction, checked against the ramp's first step (they are the same share)."""
    from trader.domain.capital_ramp import parse_ramp  # noqa: PLC0415

    if text is None:
        return ramp[0].fraction if ramp else DEFAULT_FRACTION
    (step,) = parse_ramp(text)  # one step, no length: a fraction, checked as a ramp's are
    if ramp and ramp[0].fraction != step.fraction:
        raise ValueError(
            f"--fraction {text} is not the ramp's first step {ramp[0].fraction}: the ramp "
            "starts at the fraction (leave --fraction out to take the ramp's)"
        )
    return step.fraction
