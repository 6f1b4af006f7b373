"""The end of a replay (`trader run --replay`, and so the daemon `trader demo` runs): its ledger's
skipped ticks per symbol by reason, said first, and the exit status `trader backtest` would
give: 1 when a symbol skipped more than `backtest.max_skipped_share` of the ticks, unless
accepted. A replay reads its whole ledger: a replay resumed after a stop is one replay."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from trader.backtest.simulate import read_run
from trader.backtest.skip_verdict import ACCEPT, SETTING, SkipVerdict
from trader.exit_codes import EX_FAILED, EX_OK
from trader.logging import get_logger


def read_verdict(ledger: Path, symbols: Sequence[str], limit: float) -> SkipVerdict:
    """The ticks the ledger at `ledger` booked, and each symbol's skipped ones."""
    run = asyncio.run(read_run("replay", ledger, symbols=symbols))
    return SkipVerdict(sum(run.outcomes.values()), run.skipped_by_symbol, limit)


def end_replay(verdict: SkipVerdict, *, accepted: bool, out: TextIO) -> int:
    """Say the verdict on `out` (the command's first lines of output: its log goes to stderr),
    and in the log when it fails the run; the exit status."""
    if verdict.ticks == 0:  # stopped (or failed) before its first tick: nothing to judge
        out.write("trader run --replay did not do what was asked: it booked no tick\n")
        get_logger("trader.replay").error("replay booked no tick")
        return EX_FAILED
    out.write(verdict.text("trader run --replay", ACCEPT, accepted))
    if not verdict.fails:
        return EX_OK  # the daemon's last line stays its own "stopped"
    get_logger("trader.replay").error(
        "replay skipped too many ticks", ticks=verdict.ticks,
        skipped={s: dict(r) for s, r in verdict.by_symbol.items() if r}, over=verdict.over,
        limit=verdict.limit, setting=SETTING, accepted=accepted,
    )  # fmt: skip
    return EX_OK if accepted else EX_FAILED
