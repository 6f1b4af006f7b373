"""The report's sections on what the daemon's ledger recorded beside the trading: late and
missed ticks, halts, starts and restarts, and the settings the replay ran each stretch with."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from trader.backtest.document import (
    Block,
    Bullets,
    Heading,
    Paragraph,
    Table,
)
from trader.shortfall.report_facts import SHOWN, Shortfall, when


def tick_blocks(facts: Shortfall) -> list[Block]:
    record, c = facts.actual, facts.comparison
    late = [t for t in record.late if not t.missed]
    missed = [t for t in record.late if t.missed]
    items = [
        f"ticks run late: {len(late)}"
        + (f" (the latest {max(t.lateness_s for t in late):.1f} s)" if late else ""),
        f"ticks missed (later than the grace, not run): {len(missed)}",
        f"ticks the daemon did not run, which the replay ran: {len(c.ticks_only_modelled)}"
        + _first(c.ticks_only_modelled),
        f"ticks the daemon ran, which the replay could not: {len(c.ticks_only_actual)}"
        + _first(c.ticks_only_actual),
    ]
    blocks: list[Block] = [Bullets(items)]
    if record.late:
        blocks.append(
            Table(
                ["tick", "late by (s)", "run"],
                [
                    [when(t.at), f"{t.lateness_s:.1f}", "missed" if t.missed else "late"]
                    for t in record.late[:SHOWN]
                ],
                [False, True, False],
            )
        )
    blocks.append(Heading(3, "Halts"))
    if record.events:
        blocks.append(
            Table(
                ["at", "state", "reason"],
                [[when(e.at), e.state, e.reason] for e in record.events],
                [False, False, False],
            )
        )
    else:
        blocks.append(Paragraph("The trading state never changed: no halt."))
    blocks.append(Heading(3, "Starts and restarts"))
    if record.runs:
        blocks.append(
            Table(
                [
                    "run",
                    "began by",
                    "started at",
                    "stopped at",
                    "broker",
                    "venue",
                    "settings",
                    "version",
                ],
                [
                    [
                        str(r.id),
                        r.began_by,
                        when(r.started_at),
                        when(r.stopped_at) if r.stopped_at else "no stop recorded (killed)",
                        r.broker,
                        r.venue,
                        f"`{r.settings_digest[:12]}`",
                        r.version,
                    ]
                    for r in record.runs
                ],
                [True, False, False, False, False, False, False, False],
            )
        )
    else:
        blocks.append(Paragraph("The ledger recorded no starts (older than schema 10)."))
    return blocks


def _first(ticks: Sequence[datetime]) -> str:
    return f" (first {when(ticks[0])})" if ticks else ""


def settings_blocks(facts: Shortfall) -> list[Block]:
    result = facts.result
    if result is None:
        return [Paragraph("The replay did not run.")]
    overridden: list[tuple[str, Any, Any]] = []
    for stretch in result.stretches:
        overridden += [d for d in stretch.overridden if d not in overridden]
    blocks: list[Block] = [
        Paragraph(
            "The replay ran each stretch of the period with the settings the daemon recorded "
            "when it started it (the broker made paper, on the daemon's account), on the bars "
            "its ledger stored, with the forecasts it made."
        ),
        Table(
            ["from", "to", "settings", "overridden"],
            [
                [
                    when(s.begin),
                    when(s.end),
                    f"`{s.digest[:12]}`" if s.digest else "given here (none recorded)",
                    ", ".join(k for k, _, _ in s.overridden) or "none",
                ]
                for s in result.stretches
            ],
            [False, False, False, False],
        ),
        Bullets(
            [
                f"overridden: `{k}` = {used!r} (the daemon ran with {recorded!r})"
                for k, recorded, used in overridden
            ]
            or ["no setting overridden: the recorded settings, as the daemon ran them"]
        ),
    ]
    notes = list(result.notes)
    if result.missing:
        notes.append(f"forecasts the ledger lacked: {dict(sorted(result.missing.items()))}")
    notes.append(f"forecasts served from the daemon's ledger: {result.served:,}")
    blocks.append(Bullets(notes))
    return blocks
