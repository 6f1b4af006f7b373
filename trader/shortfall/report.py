"""`trader shortfall --out DIR`'s report: the sections as blocks (`trader.backtest.document`),
rendered as report.md (beside its PNG plots) and a self-contained report.html, with
shortfall.json (the comparison and the attribution, amounts as exact decimal strings) and
costs.json (the costs the daemon's fills measured, which `trader backtest --costs-from` reads).

"Read this first" says in one line what the daemon made against its replay and why (the
attribution's verdict), whether every decision was reproduced, the period and what could not
be compared. The attribution's table shows every part, zeros too, exactly: its amounts add up
to the difference to the last digit. Every file goes through `private_files` (whole, private,
never through a link planted at its name)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trader.backtest.document import (
    Image,
    write_pages,
)
from trader.backtest.measured_costs import (
    FILE_NAME as COSTS_FILE,
)
from trader.backtest.measured_costs import (
    CostsFileError,
    costs_document,
    read_costs_file,
)
from trader.domain.shortfall_costs import MeasuredCosts, measure_costs
from trader.exit_codes import EX_CANTCREAT
from trader.private_files import UnsafePath, write_file
from trader.shortfall.compare import OrderComparison
from trader.shortfall.read import UnreadableLedger, read_ledger
from trader.shortfall.report_costs import measured
from trader.shortfall.report_facts import JSON_FILE, MODELLED, Shortfall, means, slips
from trader.shortfall.report_sections import read_this_first, report_blocks

if TYPE_CHECKING:
    from trader.shortfall.command import ShortfallOutcome


STEM = "report"
FORMAT = "trader.shortfall/1"
WHAT = "the report folder"


class NothingToReport(Exception):
    """The command stopped before it compared anything: its first line says why."""


def write_shortfall_report(
    outcome: ShortfallOutcome,
    folder: Path,
    *,
    begin: datetime | None = None,
    end: datetime | None = None,
) -> list[Path]:
    """report.md, report.html, shortfall.json, the plots and, unless the command wrote it,
    costs.json (where the daemon filled anything: nothing measured, no file) in `folder`;
    the files written.
    NothingToReport for an outcome that compared nothing; UnsafePath or OSError where a file
    cannot be written; UnreadableLedger where the replay's ledger, not in the outcome, cannot
    be read back."""
    if outcome.record is None or outcome.comparison is None:
        first = outcome.lines[0] if outcome.lines else "nothing compared"
        raise NothingToReport(first)
    modelled = outcome.modelled
    if modelled is None and outcome.result is not None and outcome.result.ledger.is_file():
        modelled = read_ledger(outcome.result.ledger)
    facts = Shortfall(
        outcome.record.path,
        outcome.code,
        outcome.lines,
        outcome.record,
        modelled,
        outcome.result,
        outcome.comparison,
        outcome.attribution,
        begin,
        end,
        outcome.period,
        outcome.written,
        outcome.refused,
        outcome.caveats,
    )
    return write_report(facts, folder)


def with_report(
    outcome: ShortfallOutcome,
    folder: Path,
    begin: datetime | None = None,
    end: datetime | None = None,
) -> ShortfallOutcome:
    """The outcome with its report written in `folder` (`--out DIR`): a last line naming the
    report; or, where it cannot be written, exit 73 and the reason as the first line. An
    outcome that compared nothing is returned as it is (its first line already says why)."""
    if outcome.record is None or outcome.comparison is None:
        return outcome
    try:
        written = write_shortfall_report(outcome, folder, begin=begin, end=end)
    except (UnsafePath, OSError, UnreadableLedger) as error:
        said = f"trader shortfall: cannot write the report in {folder}: {error}"
        return replace(outcome, code=EX_CANTCREAT, lines=[said, *outcome.lines])
    written = [*outcome.written, *written]
    names = ", ".join(p.name for p in written)
    said = f"report: {folder / f'{STEM}.html'} ({names})"
    return replace(outcome, lines=[*outcome.lines, said], written=written)


def write_report(facts: Shortfall, folder: Path) -> list[Path]:
    """The report's files in `folder` (`write_shortfall_report`), the costs measured on the
    attribution's own runs where the outcome has them, else on the compared orders."""
    if facts.period is not None:  # the attribution's own runs, as the command measures them
        actual_costs: MeasuredCosts | None = measure_costs(facts.period.actual)
        modelled_costs: MeasuredCosts | None = measure_costs(facts.period.modelled)
        costs_problem = None
    else:
        actual_costs, modelled_costs, costs_problem = measured(facts.comparison.orders)
    written: list[Path] = []
    if actual_costs is not None and any(g.fills for g in actual_costs.groups):
        written.append(_write_costs(facts, folder, actual_costs, modelled_costs))
    costs = None
    if written:
        try:  # what --costs-from will take from it, read back as it reads it
            costs = read_costs_file(folder / COSTS_FILE).figures
        except CostsFileError as error:
            costs_problem = f"{COSTS_FILE} cannot be used by --costs-from: {error}"
    images = _plots(facts, folder)
    written += [folder / image.file for image in images.values()]
    blocks = report_blocks(facts, images, costs, (actual_costs, modelled_costs), costs_problem)
    title = f"Shortfall of {facts.ledger.name} against its replay"
    written += write_pages(folder, STEM, title, blocks)
    document = json.dumps(shortfall_json(facts, bool(costs)), indent=1, default=str) + "\n"
    written.append(write_file(folder / JSON_FILE, document, what=WHAT))
    return written


