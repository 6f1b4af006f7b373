"""`trader reconcile`: reconcile the ledger with its broker now, and print the report.

It books what the ledger missed (fills while no daemon ran, orders that ended) and records the
report; an unexplained mismatch leaves trading HALTED in the ledger, so a daemon started
after it will not trade until a person has looked. While a daemon holds the ledger it only
reads (a dry run): the daemon reconciles on its own schedule, and two writers must never
book the same fill. A perpetual account's positions are listed with side, size, leverage,
margin, liquidation price and its distance from the mark, unrealised P&L and funding paid.
Exit status: 0 ok, 1 mismatch, 75 could not finish (venue unreachable).
"""

from __future__ import annotations

import argparse
import json
import sys

from trader.cli.options import Verbs, load
from trader.exit_codes import EX_CONFIG, EX_DATAERR, EX_FAILED, EX_TEMPFAIL


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "reconcile",
        parents=[common],
        help="reconcile the ledger with the broker now and print the report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="book and cancel nothing, only report"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 - loads in 50 ms: not for --help

    from trader.broker.safety import StartRefused, ledger_holder  # noqa: PLC0415
    from trader.config.strict import config_refusal  # noqa: PLC0415
    from trader.engine.reconcile_now import reconcile_now, report_json  # noqa: PLC0415
    from trader.ledger.database import LedgerDamaged, LedgerError  # noqa: PLC0415
    from trader.market.feed import ExchangeCallFailed, UnknownSymbols  # noqa: PLC0415

    loaded = load(args)
    settings = loaded.settings
    refusal = config_refusal(settings, loaded.origins, loaded.secrets_in_files)
    if refusal is None and not settings.ledger.path.exists():
        refusal = f"no ledger at {settings.ledger.path}"
    if refusal is not None:
        sys.stderr.write(f"trader reconcile: {refusal}\n")
        return EX_CONFIG
    holder = ledger_holder(settings.ledger.path)
    dry_run = bool(args.dry_run) or holder is not None
    if holder is not None:
        sys.stderr.write(f"trader reconcile: the ledger is held by {holder}: a dry run only\n")
    try:
        report = asyncio.run(reconcile_now(settings, dry_run))
    except (StartRefused, LedgerError, UnknownSymbols, ValueError) as error:
        sys.stderr.write(f"trader reconcile: {error}\n")
        # A damaged ledger is refused before a row is read: a data error, restored by hand.
        return EX_DATAERR if isinstance(error, LedgerDamaged) else EX_CONFIG
    except ExchangeCallFailed as error:
        sys.stderr.write(f"trader reconcile: the venue cannot be reached: {error}\n")
        return EX_TEMPFAIL
    if report is None:
        sys.stdout.write("the ledger has no account yet: nothing to reconcile\n")
        return 0
    if args.json:
        data = report_json(report)
        if report.positions:  # a perpetual account's: side, leverage, margin, liquidation
            data["positions"] = [position.as_json() for position in report.positions]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(report.text)
    if report.problems:
        return EX_FAILED  # a mismatch
    return EX_TEMPFAIL if report.incomplete is not None else 0
