"""`trader ledger backup LEDGER DEST`: an online backup of the ledger, taken while the daemon runs,
private (0600) and checked with integrity_check before it is put at DEST. `trader ledger new
LEDGER`: a new ledger where there is nothing or an empty file (the daemon refuses an empty file
until asked: a ledger a full disk emptied looks the same).

Restore (README, "Backups and restore"): stop the daemon; move the ledger and its -wal and
-shm files aside together; copy the backup to the ledger's path; start the daemon.
Exit status: 0 done, 65 the ledger is missing, unsafe or damaged, 73 DEST cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trader.cli.options import Verbs
from trader.exit_codes import EX_CANTCREAT, EX_DATAERR


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "ledger",
        help="back up the ledger while the daemon runs, or make a new one",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    backup = actions.add_parser(
        "backup",
        help="copy the ledger to DEST with SQLite's online backup, checked (0600)",
        description="Copy LEDGER to DEST (a file, or a folder to put a dated file in) with "
        "SQLite's backup API, while a daemon may be writing it; the copy is checked with "
        "integrity_check and written private before it replaces DEST.",
    )
    backup.add_argument("ledger", type=Path, metavar="LEDGER", help="the ledger file")
    backup.add_argument(
        "dest", metavar="DEST", help="the backup file, or a folder (one there, or ending in /)"
    )
    backup.set_defaults(handler=run_backup)
    new = actions.add_parser(
        "new",
        help="make a new ledger at LEDGER, where there is nothing or an empty file",
        description="Make a new, empty ledger at LEDGER: the way to start afresh where an "
        "empty file is (the daemon refuses one). A file with anything in it is refused.",
    )
    new.add_argument("ledger", type=Path, metavar="LEDGER", help="the ledger file")
    new.set_defaults(handler=run_new)


def run_backup(args: argparse.Namespace) -> int:
    from trader.ledger.backup import BackupFailed, backup  # noqa: PLC0415
    from trader.ledger.database import LedgerError  # noqa: PLC0415

    try:
        made = backup(args.ledger, Path(args.dest), folder=args.dest.endswith(os.sep))
    except LedgerError as error:
        sys.stderr.write(f"trader ledger backup: {error}\n")
        return EX_DATAERR
    except BackupFailed as error:
        sys.stderr.write(f"trader ledger backup: {error}\n")
        return EX_CANTCREAT
    sys.stdout.write(made.line(args.ledger) + "\n")
    return 0


def run_new(args: argparse.Namespace) -> int:
    from trader.ledger.database import LedgerError, new_ledger  # noqa: PLC0415

    try:
        new_ledger(args.ledger)
    except LedgerError as error:
        sys.stderr.write(f"trader ledger new: {error}\n")
        return EX_DATAERR
    sys.stdout.write(f"a new, empty ledger at {args.ledger}\n")
    return 0