def _write_costs(
    facts: Shortfall, folder: Path, actual: MeasuredCosts, modelled: MeasuredCosts | None
) -> Path:
    ticks = facts.ticks() or [t.at for t in facts.actual.ticks]
    document = costs_document(
        actual,
        venue=facts.venue,
        mode=facts.name,
        currency=facts.actual.currency,
        begin=ticks[0],
        end=ticks[-1],
        ledger=facts.ledger,
        modelled=modelled,
    )
    return write_file(folder / COSTS_FILE, json.dumps(document, indent=2) + "\n", what=WHAT)


# --- the plots ---------------------------------------------------------------------------------


def _plots(facts: Shortfall, folder: Path) -> dict[str, Image]:
    # matplotlib loads only for a report written to files (a second or so).
    from trader.shortfall.plots import (  # noqa: PLC0415
        equity_plot,
        slippage_plot,
        waterfall_plot,
    )

    images = {}
    modelled = facts.modelled.equity if facts.modelled is not None else []
    if facts.actual.equity or modelled:
        title = f"Equity booked: {facts.name} and {MODELLED}"
        equity_plot(
            folder / "equity.png", title, facts.actual.equity, modelled, (facts.name, "replay")
        )
        images["equity"] = Image("equity.png", title)
    a = facts.attribution
    if a is not None:
        title = f"From the replay's P&L to the {facts.name}'s, part by part ({a.currency})"
        steps = [(part.label, value) for part, value in a.parts.items() if value]
        waterfall_plot(
            folder / "attribution.png",
            title,
            ("replay P&L", a.modelled_pnl),
            steps,
            (f"{facts.name} P&L", a.actual_pnl),
        )
        images["attribution"] = Image("attribution.png", title)
    runs = {
        facts.name: slips(facts.comparison.orders, True),
        "replay": slips(facts.comparison.orders, False),
    }
    if any(runs.values()):
        title = "Slippage beyond the touch of the decision's quote (bps, mean per fill)"
        by_hour = {
            run: means((s.fill.at.hour, s.bps) for s in found) for run, found in runs.items()
        }
        by_kind = {
            run: means((_kind(s.order), s.bps) for s in found) for run, found in runs.items()
        }
        slippage_plot(folder / "slippage.png", title, by_hour, by_kind)
        images["slippage"] = Image("slippage.png", title)
    return images


def _kind(order: OrderComparison) -> str:
    return f"{order.side.value} {order.type.value}"


# --- the JSON ----------------------------------------------------------------------------------


def shortfall_json(facts: Shortfall, costs: bool) -> dict[str, Any]:
    from trader.shortfall.command import as_json  # noqa: PLC0415 - the command imports us

    ticks = facts.ticks()
    result = facts.result
    return {
        "format": FORMAT,
        "ledger": str(facts.ledger),
        "replay_ledger": str(result.ledger) if result is not None else None,
        "code": facts.code,
        "read_this_first": read_this_first(facts, costs),
        "period": {"from": ticks[0].isoformat(), "to": ticks[-1].isoformat()} if ticks else None,
        "comparison": as_json(facts.comparison, facts.attribution),
        "attribution_refused": facts.refused(),
        "runs": [
            {
                "id": r.id,
                "began_by": r.began_by,
                "started_at": r.started_at.isoformat(),
                "stopped_at": r.stopped_at.isoformat() if r.stopped_at else None,
                "broker": r.broker,
                "venue": r.venue,
                "settings_digest": r.settings_digest,
                "version": r.version,
            }
            for r in facts.actual.runs
        ],
        "state_events": [
            {"at": e.at.isoformat(), "state": e.state, "reason": e.reason}
            for e in facts.actual.events
        ],
        "late_ticks": [
            {"at": t.at.isoformat(), "lateness_s": t.lateness_s, "missed": t.missed}
            for t in facts.actual.late
        ],
        "stretches": [
            {
                "from": s.begin.isoformat(),
                "to": s.end.isoformat(),
                "settings_digest": s.digest,
                "overridden": [
                    {"key": k, "recorded": rec, "used": used} for k, rec, used in s.overridden
                ],
            }
            for s in (result.stretches if result is not None else [])
        ],
        "missing_forecasts": dict(result.missing) if result is not None else {},
        "costs": COSTS_FILE if costs else None,
        "lines": list(facts.lines),
    }
