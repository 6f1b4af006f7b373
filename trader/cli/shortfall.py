"""`trader shortfall LEDGER`: replay a daemon's period (paper or live) through the backtest's
engine, on the bars it stored, with the forecasts it made and the settings each of its starts
recorded, and compare the two tick by tick and order by order.

Exit status: 0 the replay reproduced every decision; 1 the same forecast, position, quote and
settings led to another decision (the first such tick is named first); 2 a wrong command line;
65 a ledger that cannot be replayed or attributed (the reason first); 73 an --out folder that
cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trader.cli.options import Verbs, load, utc_date, utc_end
from trader.exit_codes import EX_ARGUMENTS


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "shortfall",
        parents=[common],
        help="replay a daemon's ledger through the backtest and compare them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ledger", type=Path, metavar="LEDGER", help="the daemon's ledger")
    parser.add_argument("--from", dest="begin", type=utc_date, metavar="D",
                        help="first tick compared, UTC date or time")  # fmt: skip
    parser.add_argument("--to", dest="end", type=utc_end, metavar="D",
                        help="last tick compared, UTC (a date: all that day)")  # fmt: skip
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="replay with this setting instead of the recorded one (said in the output); "
        "VALUE is JSON, or text",
    )
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write the report here (report.md, report.html, shortfall.json, "
                        "plots) with the replay's ledger, comparison.json and costs.json (for "
                        "trader backtest --costs-from)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=run)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; ValueError naming one without `=`."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {pair!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            out[key.strip()] = text
    return out


def run(args: argparse.Namespace) -> int:
    from trader.shortfall.command import (  # noqa: PLC0415 - the engine loads when it runs
        ShortfallRequest,
        as_json,
        run_shortfall,
    )

    try:
        overrides = parse_overrides(args.overrides)
    except ValueError as error:
        sys.stderr.write(f"trader shortfall: {error}\n")
        return EX_ARGUMENTS
    # The replay's engine logs each tick's decisions at info: the lines printed say what
    # happened, so the log keeps to warnings unless asked for more (as `trader backtest`).
    args.log_level = args.log_level or "WARNING"
    loaded = load(args)
    request = ShortfallRequest(
        args.ledger, loaded.settings, overrides, args.begin, args.end, args.out
    )
    outcome = run_shortfall(request)
    if args.out is not None:  # the report, or exit 73 with the reason first
        from trader.shortfall.report import with_report  # noqa: PLC0415 - as run_shortfall

        outcome = with_report(outcome, args.out, args.begin, args.end)
    sys.stdout.writelines(f"{line}\n" for line in outcome.lines)
    if args.json and outcome.comparison is not None:
        document = as_json(outcome.comparison, outcome.attribution)
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
    return outcome.code
